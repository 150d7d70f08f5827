"""Config → model, in one place: a config read (a file, or a ``package::`` name), its
``--cfg-options`` merged, its default scope set, its pretrained weights cleared when asked, and
its model, or a part of the model, built as MMEngine's runner builds it.

    cfg = read_config('dna_mm::timesformer_dna_demo.py', {'model.backbone.attn_cfg': 'softmax'})
    model = build_part(cfg)
    cfg = read_config('configs/vitdet_dna_demo.py', clear_pretrained=True)
    backbone, neck = build_part(cfg, 'backbone'), build_part(cfg, 'neck')

Every tool and module that reads a config or builds its model goes through here: the train, test
and inference tools, the analyses, the ONNX export, FLOPs, the benchmarks, the demos and the
checkpoint converter's ``--config``. A tool that builds a model it does not train reads the config
through :func:`dna_mm.config.model.model_from_config`, which checks the model's values between the
two (a run checks the whole config: ``tools/train.py``).

A config is named by its file or as a package's: ``dna_mm::timesformer_dna_demo.py`` (the
configs dna_mm ships, :func:`~dna_mm.utils.mim_compat.packaged_config`) or an OpenMMLab zoo config,
``mmaction::recognition/…`` / ``mmdet::…`` / ``mmpretrain::…`` (MMEngine's ``get_config``).

The default scope is the config's ``default_scope`` (every shipped and zoo config has one:
``mmaction``, ``mmdet`` or ``mmpretrain``); without one, the scope of the one library whose
registry has the model's type (:func:`~dna_mm.models.scopes.scope_of`, the rule dna_mm builds a
user's model config by); a type of MMEngine's root (dna_mm's own), or a config without a model,
keeps the current scope. :func:`read_config` makes it the current scope (the datasets and
pipelines the caller builds next are looked up there too); :func:`build_part` builds in it
whatever scope is current then.

A config file's own mistakes are one line naming the file (:class:`~dna_mm.errors.ConfigError`,
:class:`~dna_mm.errors.MissingFileError`), where mmengine's reader gives a traceback ending in
``File "<unknown>"``: a syntax error or a failing line (``NameError``) with its line, a ``_base_``
that is not there with the file that names it, and a variable of a ``_base_`` that the file sets
to no effect (``num_classes = 10`` over a base whose head took 4:
:func:`~dna_mm.config.options.base_variable_problems`).
"""

from __future__ import annotations

import copy
import difflib
import logging
import os
import os.path as osp
from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional, Union

from ..errors import ConfigError, MissingFileError, UserError, error_line
from ..models.scopes import detection_parts_scope, home_scope, scope_of
from ..utils.mim_compat import read_package_config
from .new_style import MIXED_STYLES, import_lazy, style_mistake

if TYPE_CHECKING:
    from mmengine.config import Config
    from torch import nn

#: what names a config: its file, a ``package::`` name, or a config already read
ConfigSource = Union[str, os.PathLike, 'Config']


def read_config(
    config: ConfigSource, cfg_options: Optional[dict] = None, *, clear_pretrained: bool = False
) -> Config:
    """The config of ``config``, ready to build: ``cfg_options`` merged, pretrained weights
    cleared when asked, its default scope made the current one.

    Args:
        config: A config file, a ``package::path`` name (``dna_mm::…``, ``mmaction::…``,
            ``mmdet::…``, ``mmpretrain::…``) or a ``Config`` (copied, never changed).
        cfg_options: Overrides as mmengine's ``DictAction`` gives them (``{'a.b': 1}``: a tool's
            ``--cfg-options``); a ``custom_imports`` they name is imported.
        clear_pretrained: Clear the model's pretrained weights (:func:`clear_pretrained_weights`):
            for a model whose weights do not matter (counting, timing) or come from a whole-model
            checkpoint.

    Raises:
        MissingFileError: ``config``, or a ``_base_`` it inherits, is not a file (the message names
            it, and the file whose ``_base_`` it is).
        ConfigError: the config file does not parse or run (the message names its file and line),
            it sets a variable of its ``_base_`` to no effect, or an option changes nothing
            (:func:`merge_options`).
    """
    from mmengine.config import Config

    cfg = copy.deepcopy(config) if isinstance(config, Config) else _read(os.fspath(config))
    merge_options(cfg, cfg_options)
    if clear_pretrained:
        clear_pretrained_weights(cfg.get('model'))
    scope = default_scope(cfg)
    if scope is not None:
        _make_current(scope)
    return cfg


def merge_options(cfg: Config, cfg_options: Optional[dict]) -> None:
    """Merge ``cfg_options`` (``{'a.b': 1}``, a tool's ``--cfg-options``) into ``cfg``, as
    mmengine's ``merge_from_dict``, after :func:`~dna_mm.config.options.option_problems`: a new
    top-level key nothing reads that is close to one something does is refused, and so is a
    variable of the config file, or a key of one (which sets none of its keys now), naming the keys
    to set instead; one whose keys cannot be named is noted in the log. A ``custom_imports`` they
    name is imported (its modules register their types).

    An option below a key that holds an attention's name, the config's or an earlier option's
    (``attn_cfg=dna`` then ``attn_cfg.variant=apm``, as the demos and the study give a member), sets
    that key of the dict the name stands for (``dict(type='DnAAttention', variant='apm')``, the
    name's value replaced), per step too (``attn_cfg.temporal.variant=apm``):
    :func:`~dna_mm.config.options.string_parent_options`, :func:`attention_named`.

    Raises:
        ConfigError: an option is a misspelt top-level key (the message names it and the closest),
            or a variable of the config file (the message names the keys to set instead), or sets a
            key below a string that is no attention's name, or below a number (the message names
            the option and the key).
    """
    if not cfg_options:
        return
    from mmengine.logging import print_log

    from .options import option_problems, string_parent_options

    errors, notes = option_problems(cfg, cfg_options)
    if errors:
        raise ConfigError('; '.join(errors))
    for note in notes:
        print_log(note, logger='current', level=logging.WARNING)
    cfg_options, errors = string_parent_options(
        cfg, cfg_options, lambda name: attention_named(name, cfg, cfg_options)
    )
    if errors:
        raise ConfigError(errors[0])
    cfg.merge_from_dict(cfg_options)
    if any(key.split('.')[0] == 'custom_imports' for key in cfg_options):
        from mmengine.utils import import_modules_from_strings

        import_modules_from_strings(**cfg['custom_imports'])


def attention_named(
    name: str, cfg: Optional[Config] = None, cfg_options: Optional[dict] = None
) -> Union[dict, str]:
    """``{'type': <registered name>}`` of the attention member ``name`` names (a short name,
    ``'dna'``, or a registered name; a method's settings, ``'dna:apm'``, are keys of it too), or
    what a name there should be, for a message (the closest member's name, else the valid ones).
    A name no member holds yet is looked up again after the ``custom_imports`` of ``cfg`` with
    ``cfg_options`` merged are imported (a member of the user's own registers itself there)."""
    from ..family import method_attention
    from ..models.attention.builder import attention_types, member_names, short_names, suggest_attention

    try:  # a name with a method's settings: 'dna:apm+gated' (attention_cfg)
        member, settings = method_attention(name)
    except ConfigError as err:
        return f"a dict, or an attention member's name ({err})"
    kind = short_names().get(member, member)
    if kind not in attention_types() and cfg is not None and _import_custom(cfg, cfg_options or {}):
        kind = short_names().get(member, member)
    if kind in attention_types():
        return {'type': kind, **settings}
    hint = suggest_attention(member)
    hint = hint[: hint.index('?') + 1] if hint.startswith('did you mean') else ', '.join(member_names()[0])
    return f"a dict, or an attention member's name ({hint})"


def _import_custom(cfg: Config, cfg_options: dict) -> bool:
    """Import the ``custom_imports`` of ``cfg`` with those of ``cfg_options`` merged (the merge
    itself imports them after it), if the options name any; whether they did."""
    from mmengine.config import Config
    from mmengine.utils import import_modules_from_strings

    options = {k: v for k, v in cfg_options.items() if k.split('.')[0] == 'custom_imports'}
    if not options:
        return False
    imports = Config(dict(custom_imports=copy.deepcopy(cfg._cfg_dict.to_dict().get('custom_imports') or {})))
    imports.merge_from_dict(copy.deepcopy(options))
    import_modules_from_strings(**imports['custom_imports'])
    return True


def build_part(cfg: Config, part: str = 'model') -> nn.Module:
    """The model of ``cfg`` (``part='model'``), or one of its parts (``'backbone'``, ``'neck'``,
    ``'backbone.model'``: a dotted key under ``model``), built through MMEngine's root ``MODELS``
    in the config's default scope, as the runner builds it (:func:`part_scope`: ViTDet and
    SimpleFPN build where mmcv has no compiled ops). The model takes the config's top-level
    ``data_preprocessor`` where its own dict has none, as the runner gives it (MMPretrain's
    configs keep the normalisation there). The module is as built: its ``init_weights`` not
    called, in training mode, on the CPU.

    Raises:
        ConfigError: the config has no such part.
    """
    from mmengine.registry import MODELS

    node = _part_config(cfg, part)
    if node is None:
        raise ConfigError(f"the config has no {'model' if part == 'model' else 'model.' + part} to build")
    if part == 'model' and cfg.get('data_preprocessor') is not None and 'data_preprocessor' not in node:
        node = {**node, 'data_preprocessor': cfg.data_preprocessor}  # mmengine's Runner.__init__
    with home_scope(part_scope(cfg, part)):
        return MODELS.build(node)


def _part_config(cfg: Config, part: str) -> Optional[dict]:
    """The config of ``part`` (``'model'``, or a dotted key under ``model``); ``None`` if absent."""
    node: Any = cfg.get('model')
    for key in [] if part == 'model' else part.split('.'):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def part_scope(cfg: Config, part: str = 'model') -> Optional[str]:
    """The scope :func:`build_part` builds ``part`` of ``cfg`` in (and what trains that part alone
    builds its optimizer in): the config's default scope; for a part of MMEngine's root in a
    detection config (ViTDet, SimpleFPN: plain torch) the scope its own parts are built in
    (:func:`~dna_mm.models.scopes.detection_parts_scope`), which needs no MMDetection model where
    mmcv has no compiled ops."""
    from mmengine.registry import MODELS

    scope = default_scope(cfg)
    node = _part_config(cfg, part)
    kind = node.get('type') if node is not None else None
    root = kind in MODELS.module_dict if isinstance(kind, str) else kind in MODELS.module_dict.values()
    if part != 'model' and scope == 'mmdet' and root:
        return detection_parts_scope()
    return scope


def default_scope(cfg: Config) -> Optional[str]:
    """The scope ``cfg`` builds in: its ``default_scope``, else the scope of the one library
    that has its model's type; ``None`` (the current scope) for a type of MMEngine's root, a
    type no library has (its build names it) or a config without a model."""
    scope = cfg.get('default_scope')
    kind = (cfg.get('model') or {}).get('type')
    if scope or not isinstance(kind, str):
        return scope or None
    try:  # scope_of imports each library's models as it searches them, skipping one that cannot
        with home_scope('mmengine'):  # the root's types first, then the libraries', whatever is current
            return scope_of(kind)
    except ConfigError:  # no library has it, or several do
        return None


def clear_pretrained_weights(model_cfg: Any) -> list[str]:
    """Clear the pretrained weights a model config names, in place, at any depth: every
    ``pretrained`` path (``None``; ``pretrained=True``, timm's download, becomes ``False``) and
    every ``init_cfg`` of type ``Pretrained`` (``None``, or dropped from a list of inits; the
    other inits stay). Returns the dotted keys cleared."""
    cleared: list[str] = []

    def visit(node: Any, where: str) -> None:
        if isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                visit(item, f'{where}.{i}')
            return
        if not isinstance(node, dict):
            return
        for key in list(node):
            value, at = node[key], f'{where}.{key}'.lstrip('.')
            if key == 'pretrained' and (isinstance(value, str) or value is True):
                node[key] = None if isinstance(value, str) else False
                cleared.append(at)
            elif key == 'init_cfg' and _is_pretrained(value):
                node[key] = None
                cleared.append(at)
            elif key == 'init_cfg' and isinstance(value, (list, tuple)) and any(map(_is_pretrained, value)):
                node[key] = [init for init in value if not _is_pretrained(init)] or None
                cleared.append(at)
            else:
                visit(value, at)

    visit(model_cfg, '')
    return cleared


def _is_pretrained(init: Any) -> bool:
    return isinstance(init, dict) and type_name(init.get('type')) == 'Pretrained'


def type_name(kind: Any) -> Optional[str]:
    """The name of a config's ``type`` value, whichever way the config gives it: a registered
    name (``'SampleFrames'``, ``'mmaction.SampleFrames'``), a dotted path (``'a.b.Name'``, as
    a new-style config's dump writes its imports) → ``'Name'``, or the class or function itself
    (a new-style config's ``type=SampleFrames``) → its ``__name__``; ``None`` for anything else
    (no ``type``). What every check that asks a step, hook or metric what it is compares."""
    if isinstance(kind, str):
        return kind.rsplit('.', 1)[-1]
    name = getattr(kind, '__name__', None)
    return name if isinstance(name, str) else None


def _read(path: str) -> Config:
    """A config file, or a ``package::path`` name; a file that inherits is checked for the
    variables of its ``_base_`` it sets to no effect
    (:func:`~dna_mm.config.options.base_variable_problems`).

    Raises:
        MissingFileError: ``path``, or a ``_base_`` of a file it inherits, does not exist (the
            message names the file whose ``_base_`` it is).
        ConfigError: the Python of a config file fails (a syntax error, an undefined name: the
            message names the file and line); a new-style config imports what is not there
            (:func:`~.new_style.import_lazy`) or inherits a config of the other style
            (:func:`~.new_style.style_mistake`); a variable of a base set to no effect; a ``package::path``
            name mmengine cannot read (:func:`_package_mistake`).
    """
    from mmengine.config import Config

    from .options import base_variable_problems

    if '::' not in path and not osp.isfile(path):
        where = 'is a folder, not a file' if osp.isdir(path) else 'does not exist'
        raise MissingFileError(f'config {path} {where}')
    try:
        cfg = read_package_config(path) if '::' in path else Config.fromfile(path)
    except Exception as err:
        mistake = _file_mistake(err)
        if mistake is None and '::' in path:
            mistake = _package_mistake(path, err)
        if mistake is None:
            raise
        raise mistake from err
    if cfg._imported_names and '_base_' in cfg:  # new-style, where mmengine ignores a later _base_
        raise ConfigError(MIXED_STYLES.format(file=path))
    import_lazy(cfg)
    problems = [] if '::' in path else base_variable_problems(path, cfg)
    if problems:
        raise ConfigError('; '.join(problems))
    return cfg


#: how a config of an installed package is named (mmengine's ``package::path``)
ZOO_NAME = (
    'PACKAGE::FOLDER/NAME.py, e.g. '
    'mmaction::recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py'
)


def _package_mistake(path: str, err: Exception) -> Optional[Exception]:
    """The one-line error for a ``package::path`` name mmengine cannot read: a file the package
    does not have (``MissingFileError`` naming it), a name without a folder or of a package
    mmengine does not know (its ``ValueError`` / ``AssertionError``); ``None`` for anything else."""
    if isinstance(err, UserError):
        return None
    if isinstance(err, FileNotFoundError):
        return MissingFileError(f'config {path}: {err} ({ZOO_NAME})')
    if isinstance(err, (ValueError, AssertionError)):
        why = f': {str(err).rstrip(".")}' if isinstance(err, AssertionError) and str(err) else ''
        return ConfigError(f'config {path}: not a zoo config mmengine reads{why} ({ZOO_NAME})')
    return None


def _file_mistake(err: Exception) -> Optional[Exception]:
    """The one-line error for ``err``, raised by mmengine's ``Config.fromfile``, where it is a
    config file's own mistake: its code failed (``NameError``, … at the line of the file that
    raised it), it does not parse (``SyntaxError``: mmengine's parser names ``<unknown>``), a
    ``_base_`` it names is not there, or a new-style config's inheritance cannot be read
    (:func:`~.new_style.style_mistake`); ``None`` for anything else."""
    from mmengine.config import Config

    frames, tb = [], err.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    reading = Config._file2dict.__code__  # reads one file, its bases first
    runners = (reading, Config._parse_lazy_import.__code__)  # and a new-style one, its bases first
    read = [frame.f_locals.get('filename') for frame, _ in frames if frame.f_code is reading]
    code = [  # the file's own code, compiled under its name and run by _file2dict / _parse_lazy_import
        frame.f_code.co_filename
        for (caller, _), (frame, _) in zip(frames, frames[1:], strict=False)
        if caller.f_code in runners and frame.f_code.co_name == '<module>'
    ]
    if code:
        line = [n for frame, n in frames if frame.f_code.co_filename == code[-1]][-1]
        return ConfigError(f'config {code[-1]}, line {line}: {type(err).__name__}: {err}')
    style = style_mistake(err, frames)
    if style is not None:
        return style
    mmengine = [frame.f_code for frame, _ in frames if frame.f_code.co_filename == reading.co_filename]
    parsers = (reading, Config._is_lazy_import.__code__, Config._validate_py_syntax.__code__)
    if isinstance(err, SyntaxError) and mmengine and mmengine[-1] in parsers:  # not a custom_imports module
        opened = (Config.fromfile.__code__, *parsers[:2])
        file = [frame.f_locals.get('filename') for frame, _ in frames if frame.f_code in opened][-1]
        line = f', line {err.lineno}' if err.lineno else ''
        text = f': {err.text.strip()}' if err.text and err.text.strip() else ''
        return ConfigError(f'config {file}{line}: SyntaxError: {err.msg}{text}')
    if isinstance(err, FileNotFoundError) and read:
        if len(read) > 1 and not osp.isfile(read[-1]):  # the base's own read found no file
            folder, name = osp.split(read[-1])
            siblings = os.listdir(folder) if osp.isdir(folder) else []
            near = difflib.get_close_matches(name, [f for f in siblings if f.endswith('.py')], n=1)
            hint = f' (did you mean {near[0]}?)' if near else ''
            return MissingFileError(f'config {read[-2]}: its _base_ {read[-1]} does not exist{hint}')
        if any(frame.f_code.co_name == '_get_cfg_path' for frame, _ in frames):  # a package:: base
            return MissingFileError(f'config {read[-1]}: _base_ {error_line(err)}')
    return None


def _make_current(scope: str) -> None:
    """Make ``scope`` the current default scope (MMEngine's ``init_default_scope``, without its
    warning when another scope was current: a tool may read several configs)."""
    from mmengine.registry import DefaultScope

    current = DefaultScope.get_current_instance()
    if current is not None and current.scope_name == scope:
        return
    name = scope if not DefaultScope.check_instance_created(scope) else f'{scope}-{datetime.now()}'
    DefaultScope.get_instance(name, scope_name=scope)
