"""Settings that would change nothing, found before they take effect: ``--cfg-options`` before they
are merged (:func:`~dna_mm.config.build.merge_options`) and a config file that inherits, as it is
read (:func:`~dna_mm.config.build.read_config`).

* A new top-level key nothing reads (a typo such as ``train_cfgg.max_epochs``).
* A variable of the config file (``num_classes``, ``max_epochs``, ``data_root``, a dict such as
  the demo's ``loader``, or a key of one: ``loader.batch_size``), whose values the file's keys
  took when it was read, so that setting it changes none of them.
* A variable of a ``_base_`` that the child file sets anew without setting again the keys that
  took its value: mmengine merges the child's top-level names into the base's keys after the base
  was read (``num_classes = 10`` over a base whose ``model.cls_head.num_classes`` is 4 trains 4
  classes). The child that sets the keys with it (``num_classes = 10`` and
  ``model = dict(cls_head=dict(num_classes=num_classes))``) is the way to do it, and is read.
  The same holds in a new-style config (``with read_base(): from .base import *``): the base's
  values were made when it was imported, before the child's names were set.

The keys a variable set (:func:`_uses`) are found under the keys that code reads (the runner's,
dna_mm's: :func:`read_keys`), never under another variable: they are the ones to set instead.

An option below a key that holds a string is made mergeable where the string names what it
stands for (:func:`string_parent_options`: an attention's short name, ``attn_cfg=dna`` then
``attn_cfg.variant=apm``, becomes the dict it names with the key set on it), and refused in one
line where it does not: mmengine would raise ``TypeError`` from inside its merge.
"""

from __future__ import annotations

import ast
import copy
import difflib
import os.path as osp
from typing import Any, Callable, Iterator, Union

from mmengine.config import Config

#: top-level keys read by mmengine's runner beyond its ``__init__`` arguments (which
#: ``Runner.from_cfg`` takes from the config by name): model wrapping, compiling, its builder
RUNNER_KEYS = (
    'compile',
    'model_wrapper_cfg',
    'find_unused_parameters',
    'sync_bn',
    'activation_checkpointing',
    'efficient_conv_bn_eval',
    'runner_type',
)
#: top-level keys the OpenMMLab packages' own tools read (MMDetection's and MMPretrain's
#: ``tools/test.py --tta``), which a config written for them keeps: taken, not suggested
STOCK_TOOL_KEYS = ('tta_model', 'tta_pipeline')
#: top-level keys dna_mm's runner and tools read
DNA_MM_KEYS = (
    'custom_imports',
    'label_map',
    'test_pipeline',
    'global_batch_size',
    'test_only',
    'load_partial',
    'log_setup_to_console',
)
#: the value of a key that is not there (a new key: its uses are those of its name, any value)
_NEW = object()


def read_keys() -> list[str]:
    """The top-level config keys that code reads: mmengine's runner and dna_mm's (and
    :data:`STOCK_TOOL_KEYS`, taken but never suggested: ``val_pipeline`` is as close to
    ``tta_pipeline`` as a typo)."""
    import inspect

    from mmengine.runner import Runner

    init = [p for p in inspect.signature(Runner.__init__).parameters if p not in ('self', 'cfg')]
    return list(dict.fromkeys([*init, *RUNNER_KEYS, *DNA_MM_KEYS]))


def option_problems(cfg: Config, options: dict) -> tuple[list[str], list[str]]:
    """What ``options`` (``--cfg-options``, ``{'a.b': 1}``) would set to no effect in ``cfg``: a
    top-level key that neither mmengine's runner nor dna_mm reads, as ``(errors, notes)``. It is
    an error where what was meant can be named, else a note:

    * a new key close to a key of the config or one that is read (a typo:
      ``train_cfgg.max_epochs`` for ``train_cfg.max_epochs``);
    * a key that only names keys below (``num_classes=10``: ``model.cls_head.num_classes``), or a
      variable of the config file or a key of one (``loader.batch_size=2``), whose keys took its
      value when the file was read, so that setting it changes none of them (``data_root=/data``:
      the keys whose value it begins, or of its name).
    """
    read = read_keys()
    tree = cfg._cfg_dict.to_dict()
    errors, notes = [], []
    for option in options:
        top = option.split('.', 1)[0]
        if top in read or top in STOCK_TOOL_KEYS or top.startswith('_'):
            continue
        new = top not in cfg
        near = difflib.get_close_matches(top, [*read, *cfg.keys()], n=1, cutoff=0.75) if new else []
        if new and near:
            errors.append(
                f'--cfg-options {option}: {top!r} is not a key of the config, nor one that mmengine\'s '
                f"runner or dna_mm reads; did you mean {near[0]!r}?"
            )
            continue
        uses = _uses(tree, option, _NEW if new else _value_at(tree, option), read)
        what = (
            f'{top!r} is not a key of the config, nor one that mmengine\'s runner or dna_mm reads'
            if new
            else f'{top!r} is a variable of the config file, used when the file was read: setting '
            f'{"it" if option == top else "a key of it"} changes nothing'
        )
        if uses:
            errors.append(f'--cfg-options {option}: {what}; {_instead(uses)}')
        else:
            notes.append(f'--cfg-options {option}: {what}')
    return errors, notes


def string_parent_options(
    cfg: Config, options: dict, named: Callable[[str], Union[dict, str]]
) -> tuple[dict, list[str]]:
    """``options`` (``{'a.b': 1}``, in order) as mmengine's merge can take them, and the errors of
    those it cannot: an option that sets a key below a key holding a string, whether the config's
    (``attn_cfg = 'dna'``) or an earlier option's (``attn_cfg=dna`` then ``attn_cfg.variant=apm``:
    mmengine's ``TypeError``, ``'str' object does not support item assignment``).

    ``named(string)`` is the dict the string stands for (``{'type': 'DnAAttention'}`` for
    ``'dna'``), or why it stands for none (a line naming what it expected). A string that names one
    becomes that dict, replacing the key's value (``_delete_``, where the config has the key), and
    the options below it set its keys; a string that names none, or a number, a bool or ``None``,
    is an error naming the option and the key. The options come back in their order, a string of
    the config turned into a dict set by an option put just before the first option below it."""
    options = copy.deepcopy(options)
    tree = cfg._cfg_dict.to_dict()
    out: dict = {}
    errors: list[str] = []
    for option, value in options.items():
        parts = option.split('.')
        for i in range(1, len(parts)):
            place = '.'.join(parts[:i])
            held, source = _held(out, tree, parts[:i])
            if held is _NEW or isinstance(held, (dict, list)):
                continue
            if isinstance(held, tuple):
                break  # mmengine's merge replaces an item of a list only (its own message)
            new = named(held) if isinstance(held, str) else 'a dict'
            if isinstance(new, str):
                errors.append(
                    f'--cfg-options {option}: {place} is {held!r}, whose keys cannot be set; expected {new}'
                )
                break
            if source is None and isinstance(_value_at(tree, '.'.join(parts[: i - 1])), list):
                errors.append(
                    f'--cfg-options {option}: {place} is {held!r}, an item of a list; expected a dict'
                )
                break  # mmengine merges into a list's item: a string cannot become a dict there
            if source is None or source == place:  # the config's value, or an option's
                out[place] = {'_delete_': True, **new} if _value_at(tree, place) is not _NEW else dict(new)
            else:  # within the value of an option set above it (a list, a dict made here)
                *within, last = parts[len(source.split('.')) : i]
                node = _value_at(out[source], '.'.join(within)) if within else out[source]
                node[int(last) if isinstance(node, list) else last] = dict(new)
        out.pop(option, None)  # set again: after the options set before it, as mmengine merges
        out[option] = value
    return out, errors


def _held(options: dict, tree: dict, parts: list[str]) -> tuple[Any, Any]:
    """``(value, option)`` of the dotted key ``parts`` when ``options`` are merged into ``tree``:
    within the last option that sets it or a key above it (``_NEW`` where that option's value
    has no such key), else the config's value (``option`` ``None``)."""
    for key in reversed(options):
        above = key.split('.')
        if above == parts[: len(above)]:
            rest = '.'.join(parts[len(above) :])
            return (_value_at(options[key], rest) if rest else options[key]), key
    return _value_at(tree, '.'.join(parts)), None


def base_variable_problems(filename: str, cfg: Config) -> list[str]:
    """The variables of its ``_base_`` that config file ``filename`` (read into ``cfg``) sets to
    no effect, one line each: a top-level name the file sets, that its bases define as a variable
    (a key nothing reads) and that it changes, whose old value keys that code reads took
    (:func:`_uses`) and the file did not set again, while no such key has the new value. A key of
    a dict variable is one (``loader = dict(batch_size=2)``: ``loader.batch_size``). A new-style
    config's bases are the modules it imports with ``read_base()`` (:func:`_imported_base_tree`)."""
    if not filename.endswith('.py'):
        return []
    read = read_keys()
    merged = cfg._cfg_dict.to_dict()
    names = [n for n in _set_names(filename) if n in merged and n not in read and not n.startswith('_')]
    new_style = Config._is_lazy_import(filename)  # how mmengine's reader tells a new-style config
    if not names or not (new_style or Config._get_base_files(filename)):
        return []
    base = _imported_base_tree(filename) if new_style else _base_tree(filename)
    of = 'of its base' if new_style else 'of its _base_'
    problems = []
    for name in dict.fromkeys(names):
        for key, old, new in _changes(base.get(name, _NEW), merged[name], name):
            if old is _NEW:
                continue  # a name, or a key of a dict, the bases do not have: nothing took it
            stale = [u for u in _uses(merged, key, old, read) if _value_at(base, u) == _value_at(merged, u)]
            if stale and not _uses(merged, key, new, read):
                problems.append(
                    f'config {filename}: {name!r} is a variable {of}, used when the base was read: '
                    f'setting {"it" if key == name else key} here changes nothing; '
                    f'{_instead(stale, "in this file too")}'
                )
    return problems


def _instead(uses: list[str], where: str = 'instead') -> str:
    """``'set a / b / c (and 2 more) instead'``."""
    more = f' (and {len(uses) - 3} more)' if len(uses) > 3 else ''
    return f'set {" / ".join(uses[:3])}{more} {where}'


def _uses(tree: dict, option: str, value: Any, read: list[str]) -> list[str]:
    """The keys below the keys in ``read`` of ``tree`` that variable ``option`` (a top-level name,
    or a dotted key of one, of ``value``; ``_NEW``: a key that is not there) would have set: of the
    same name and value (the longest end of ``option`` that names keys: ``loader.batch_size``,
    ``train_dataloader.batch_size``), or whose value is ``value`` (a non-empty list, tuple or dict)
    or contains it (a string of 3 characters or more)."""
    keys = [(path, leaf) for path, leaf in _leaf_paths(tree, '') if path.split('.', 1)[0] in read]
    parts, named = option.split('.'), set()
    for i in range(len(parts)):  # the longest end that names keys
        end = '.' + '.'.join(parts[i:])
        named = {p for p, leaf in keys if ('.' + p).endswith(end) and (value is _NEW or leaf == value)}
        if named:
            break
    text = isinstance(value, str) and len(value) >= 3
    whole = isinstance(value, (list, tuple, dict)) and len(value) > 0
    return [
        path
        for path, leaf in keys
        if path in named or (text and isinstance(leaf, str) and value in leaf) or (whole and leaf == value)
    ]


def _leaf_paths(node: Any, key: str) -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every key below the top level of ``node`` (list items by
    index: ``a.0.b``, as ``--cfg-options`` takes them)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for name, value in items:
        path = f'{key}.{name}' if key else str(name)
        if key:
            yield path, value
        yield from _leaf_paths(value, path)


def _value_at(tree: Any, key: str) -> Any:
    """The value of dotted ``key`` in ``tree`` (list items by index); ``_NEW`` if it is not there."""
    node = tree
    for name in key.split('.'):
        if isinstance(node, dict) and name in node:
            node = node[name]
        elif isinstance(node, list) and name.isdigit() and int(name) < len(node):
            node = node[int(name)]
        else:
            return _NEW
    return node


def _changes(old: Any, new: Any, key: str) -> Iterator[tuple[str, Any, Any]]:
    """``(dotted key, old, new)`` of what differs between two values of ``key``: the keys of two
    dicts one by one (``old`` ``_NEW`` where the first has no such key), else the whole value."""
    if isinstance(old, dict) and isinstance(new, dict):
        for name, value in new.items():
            yield from _changes(old.get(name, _NEW), value, f'{key}.{name}')
    elif old != new:
        yield key, old, new


def _set_names(filename: str) -> list[str]:
    """The names a Python config file sets at its top level (also inside ``if`` / ``try`` /
    ``with``; not inside functions or classes)."""
    with open(filename, encoding='utf-8') as f:
        body = ast.parse(f.read()).body
    names: list[str] = []

    def visit(statements: list) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Assign):
                targets = node.targets
            else:
                targets = [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            stored = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            names.extend(n.id for n in stored if isinstance(n.ctx, ast.Store))
            for field in ('body', 'orelse', 'finalbody', 'handlers'):  # if / try / with / for
                visit(getattr(node, field, None) or [])

    visit(body)
    return names


def _base_tree(filename: str) -> dict:
    """The config of the ``_base_`` files of ``filename`` merged as mmengine merges them before it
    reads the file itself (each base read, its scope given to its dicts)."""
    from mmengine.config import ConfigDict

    filename = osp.abspath(filename)  # as mmengine resolves a relative base
    base = ConfigDict()
    for name in Config._get_base_files(filename):
        path, scope = Config._get_cfg_path(name, filename)
        cfg_dict, _, _ = Config._file2dict(path)
        base.update(Config._dict_to_config_dict(cfg_dict, scope))
    return base.to_dict()


def _imported_base_tree(filename: str) -> dict:
    """The values new-style config ``filename`` imports from its bases (``with read_base():
    from .base import *``, or named imports), each base read as mmengine reads it, before the
    file's own code runs."""
    from mmengine.utils import get_installed_path

    with open(filename, encoding='utf-8') as f:
        body = ast.parse(f.read()).body
    base: dict = {}
    imports = [n for w in body if isinstance(w, ast.With) for n in w.body if isinstance(n, ast.ImportFrom)]
    for node in imports:
        parts = (node.module or '').split('.')
        if node.level:  # mmengine's: relative to the file's folder
            root = osp.join(osp.dirname(osp.abspath(filename)), *(['..'] * (node.level - 1)))
        else:
            root, parts = get_installed_path(parts[0]), parts[1:]
        values = Config.fromfile(f'{osp.join(root, *parts)}.py', lazy_import=True)._cfg_dict.to_dict()
        for alias in node.names:
            if alias.name == '*':
                base.update(values)
            elif alias.name in values:
                base[alias.asname or alias.name] = values[alias.name]
    return base
