"""MMEngine's new-style configs (``with read_base(): from .base import *``, ``type=SomeClass``)
as :func:`~.build.read_config` reads them: what their reader refuses, in one line naming the file
and line (:func:`style_mistake`), and the classes their values name imported when the file is
read (:func:`import_lazy`), not at the first use somewhere in a run."""

from __future__ import annotations

import ast
import difflib
import os
import os.path as osp
from typing import TYPE_CHECKING, Any, Optional

from ..errors import ConfigError, MissingFileError

if TYPE_CHECKING:
    from mmengine.config import Config

#: what a new-style config that wants a shipped one does instead
SHIPPED_STYLE = (
    "dna_mm's shipped configs are old-style (an old-style config inherits one: "
    "_base_ = ['dna_mm::{name}']); a new-style config (with read_base()) cannot import them: copy "
    'what it needs into it, or write it old-style (docs/adding_dna.md, "Config styles")'
)

#: a config file that has both
MIXED_STYLES = (
    'config {file}: it mixes the two config styles, _base_ = [...] (old) and imports or with read_base() '
    '(new): keep one (docs/adding_dna.md, "Config styles")'
)


def style_mistake(err: Exception, frames: list) -> Optional[Exception]:
    """The one-line error for what mmengine's reader of a new-style config (``with read_base():
    from .base import *``, ``type=SomeClass``) raises about its inheritance, from the ``frames``
    of ``err``: a base module that is not there (``MissingFileError``: the file naming it, its
    line, the closest file), a shipped dna_mm config (old-style: :data:`SHIPPED_STYLE`), a base of
    the other style either way or a file mixing both, a name its base does not have, or another
    of the parser's refusals (its message, the file named); ``None`` for anything else."""
    from mmengine.config import Config
    from mmengine.config.utils import ConfigParsingError, ImportTransformer

    parsing = Config._parse_lazy_import.__code__
    parsed = [frame.f_locals for frame, _ in frames if frame.f_code is parsing]
    raiser = frames[-1][0] if frames else None
    if raiser is None:
        return None
    if raiser.f_code is Config._file2dict.__code__ and isinstance(err, RuntimeError):
        read = [frame.f_locals.get('filename') for frame, _ in frames if frame.f_code is raiser.f_code]
        if len(read) > 1:  # an old-style config whose _base_ is new-style
            return ConfigError(
                f'config {read[-2]}: its _base_ {osp.normpath(read[-1])} is a new-style config (with '
                'read_base()), which an old-style one (_base_ = [...]) cannot inherit: write this config '
                f'new-style too (with read_base(): from {_module_name(read[-1], read[-2])} import *)'
            )
    if raiser.f_code is ImportTransformer.visit_ImportFrom.__code__ and isinstance(err, KeyError):
        here = raiser.f_locals
        return ConfigError(
            f'config {here["self"].filename}, line {here["node"].lineno}: its base {here["module"]} has no '
            f'{here["alias_node"].name!r}'
        )
    if not parsed or not isinstance(err, ConfigParsingError):
        return None
    own = parsed[-1]
    if raiser.f_code is parsing and 'module_path' in own:  # a base module that is not a file
        return _missing_base(own['filename'], own['base_module'], own['module_path'])
    mixed = raiser.f_code is Config._get_base_modules.__code__ and isinstance(
        raiser.f_locals.get('node'), ast.Assign
    )
    if mixed and len(parsed) > 1:  # a base that is old-style
        child, base = parsed[-2], own['filename']
        line = _import_line(child['filename'], child['base_module'])
        if _is_shipped(base):
            return ConfigError(
                f'config {child["filename"]}{line}: {SHIPPED_STYLE.format(name=_shipped(base))}'
            )
        return ConfigError(
            f'config {child["filename"]}{line}: its base {child["base_module"]} ({osp.normpath(base)}) is an '
            'old-style config (_base_ = [...]), which a new-style one (with read_base()) cannot import: '
            f"write this config old-style (_base_ = ['{osp.normpath(base)}']), or the base new-style"
        )
    if mixed:  # the file itself
        return ConfigError(MIXED_STYLES.format(file=own['filename']))
    return ConfigError(f'config {own["filename"]}: {str(err).splitlines()[0]}')


def _missing_base(filename: str, module: str, path: str) -> Exception:
    """The error for a base ``module`` that config ``filename`` imports and that is no file
    (``path``): a shipped dna_mm config (:data:`SHIPPED_STYLE`), else the file and the closest."""
    line = _import_line(filename, module)
    if module.split('.')[0] == 'dna_mm':
        name = module.split('.', 2)[-1] if module.startswith('dna_mm.configs.') else module.split('.', 1)[-1]
        return ConfigError(
            f'config {filename}{line}: {SHIPPED_STYLE.format(name=name.replace(".", "/") + ".py")}'
        )
    folder, name = osp.split(path)
    siblings = os.listdir(folder) if osp.isdir(folder) else []
    near = difflib.get_close_matches(name, [f for f in siblings if f.endswith('.py')], n=1)
    hint = (
        f' (did you mean {module.rsplit(".", 1)[0]}.{near[0][:-3]}?)'
        if near and '.' in module.lstrip('.')
        else ''
    )
    if near and not hint:
        hint = f' (did you mean {"." * (len(module) - len(module.lstrip(".")))}{near[0][:-3]}?)'
    return MissingFileError(
        f'config {filename}{line}: its base {module} ({osp.normpath(path)}) does not exist{hint}'
    )


def _import_line(filename: str, module: str) -> str:
    """``', line N'`` of the ``from MODULE import ...`` in config ``filename`` (``''`` if none)."""
    try:
        with open(filename, encoding='utf-8') as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return ''
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and '.' * node.level + (node.module or '') == module:
            return f', line {node.lineno}'
    return ''


def _is_shipped(path: str) -> bool:
    """``path`` is a config dna_mm ships (under its ``configs`` folder)."""
    from ..utils.mim_compat import mim_folder

    try:
        root = osp.realpath(mim_folder('configs'))
    except FileNotFoundError:
        return False
    return osp.realpath(path).startswith(root + os.sep)


def _shipped(path: str) -> str:
    """The ``dna_mm::`` name of shipped config ``path``, without the prefix."""
    from ..utils.mim_compat import mim_folder

    return osp.relpath(osp.realpath(path), osp.realpath(mim_folder('configs'))).replace(os.sep, '/')


def _module_name(path: str, importer: str) -> str:
    """Config file ``path`` as the relative module a new-style config ``importer`` imports it by
    (``'.._base_.runtime'``)."""
    rel = osp.relpath(osp.splitext(path)[0], osp.dirname(importer)).split(os.sep)
    up = len([p for p in rel if p == '..'])
    return '.' * (up + 1) + '.'.join(p for p in rel if p != '..')


def import_lazy(cfg: Config) -> None:
    """Import what a new-style config's values name (its ``type=SomeClass``: mmengine imports
    each one when it is first read, anywhere in a run).

    Raises:
        ConfigError: an import fails: a class from a module that does not have it, a module
            that does not import (the message names the file, the line and the import).
    """
    from mmengine.config.lazy import LazyAttr, LazyObject

    imported = getattr(cfg, '_imported_names', set())  # the file's own imports, not its values

    def visit(node: Any) -> None:
        values = (
            dict.values(node) if isinstance(node, dict) else node if isinstance(node, (list, tuple)) else ()
        )
        for value in values:
            if isinstance(value, (LazyObject, LazyAttr)):
                _build_import(value)
            else:
                visit(value)

    visit({k: v for k, v in dict.items(cfg._cfg_dict) if k not in imported})


def _build_import(lazy: Any) -> None:
    """Import what ``lazy`` (a new-style config's ``LazyObject`` / ``LazyAttr``) names; a failure is
    a :class:`ConfigError` naming the file and line of its import."""
    try:
        lazy.build()
    except Exception as err:  # noqa: BLE001 (whatever the import raises: one line)
        state = vars(lazy)  # (a lazy import answers any other attribute with a new one)
        module, name, text = state.get('_module'), state.get('_imported', state.get('name')), str(err)
        if ' for ' in text:  # mmengine's "Failed to import M in FILE, line N for <why>"
            why = f'cannot import {module}: {text.split(" for ", 1)[1]}'
        elif name is not None:
            why = f'{module} has no {name!r}: import it from the module that defines it'
        else:
            why = f'{type(err).__name__}: {text}'
        raise ConfigError(f'config {state.get("location")}: {why}') from err
