"""The optimizer and its wrapper, checked before anything is built
(:func:`dna_mm.config.check.check_config`):

* ``optim_wrapper.type='AmpOptimWrapper'`` (mmengine's, as MMAction2's ``-amp-`` zoo configs
  name it) on a machine without an accelerator it takes, where mmengine would stop on an
  assertion after building the model: ``AutoAmpOptimWrapper`` or ``OptimWrapper`` are named;
* the optimizer (``optim_wrapper.optimizer``, and each ``optim_wrapper.<name>.optimizer`` of a
  multi-optimizer config): its keys the arguments of its class (``lrr``: a ``TypeError`` naming no
  key once the model is built), ``lr`` > 0, ``weight_decay`` >= 0, ``type`` registered (mmengine's
  ``OPTIMIZERS``, the default scope's: mmengine would stop on ``None is not a callable object``),
  the closest registered name suggested; the wrapper's ``clip_grad.max_norm`` > 0, and ``dtype``
  and ``loss_scale`` what mmengine's ``AmpOptimWrapper`` takes (its ``valid_dtypes``, None or a
  torch dtype; ``'dynamic'``, a float > 0 or a dict of ``GradScaler``'s arguments: an int, as
  ``--cfg-options optim_wrapper.loss_scale=512`` gives it, is refused with its float named,
  ``512.0``) on any machine (``AutoAmpOptimWrapper`` drops them without a GPU: a typo would stop
  only the GPU run);
* the wrapper's own keys against the arguments of its class (``clip_gra``; an AMP key under a
  full-precision wrapper): :mod:`.optim_wrapper`;
* the wrapper's ``clip_grad`` (mmengine's ``OptimWrapper`` pops its ``type``, ``'norm'`` or
  ``'value'``, and passes the rest to torch's ``clip_grad_norm_`` / ``clip_grad_value_`` at every
  step): a dict, its ``type`` one of the two, its keys the arguments of that function and its
  required one given (a typo such as ``norm_typ`` would be a ``TypeError`` at the first
  iteration), the closest valid name suggested;
* the wrapper's ``paramwise_cfg``, for the constructor it names (``constructor``, mmengine's
  ``DefaultOptimWrapperConstructor`` by default; dna_mm's ``LayerDecayOptimizerConstructor``; any
  other is its own affair): its keys those the constructor reads (:data:`PARAMWISE_KEYS`: a typo
  such as ``bias_decay_mul`` would be dropped silently), and each ``custom_keys[KEY]`` a dict of
  ``lr_mult``, ``decay_mult`` or options of the optimizer's class (mmengine copies the others into
  the parameter group, where torch ignores an unknown one: ``lr_mul=10`` would train at the base
  lr, SGD's ``momentum`` under AdamW changes nothing), the closest valid name suggested; a key
  close to none of them and no option of torch's optimizers is the group's own, which a hook or
  the optimizer may read (MMPretrain's ``lars_exclude``, ``fix_lr``); its multipliers (the
  ``*_mult`` keys the constructor reads: ``bias_lr_mult``, ``bias_decay_mult``,
  ``norm_decay_mult``, ``dwconv_decay_mult``, ``flat_decay_mult``, ``dcn_offset_lr_mult``; each
  custom key's ``lr_mult`` / ``decay_mult``) numbers >= 0: the constructor multiplies the
  optimizer's ``lr`` / ``weight_decay`` by them, and torch takes the negative product without a
  word; a decay multiplier needs the optimizer's ``weight_decay`` in the config (mmengine's
  ``base_wd should not be None`` once the model is built).
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Optional

from mmengine.config import Config

from ..build import type_name
from .optim_wrapper import constructor_class, wrapper_key_problems
from .values import (
    class_arguments,
    closest_name,
    has_base,
    is_number,
    not_positive,
    registered_class,
    registered_names,
    registry_of,
    type_class,
    unknown_keys,
)


def amp_problems(wrapper: dict) -> list[str]:
    """mmengine's ``AmpOptimWrapper`` asserts a CUDA, NPU, MLU or MUSA device when it is built."""
    if type_name(wrapper.get('type')) != 'AmpOptimWrapper':
        return []
    from mmengine.device import is_cuda_available, is_mlu_available, is_musa_available, is_npu_available

    if is_cuda_available() or is_npu_available() or is_mlu_available() or is_musa_available():
        return []
    return [
        "optim_wrapper.type='AmpOptimWrapper' needs a GPU, and there is none here: set "
        'optim_wrapper.type=AutoAmpOptimWrapper (mixed precision on a GPU, full precision without '
        'one) or OptimWrapper (full precision)'
    ]


def wrapper_problems(cfg: Config, wrapper: dict, at: str) -> list[str]:
    """One optim wrapper (``at``: its key and a dot): its optimizer's ``lr`` > 0, ``weight_decay``
    >= 0 and ``type`` (registered: mmengine would stop on ``None is not a callable object``), its
    ``clip_grad.max_norm`` > 0, its ``dtype`` and ``loss_scale`` what mmengine's ``AmpOptimWrapper``
    takes, its ``clip_grad``'s keys (:func:`_clip_grad_problems`) and its ``paramwise_cfg``'s
    (:func:`_paramwise_problems`); the top-level wrapper's own keys (:func:`.wrapper_key_problems`:
    mmengine's ``build_optim_wrapper`` builds that one; a sub-wrapper of a multi-optimizer config
    is read by that config's own constructor)."""
    optimizer = wrapper['optimizer']
    out = wrapper_key_problems(cfg, wrapper, at) if at == 'optim_wrapper.' else []
    out += not_positive(optimizer.get('lr'), f'{at}optimizer.lr')
    decay = optimizer.get('weight_decay')
    if decay is not None and (not is_number(decay) or decay < 0):
        out.append(f'{at}optimizer.weight_decay must be a number >= 0, got {decay!r}')
    kind = optimizer.get('type')
    registry = registry_of(cfg, 'OPTIMIZERS')
    if isinstance(kind, str) and registry is not None and registered_class(registry, kind) == (True, None):
        suggestion = closest_name(kind, registered_names(registry))
        out.append(f'{at}optimizer.type: unknown optimizer {kind!r}; {suggestion}')
    cls = type_class(registry, kind)
    valid = class_arguments(cls) if cls is not None else None
    if valid is not None:  # a typo would be a TypeError once the model is built (naming no key)
        given = {k: v for k, v in optimizer.items() if k != 'type' and not str(k).startswith('_')}
        merged = f'{at}optimizer' if has_base(cfg) else ''  # SGD's momentum kept under a child's AdamW
        what = f'an argument of {type_name(kind)}'
        out += unknown_keys(given, [a for a in valid if a != 'params'], f'{at}optimizer', what, merged=merged)
    clip = wrapper.get('clip_grad')
    max_norm = clip.get('max_norm') if isinstance(clip, dict) else None
    if max_norm is not None and (not is_number(max_norm) or max_norm <= 0):
        out.append(
            f'{at}clip_grad.max_norm must be a number > 0 (the largest gradient norm), got {max_norm!r}'
        )
    if 'dtype' in wrapper:
        out += _dtype_problems(wrapper['dtype'], f'{at}dtype')
    if 'loss_scale' in wrapper:
        out += _loss_scale_problems(wrapper['loss_scale'], f'{at}loss_scale', bool(wrapper.get('use_fsdp')))
    out += _clip_grad_problems(clip, f'{at}clip_grad')
    out += not_positive(wrapper.get('accumulative_counts'), f'{at}accumulative_counts', integer=True)
    out += _paramwise_problems(cfg, wrapper, at)
    return out


def _clip_grad_problems(clip: Any, key: str) -> list[str]:
    """``optim_wrapper.clip_grad`` as mmengine's ``OptimWrapper`` reads it (0.10.x: it asserts a
    non-empty dict, pops its ``type``, ``'norm'`` by default, raises a ``ValueError`` on any other
    than ``'norm'`` / ``'value'``, and calls ``torch.nn.utils.clip_grad_norm_(params, **rest)`` or
    ``clip_grad_value_(params, **rest)`` at every step): the keys that function takes (its
    arguments but the parameters), its required one (``max_norm`` / ``clip_value``) given; a
    ``TypeError`` at the first iteration otherwise. ``None``: no clipping."""
    import inspect

    import torch

    if clip is None:
        return []
    if not isinstance(clip, dict) or not clip:
        return [
            f'{key} must be None (no clipping) or a dict of the arguments of torch\'s clip_grad_norm_ '
            f"(e.g. dict(max_norm=1.0)) or, with type='value', of clip_grad_value_, got {clip!r}"
        ]
    kind = clip.get('type', 'norm')
    functions = {'norm': torch.nn.utils.clip_grad_norm_, 'value': torch.nn.utils.clip_grad_value_}
    if kind not in functions:
        near = difflib.get_close_matches(str(kind), list(functions), n=1, cutoff=0.5)
        hint = f' (did you mean {near[0]!r}?)' if near else ''
        return [
            f"{key}.type must be 'norm' (clip_grad_norm_, the default) or 'value' (clip_grad_value_), "
            f'got {kind!r}{hint}'
        ]
    function = functions[kind]
    params = list(inspect.signature(function).parameters.values())[1:]  # the parameters: the wrapper's
    valid = [p.name for p in params]
    given = {k: v for k, v in clip.items() if k != 'type'}
    what = f"an argument of torch's {function.__name__} (clip_grad type {kind!r})"
    out = unknown_keys(given, valid, key, what)
    missing = [p.name for p in params if p.default is p.empty and p.name not in given]
    if missing:
        out.append(f'{key} needs {", ".join(missing)} (an argument {function.__name__} requires)')
    return out


#: the ``paramwise_cfg`` keys a constructor reads, by its class (module and name): mmengine's
#: ``DefaultOptimWrapperConstructor.add_params`` (0.10.x: its ``self.paramwise_cfg.get`` calls,
#: tests/config/test_optim_wrapper_check.py holds them to mmengine's source); a constructor that
#: names its own in a ``PARAMWISE_KEYS`` attribute (dna_mm's ``LayerDecayOptimizerConstructor``)
#: is checked against those
PARAMWISE_KEYS: dict[str, tuple[str, ...]] = {
    'mmengine.optim.optimizer.default_constructor.DefaultOptimWrapperConstructor': (
        'custom_keys',
        'bias_lr_mult',
        'bias_decay_mult',
        'norm_decay_mult',
        'dwconv_decay_mult',
        'flat_decay_mult',
        'bypass_duplicate',
        'dcn_offset_lr_mult',
    )
}
#: the options of a ``custom_keys[KEY]`` mmengine's constructor reads itself (the others it copies
#: into the parameter group)
CUSTOM_KEY_OPTIONS = ('lr_mult', 'decay_mult')


def _paramwise_problems(cfg: Config, wrapper: dict, at: str) -> list[str]:
    """The wrapper's ``paramwise_cfg`` against the constructor it names (``constructor``, resolved
    as mmengine's ``build_optim_wrapper`` builds it: ``'DefaultOptimWrapperConstructor'`` by
    default, in the config's default scope): its keys those the constructor reads
    (:data:`PARAMWISE_KEYS`; a constructor not there, a user's own, is left alone), and each
    ``custom_keys[KEY]`` a dict of :data:`CUSTOM_KEY_OPTIONS` or options of the optimizer's class
    (:func:`_optimizer_options`; not checked where the class cannot be had): a key close to one of
    them, or an option of another of torch's optimizers (SGD's ``momentum`` under AdamW), is named;
    any other is the group's own, which a hook or the optimizer may read (MMPretrain's LARS its
    ``lars_exclude``, its ``SimSiamHook`` ``fix_lr``)."""
    paramwise = wrapper.get('paramwise_cfg')
    if paramwise is None:
        return []
    cls = constructor_class(cfg, wrapper)
    valid = getattr(cls, 'PARAMWISE_KEYS', None) or PARAMWISE_KEYS.get(
        f'{getattr(cls, "__module__", "")}.{getattr(cls, "__qualname__", "")}'
    )
    if valid is None:
        return []
    key, name = f'{at}paramwise_cfg', cls.__name__
    if not isinstance(paramwise, dict):
        return [f'{key} must be a dict of the keys {name} reads ({", ".join(valid)}), got {paramwise!r}']
    owner = 'dna_mm' if cls.__module__.startswith('dna_mm.') else 'mmengine'
    out = unknown_keys(paramwise, list(valid), key, f"a key {owner}'s {name} reads")
    out += [
        p for k in valid if k.endswith('_mult') for p in _multiplier_problems(paramwise.get(k), f'{key}.{k}')
    ]
    out += _decay_without_base(cls, wrapper, key)
    custom = paramwise.get('custom_keys')
    if custom is None or 'custom_keys' not in valid:
        return out
    if not isinstance(custom, dict):
        return [
            *out,
            f'{key}.custom_keys must be a dict (a part of a parameter name -> its options), got {custom!r}',
        ]
    optimizer = wrapper['optimizer'].get('type')
    optimizer_cls = optimizer
    if isinstance(optimizer, str):
        registry = registry_of(cfg, 'OPTIMIZERS')
        optimizer_cls = registered_class(registry, optimizer)[1] if registry is not None else None
    options = _optimizer_options(optimizer_cls) if isinstance(optimizer_cls, type) else None
    for part, value in custom.items():
        where = f'{key}.custom_keys[{part!r}]'
        if not isinstance(value, dict):
            out.append(f'{where} must be a dict of options (lr_mult, decay_mult, ...), got {value!r}')
            continue
        out += [p for k in CUSTOM_KEY_OPTIONS for p in _multiplier_problems(value.get(k), f'{where}.{k}')]
        if options is None:
            continue
        valid_options = list(dict.fromkeys([*CUSTOM_KEY_OPTIONS, *options]))
        own = f"{', '.join(CUSTOM_KEY_OPTIONS)}, or {optimizer_cls.__name__}'s own: {', '.join(options)}"
        wrong = {  # another key is the group's own, which a hook or the optimizer may read
            k: v
            for k, v in value.items()
            if k not in valid_options
            and (k in _torch_options() or difflib.get_close_matches(str(k), valid_options, n=1))
        }
        out += unknown_keys(wrong, valid_options, where, 'an option of a custom key', own)
    return out


#: the multipliers of mmengine's constructor that need the optimizer's ``weight_decay`` given
#: (0.10.7 ``DefaultOptimWrapperConstructor._validate_cfg``; a custom key's ``decay_mult`` too)
DECAY_MULTS = ('bias_decay_mult', 'norm_decay_mult', 'dwconv_decay_mult')


def _decay_without_base(cls: type, wrapper: dict, key: str) -> list[str]:
    """A decay multiplier of ``paramwise_cfg`` (``key``) without ``optimizer.weight_decay`` in the
    config, for a constructor that validates as mmengine's does: it raises ``ValueError: base_wd
    should not be None`` once the model is built (the optimizer's own default, AdamW's 0.01, is
    not read)."""
    from mmengine.optim import DefaultOptimWrapperConstructor  # noqa: PLC0415

    optimizer, paramwise = wrapper.get('optimizer') or {}, wrapper['paramwise_cfg']
    validates = getattr(cls, '_validate_cfg', None) is DefaultOptimWrapperConstructor._validate_cfg
    if not validates or optimizer.get('weight_decay') is not None:
        return []
    custom = paramwise.get('custom_keys')
    given = [f'{key}.{k}' for k in DECAY_MULTS if k in paramwise]
    given += [
        f'{key}.custom_keys[{part!r}].decay_mult'
        for part, value in (custom.items() if isinstance(custom, dict) else ())
        if isinstance(value, dict) and 'decay_mult' in value
    ]
    at = key.removesuffix('paramwise_cfg')
    return [
        f"{g} multiplies {at}optimizer.weight_decay, which the config does not give (mmengine's "
        f'{cls.__name__} raises "base_wd should not be None" once the model is built): set it'
        for g in given[:1]
    ]


@functools.cache
def _torch_options() -> frozenset[str]:
    """The options of torch's optimizers' parameter groups (SGD's ``momentum``, Adam's
    ``betas``, ...): one of them in a custom key of another optimizer is ignored by it. Read once
    (the signatures of the optimizers torch has), then asked once per custom key's option."""
    import torch  # noqa: PLC0415

    found: set[str] = set()
    for cls in vars(torch.optim).values():
        if (
            isinstance(cls, type)
            and issubclass(cls, torch.optim.Optimizer)
            and cls is not torch.optim.Optimizer
        ):
            found.update(_optimizer_options(cls) or ())
    return frozenset(found)


def _multiplier_problems(value: Any, key: str) -> list[str]:
    """A ``paramwise_cfg`` multiplier (``..._lr_mult``, ``..._decay_mult``, a custom key's
    ``lr_mult`` / ``decay_mult``): a number >= 0 (0 freezes the parameters or leaves them
    undecayed); mmengine's constructor sets the group's ``lr`` / ``weight_decay`` to the
    optimizer's times it (``param_group['lr'] = self.base_lr * lr_mult``), where torch takes a
    negative one without a word. ``None`` leaves it to the default."""
    if value is None or (is_number(value) and value >= 0):
        return []
    setting = 'lr' if 'lr_mult' in key.rsplit('.', 1)[-1] else 'weight_decay'
    return [
        f"{key} must be a number >= 0 (it multiplies the optimizer's {setting}: a negative one makes the "
        f"parameters' {setting} negative), got {value!r}"
    ]


def _optimizer_options(optimizer: type) -> Optional[list[str]]:
    """The options a parameter group of ``optimizer`` (a class) takes: the keyword arguments of its
    ``__init__`` but ``params``, up the MRO while an ``__init__`` passes ``**kwargs`` on (torch's
    ``Optimizer`` keeps them as the groups' defaults); ``None`` where they cannot be told (a
    ``**kwargs`` that reaches no named argument)."""
    import inspect

    import torch

    names: list[str] = []
    for klass in optimizer.__mro__:
        if klass in (torch.optim.Optimizer, object):
            return None
        if '__init__' not in vars(klass):
            continue
        try:
            params = list(inspect.signature(klass.__init__).parameters.values())
        except (TypeError, ValueError):
            return None
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names += [p.name for p in params if p.kind in keyword and p.name not in ('self', 'params')]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return list(dict.fromkeys(names))
    return None


def _dtype_problems(dtype: Any, key: str) -> list[str]:
    """``optim_wrapper.dtype``: what mmengine's ``AmpOptimWrapper`` asserts it is (one of its
    ``valid_dtypes``, ``None`` or a ``torch.dtype``), on any machine (``AutoAmpOptimWrapper`` drops
    it without a GPU, so a typo would pass a CPU run and stop the GPU one)."""
    import torch
    from mmengine.optim import AmpOptimWrapper

    valid = AmpOptimWrapper.valid_dtypes
    if dtype is None or isinstance(dtype, torch.dtype) or (isinstance(dtype, str) and dtype in valid):
        return []
    near = difflib.get_close_matches(str(dtype), valid, n=1, cutoff=0.5)
    hint = f' (did you mean {near[0]!r}?)' if near else ''
    return [
        f"{key} must be one of {', '.join(map(repr, valid))} (mmengine's AmpOptimWrapper), None or a "
        f'torch dtype, got {dtype!r}{hint}'
    ]


def _loss_scale_problems(loss_scale: Any, key: str, fsdp: bool = False) -> list[str]:
    """``optim_wrapper.loss_scale``: what mmengine's ``AmpOptimWrapper`` takes (``'dynamic'``, a
    float > 0: a static scale, or a dict of its ``GradScaler``'s arguments: ``ShardedGradScaler``'s
    with ``use_fsdp``), on any machine (``AutoAmpOptimWrapper`` drops it without a GPU, so a typo
    would pass a CPU run and stop the GPU one). An int (``--cfg-options
    optim_wrapper.loss_scale=512``) is refused too: mmengine takes no int; the float is named."""
    import inspect
    import math

    from mmengine.optim.optimizer import amp_optimizer_wrapper

    if isinstance(loss_scale, str) and loss_scale == 'dynamic':
        return []
    if isinstance(loss_scale, float):
        if math.isfinite(loss_scale) and loss_scale > 0:
            return []
        return [f'{key} must be > 0 (a static loss scale), got {loss_scale!r}']
    if isinstance(loss_scale, dict):
        scaler = amp_optimizer_wrapper.GradScaler
        if fsdp:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            scaler = ShardedGradScaler
        valid = [p for p in inspect.signature(scaler.__init__).parameters if p != 'self']
        return unknown_keys(loss_scale, valid, key, f'an argument of {scaler.__name__}')
    what = (
        f"{key} must be 'dynamic', a float > 0 (a static scale) or a dict of GradScaler's arguments "
        f"(mmengine's AmpOptimWrapper), got {loss_scale!r}"
    )
    if is_number(loss_scale) and loss_scale > 0:
        return [f'{what}: write it as a float, {key}={float(loss_scale)!r}']
    if isinstance(loss_scale, str):
        near = difflib.get_close_matches(loss_scale, ['dynamic'], n=1, cutoff=0.5)
        return [what + (f' (did you mean {near[0]!r}?)' if near else '')]
    return [what]
