"""The log lines' format and level, checked before anything is built
(:func:`dna_mm.config.check.check_config`):

* ``log_processor`` (mmengine's ``LogProcessor``, which formats every log line; one of another
  ``type`` is its own affair): its keys ``LogProcessor.__init__``'s arguments (a typo is a
  ``TypeError`` as the runner is made); ``window_size`` an int > 0 (mmengine smooths the losses
  and times over it: -5 logs NaN for the first 5 iterations, into ``scalars.json`` too, 0 is
  silently a running mean, ``'abc'``, ``1.5`` or ``'global'``, a ``custom_cfg`` entry's, stop the
  run at its first log line); ``num_digits`` an int >= 0 (-1: ``Format specifier missing
  precision`` there); ``by_epoch`` a bool; ``custom_cfg`` a list of dicts, each with the keys its
  ``_collect_scalars`` reads (``data_src``, required, and ``log_name``: strs; ``method_name``,
  required, a statistic ``HistoryBuffer`` registers, ``'avg'`` being a ``KeyError`` at the first
  log line; that statistic's arguments: ``window_size``, an int > 0, ``'global'`` or ``'epoch'``,
  which ``current`` does not take), ``window_size`` given and not ``'epoch'`` with
  ``by_epoch=False`` and each ``log_name`` (default: the ``data_src``) once (mmengine's
  ``_check_custom_cfg``), the closest valid name suggested;
* ``log_level``: a level name of Python's ``logging`` or an int (mmengine's ``MMLogger`` looks a
  name up in ``logging``'s table: ``'INF0'`` or ``'info'`` would be a ``KeyError`` traceback as
  the runner is made), the closest name suggested.
"""

from __future__ import annotations

import difflib
from typing import Any

from ..build import type_name
from .values import not_positive, unknown_keys


def log_processor_problems(log_processor: Any) -> list[str]:
    """``log_processor``: a dict (mmengine's runner takes nothing else but a ``LogProcessor``), its
    keys ``LogProcessor.__init__``'s arguments, its ``window_size``, ``num_digits``, ``by_epoch``
    and ``custom_cfg`` what mmengine's ``LogProcessor`` can format the log lines with (the module
    docstring); each of these only where it is given."""
    import inspect

    from mmengine.runner import LogProcessor

    if log_processor is None or isinstance(log_processor, LogProcessor):
        return []
    if not isinstance(log_processor, dict):
        return [f"log_processor must be a dict of mmengine's LogProcessor arguments, got {log_processor!r}"]
    if type_name(log_processor.get('type', 'LogProcessor')) != 'LogProcessor':
        return []  # a processor of a project's own (a subclass, say): its arguments are its own affair
    valid = [p for p in inspect.signature(LogProcessor.__init__).parameters if p != 'self']
    given = {k: v for k, v in log_processor.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
    out = unknown_keys(given, valid, 'log_processor', "an argument of mmengine's LogProcessor")
    window = log_processor.get('window_size')
    if isinstance(window, str) and window in CUSTOM_WINDOWS:
        out.append(
            f'log_processor.window_size must be an int > 0, got {window!r} (mmengine smooths with an int '
            f"window; {' / '.join(map(repr, CUSTOM_WINDOWS))} is a custom_cfg entry's window_size)"
        )
    else:
        out += not_positive(window, 'log_processor.window_size', integer=True)
    if 'num_digits' in log_processor:
        digits = log_processor['num_digits']
        if isinstance(digits, bool) or not isinstance(digits, int):
            out.append(f'log_processor.num_digits must be an int >= 0, got {digits!r}')
        elif digits < 0:
            out.append(f'log_processor.num_digits must be >= 0, got {digits}')
    by_epoch = log_processor.get('by_epoch', True)
    if not isinstance(by_epoch, bool):
        out.append(f'log_processor.by_epoch must be True or False, got {by_epoch!r}')
    return out + _custom_log_problems(log_processor.get('custom_cfg'), bool(by_epoch))


#: the window sizes a ``log_processor.custom_cfg`` entry may name (mmengine's
#: ``LogProcessor._parse_windows_size``: the iterations of the epoch so far, of the run so far)
CUSTOM_WINDOWS = ('global', 'epoch')


def _custom_log_problems(custom_cfg: Any, by_epoch: bool) -> list[str]:
    """``log_processor.custom_cfg``: a list of dicts, each with the keys mmengine's
    ``LogProcessor._collect_scalars`` reads (``data_src``, ``log_name``; the rest it passes to
    ``HistoryBuffer.statistics``: ``method_name`` and that statistic's arguments), ``data_src``
    and ``method_name`` given (an assertion as the runner is made, a ``TypeError`` at the first log
    line), ``method_name`` a statistic ``HistoryBuffer`` registers (a ``KeyError`` there),
    ``window_size`` what ``_parse_windows_size`` and the statistic take (an int > 0, which
    ``current`` does not take; ``'global'``, ``'epoch'``; ``None``: the whole history), and what
    ``_check_custom_cfg`` asserts: each ``log_name`` once, ``window_size`` given and not
    ``'epoch'`` when ``by_epoch`` is False."""
    import inspect

    from mmengine.logging import HistoryBuffer

    if not custom_cfg:  # mmengine's "none"
        return []
    if not isinstance(custom_cfg, (list, tuple)):
        return [
            f"log_processor.custom_cfg must be a list of dicts (e.g. [dict(data_src='loss', "
            f"method_name='mean', window_size='global')]), got {custom_cfg!r}"
        ]
    # mmengine's statistics and any registered since (a buffer, once made, has set the defaults)
    statistics = HistoryBuffer()._statistics_methods
    out: list[str] = []
    names: dict[str, int] = {}
    for i, entry in enumerate(custom_cfg):
        key = f'log_processor.custom_cfg[{i}]'
        if not isinstance(entry, dict):
            out.append(f'{key} must be a dict (data_src=..., method_name=..., ...), got {entry!r}')
            continue
        method = entry.get('method_name')
        takes = None  # the statistic's arguments (None: any)
        if isinstance(method, str) and method in statistics:
            params = list(inspect.signature(statistics[method]).parameters.values())[1:]  # after self
            if all(p.kind is not p.VAR_KEYWORD for p in params):
                takes = [p.name for p in params]
        valid = list(dict.fromkeys(['data_src', 'log_name', 'method_name', 'window_size', *(takes or [])]))
        own = {k: v for k, v in entry.items() if k != '_delete_'}  # list_delete_problems names it
        out += unknown_keys(own, valid, key, "a key mmengine's LogProcessor reads from a custom_cfg entry")
        for arg in ('data_src', 'log_name'):
            if arg in entry and not isinstance(entry[arg], str):
                out.append(f'{key}.{arg} must be a str (the name of a logged scalar), got {entry[arg]!r}')
        if 'data_src' not in entry:
            out.append(f"{key} needs data_src (the logged scalar it summarises, e.g. 'loss')")
        methods = list(statistics)
        if method is None:
            out.append(
                f'{key} needs method_name (a statistic of mmengine\'s HistoryBuffer: {", ".join(methods)})'
            )
        elif not isinstance(method, str) or method not in statistics:
            near = difflib.get_close_matches(str(method), methods, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(
                f"{key}.method_name must be a statistic of mmengine's HistoryBuffer, got {method!r} "
                f'({hint}valid: {", ".join(methods)})'
            )
        window = entry.get('window_size')
        if takes is not None and 'window_size' not in takes and ('window_size' in entry or not by_epoch):
            fix = (
                ', and with log_processor.by_epoch=False every entry needs one: use another method_name'
                if not by_epoch
                else ': drop it'
            )
            out.append(
                f"{key}.window_size: HistoryBuffer's {method!r} takes none (a TypeError at the first log "
                f'line){fix}'
            )
        elif not by_epoch and 'window_size' not in entry:
            out.append(
                f"{key} needs window_size with log_processor.by_epoch=False (mmengine's LogProcessor reads "
                'it from every entry then)'
            )
        elif isinstance(window, str) and window in CUSTOM_WINDOWS:
            if window == 'epoch' and not by_epoch:
                out.append(
                    f"{key}.window_size cannot be 'epoch' with log_processor.by_epoch=False (mmengine's "
                    "LogProcessor asserts it): 'global' or an int > 0"
                )
        else:
            out += not_positive(window, f'{key}.window_size', CUSTOM_WINDOWS, True)
        name = entry.get('log_name', entry.get('data_src'))
        if isinstance(name, str) and name in names:
            out.append(
                f'{key}: log name {name!r} again (custom_cfg[{names[name]}] has it; each log_name, default '
                f'the data_src, may be given once: set a log_name)'
            )
        elif isinstance(name, str):
            names[name] = i
    return out


def log_level_problems(level: Any) -> list[str]:
    """``log_level``: a level name Python's ``logging`` knows (mmengine's ``MMLogger`` looks a
    string up in ``logging``'s table, case and all: a ``KeyError`` as the runner is made) or an
    int level, the closest name suggested."""
    import logging

    names = list(logging.getLevelNamesMapping())
    if (isinstance(level, int) and not isinstance(level, bool)) or (
        isinstance(level, str) and level in names
    ):
        return []
    near = difflib.get_close_matches(level.upper(), names, n=1) if isinstance(level, str) else []
    hint = f'did you mean {near[0]!r}? ' if near else ''
    return [
        f"log_level must be a level name of Python's logging or an int, got {level!r} "
        f'({hint}valid: {", ".join(names)})'
    ]
