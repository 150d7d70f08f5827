"""``log_processor`` and ``log_level`` are checked before anything is built, in every mode
(:func:`dna_mm.config.check_config`): mmengine's ``LogProcessor`` formats every log line, and
takes what it is given until then (a ``window_size`` of -5 logs NaN for the first 5 iterations,
into ``scalars.json`` too; 0 is silently a running mean; ``'abc'``, a ``num_digits`` of -1 or a
``custom_cfg`` ``method_name='avg'`` stop the run at its first log line); mmengine's ``MMLogger``
looks ``log_level`` up in ``logging``'s table (``'INF0'``: a ``KeyError`` traceback). Each is one
line naming the key, the closest valid name suggested."""

from __future__ import annotations

import inspect
import re

import pytest
from conftest import DEMO_CONFIG, REPO, load_tool
from mmengine.config import Config
from mmengine.logging import HistoryBuffer
from mmengine.runner import LogProcessor

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.config.prepare import limit_topk
from dna_mm.errors import ConfigError

#: the statistics mmengine's HistoryBuffer registers, as the messages list them
METHODS = ', '.join(HistoryBuffer()._statistics_methods)


def _refused(cfg: Config, mode: str = 'train') -> str:
    with pytest.raises(ConfigError) as err:
        check_config(cfg, mode)
    return str(err.value)


def _demo(**values) -> Config:
    """The demo config (``log_processor = dict(type='LogProcessor', window_size=20,
    by_epoch=True)``, ``log_level = 'INFO'``) with ``values`` set: ``log_processor.<key>`` for a
    key of ``LogProcessor`` (``None``: removed), the top-level key otherwise."""
    cfg = Config.fromfile(DEMO_CONFIG)
    for key, value in values.items():
        if key.startswith('log_processor_'):
            key = key[len('log_processor_') :]
            if value is None:
                cfg.log_processor.pop(key)
            else:
                cfg.log_processor[key] = value
        else:
            cfg[key] = value
    return cfg


def _custom(*entries: dict, **processor) -> Config:
    """The demo config with ``log_processor.custom_cfg=list(entries)`` (and ``processor``'s keys)."""
    cfg = _demo(log_processor_custom_cfg=list(entries))
    cfg.log_processor.update(processor)
    return cfg


LP = 'log_processor'
C0 = f'{LP}.custom_cfg[0]'
#: ``(the config, made when the test runs; what the error says)``
REFUSED = [
    (lambda: _demo(log_processor_window_size=-5), f'{LP}.window_size must be > 0, got -5'),
    (lambda: _demo(log_processor_window_size=0), f'{LP}.window_size must be > 0, got 0'),
    (lambda: _demo(log_processor_window_size='abc'), f"{LP}.window_size must be an int > 0, got 'abc'"),
    (lambda: _demo(log_processor_window_size=1.5), f'{LP}.window_size must be an int > 0, got 1.5'),
    (
        lambda: _demo(log_processor_window_size='global'),  # mmengine's HistoryBuffer.mean asserts an int
        f"{LP}.window_size must be an int > 0, got 'global' (mmengine smooths with an int window; "
        "'global' / 'epoch' is a custom_cfg entry's window_size)",
    ),
    (lambda: _demo(log_processor_num_digits=-1), f'{LP}.num_digits must be >= 0, got -1'),
    (lambda: _demo(log_processor_num_digits=2.0), f'{LP}.num_digits must be an int >= 0, got 2.0'),
    (lambda: _demo(log_processor_by_epoch='no'), f"{LP}.by_epoch must be True or False, got 'no'"),
    (
        lambda: _demo(log_processor_windw_size=10),
        f"{LP}.windw_size is not an argument of mmengine's LogProcessor (did you mean 'window_size'? "
        f'valid: window_size, by_epoch, custom_cfg, num_digits, log_with_hierarchy, mean_pattern)',
    ),
    (lambda: _demo(log_processor=5), f"{LP} must be a dict of mmengine's LogProcessor arguments, got 5"),
    (
        lambda: _demo(log_processor_custom_cfg=dict(data_src='loss', method_name='mean')),
        f"{LP}.custom_cfg must be a list of dicts (e.g. [dict(data_src='loss', method_name='mean', "
        "window_size='global')]), got {'data_src': 'loss', 'method_name': 'mean'}",
    ),
    (lambda: _custom('loss'), f"{C0} must be a dict (data_src=..., method_name=..., ...), got 'loss'"),
    (
        lambda: _custom(dict(data_src='loss', method_name='avg')),  # a KeyError at the first log line
        f"{C0}.method_name must be a statistic of mmengine's HistoryBuffer, got 'avg' (valid: {METHODS})",
    ),
    (
        lambda: _custom(dict(data_src='loss', method_name='maen')),
        f"{C0}.method_name must be a statistic of mmengine's HistoryBuffer, got 'maen' (did you mean "
        f"'mean'? valid: {METHODS})",
    ),
    (
        lambda: _custom(dict(data_src='loss', method='mean')),  # as mmengine's own docstring writes it
        f"{C0}.method is not a key mmengine's LogProcessor reads from a custom_cfg entry (did you mean "
        f"'method_name'? valid: data_src, log_name, method_name, window_size); {C0} needs method_name "
        f"(a statistic of mmengine's HistoryBuffer: {METHODS})",
    ),
    (
        lambda: _custom(dict(method_name='mean')),
        f"{C0} needs data_src (the logged scalar it summarises, e.g. 'loss')",
    ),
    (
        lambda: _custom(dict(data_src=3, method_name='mean', log_name=4)),
        f'{C0}.data_src must be a str (the name of a logged scalar), got 3; '
        f'{C0}.log_name must be a str (the name of a logged scalar), got 4',
    ),
    (
        lambda: _custom(dict(data_src='loss', method_name='mean', window_size=-3)),
        f'{C0}.window_size must be > 0 (or global / epoch), got -3',
    ),
    (
        lambda: _custom(dict(data_src='loss', method_name='mean', window_size='epoc')),
        f"{C0}.window_size must be an int > 0 (or global / epoch), got 'epoc'",
    ),
    (
        lambda: _custom(dict(data_src='loss', method_name='current', window_size=5)),
        f"{C0}.window_size: HistoryBuffer's 'current' takes none (a TypeError at the first log line): "
        'drop it',
    ),
    (
        lambda: _custom(dict(data_src='loss', method_name='mean'), dict(data_src='loss', method_name='max')),
        f"{LP}.custom_cfg[1]: log name 'loss' again (custom_cfg[0] has it; each log_name, default the "
        'data_src, may be given once: set a log_name)',
    ),
    (
        lambda: _custom(
            dict(data_src='loss', method_name='mean', window_size='epoch'),
            dict(data_src='acc', method_name='mean'),
            dict(data_src='top', method_name='current'),
            by_epoch=False,
        ),
        f"{C0}.window_size cannot be 'epoch' with log_processor.by_epoch=False (mmengine's LogProcessor "
        "asserts it): 'global' or an int > 0; "
        f"{LP}.custom_cfg[1] needs window_size with log_processor.by_epoch=False (mmengine's "
        'LogProcessor reads it from every entry then); '
        f"{LP}.custom_cfg[2].window_size: HistoryBuffer's 'current' takes none (a TypeError at the first "
        'log line), and with log_processor.by_epoch=False every entry needs one: use another method_name',
    ),
    (
        lambda: _demo(log_level='INF0'),
        "log_level must be a level name of Python's logging or an int, got 'INF0' (did you mean 'INFO'? "
        'valid: CRITICAL, FATAL, ERROR, WARN, WARNING, INFO, DEBUG, NOTSET)',
    ),
    (
        lambda: _demo(log_level='info'),  # mmengine looks the name up as it is written
        "log_level must be a level name of Python's logging or an int, got 'info' (did you mean 'INFO'? "
        'valid: CRITICAL, FATAL, ERROR, WARN, WARNING, INFO, DEBUG, NOTSET)',
    ),
    (
        lambda: _demo(log_level=None),
        "log_level must be a level name of Python's logging or an int, got None "
        '(valid: CRITICAL, FATAL, ERROR, WARN, WARNING, INFO, DEBUG, NOTSET)',
    ),
]


@pytest.mark.parametrize('mode', ['train', 'test'])
@pytest.mark.parametrize('make, message', REFUSED)
def test_a_log_processor_or_log_level_mistake_is_named(make, message, mode) -> None:
    """Each alone, the whole error (one line), in both modes: a test run logs too."""
    assert _refused(make(), mode) == message


def test_what_mmengine_takes_passes() -> None:
    """No log_processor (mmengine's defaults), ``window_size=None`` (the whole history), another
    processor's arguments (its own affair), an int level, and a ``custom_cfg`` as mmengine's
    docstring means it: 'global', 'epoch', a log_name beside its data_src, 'current' without a
    window, and with ``by_epoch=False`` windows everywhere."""
    passing = [
        _demo(log_processor=None),
        _demo(log_processor_window_size=None, log_processor_num_digits=0, log_level='WARNING'),
        _demo(log_processor=dict(type='MyLogProcessor', window_size=-5, colour='red')),
        _demo(log_level=10),
        _custom(
            dict(data_src='loss', method_name='mean', window_size='global'),
            dict(data_src='loss', log_name='loss_epoch', method_name='max', window_size='epoch'),
            dict(data_src='acc', method_name='current'),
            dict(data_src='top1', method_name='min', window_size=50),
        ),
        _custom(dict(data_src='loss', method_name='mean', window_size='global'), by_epoch=False),
    ]
    for cfg in passing:
        for mode in ('train', 'test'):
            check_config(cfg, mode)


def test_the_keys_and_statistics_are_mmengines() -> None:
    """The keys come from ``LogProcessor.__init__`` and the statistics from ``HistoryBuffer``,
    so a release that adds one is followed; the messages list them in that order."""
    args = [p for p in inspect.signature(LogProcessor.__init__).parameters if p != 'self']
    message = _refused(_demo(log_processor_x=1))
    assert message.endswith(f'(valid: {", ".join(args)})')
    assert {'min', 'max', 'current', 'mean'} <= set(METHODS.split(', '))


def test_every_shipped_config_passes() -> None:
    """configs/ and configs/imagenet/ (their log_level and, but for the ImageNet ones, their
    log_processor from their bases) pass as they ship, in both modes, prepared as the tools
    prepare them."""
    configs = sorted([*(REPO / 'configs').glob('*.py'), *(REPO / 'configs' / 'imagenet').glob('*.py')])
    processors = []
    for path in configs:
        cfg = Config.fromfile(str(path))
        if str(cfg.get('label_map')).startswith(str(REPO / 'data')):
            cfg.label_map = None  # made by `make demo`: in a checkout that ran it, not in a clean one
        limit_topk(cfg)
        assert 'log_level' in cfg, path
        processors += [path.name] if 'log_processor' in cfg else []  # the ImageNet ones: mmengine's
        for mode in ('train', 'test'):
            check_config(cfg, mode)
    assert len(configs) > 30 and len(processors) > 20


def test_train_stops_on_a_bad_window_in_one_line_with_status_2(tmp_path, capsys) -> None:
    """tools/train.py with ``--cfg-options log_processor.window_size=-5``: one line, status 2,
    before the runner is built (mmengine would train, logging NaN for the first 5 iterations;
    one epoch, so that it would end soon)."""
    opts = ['train_cfg.max_epochs=1', 'log_processor.window_size=-5']
    args = [DEMO_CONFIG, '--work-dir', str(tmp_path), '--cfg-options', *opts]
    with pytest.raises(SystemExit) as done:
        load_tool('tools/train.py').main(args)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert 'Traceback' not in err
    ours = [ln for ln in err.splitlines() if ln.startswith('train.py:')]
    assert ours == [
        'train.py: error: log_processor.window_size must be > 0, got -5',
        'train.py: (--debug prints the traceback)',
    ]
    assert not list(tmp_path.rglob('*.log')), 'a runner was built'
    with pytest.raises(ConfigError, match=re.escape('log_processor.window_size must be > 0, got -5')):
        load_tool('tools/train.py').main([*args, '--debug'])
