"""The optim wrapper's own keys, checked before anything is built
(:func:`dna_mm.config.check.optim.wrapper_problems`):

* ``optim_wrapper``'s keys, which mmengine's ``build_optim_wrapper`` builds with its
  ``DefaultOptimWrapperConstructor`` or a subclass that builds as it does: ``type``,
  ``optimizer``, ``paramwise_cfg``, ``constructor`` and the arguments of the wrapper's class up its
  MRO (``AmpOptimWrapper``'s and ``OptimWrapper``'s for it and for dna_mm's ``AutoAmpOptimWrapper``,
  whose ``**kwargs`` would have the ``TypeError`` of ``clip_gra`` name no valid key once the model
  is built), the closest valid name suggested; an AMP key (``dtype``, ``loss_scale``) under a
  full-precision wrapper (a child's ``type`` over its base's ``dtype``) is named as one.

The class of the wrapper's ``constructor``, as mmengine resolves it, is had here too
(:func:`constructor_class`): the ``paramwise_cfg`` check reads its keys from it.
"""

from __future__ import annotations

from typing import Any

from mmengine.config import Config

from ..build import type_name
from .values import class_arguments, registered_class, registry_of, unknown_keys

#: the keys mmengine's ``build_optim_wrapper`` and ``DefaultOptimWrapperConstructor`` read from
#: ``optim_wrapper`` besides the wrapper's arguments (``optimizer`` is one, passed built)
BUILD_KEYS = ('type', 'optimizer', 'paramwise_cfg', 'constructor')
#: the class whose arguments a registered wrapper function takes through its ``**kwargs``, by the
#: function (module and name): dna_mm's ``AutoAmpOptimWrapper`` builds mmengine's
#: ``AmpOptimWrapper`` on a GPU, its parent ``OptimWrapper`` without one
WRAPPER_FUNCTIONS = {'dna_mm.engine.optim_wrapper.auto_amp_optim_wrapper': 'AmpOptimWrapper'}


def constructor_class(cfg: Config, wrapper: dict) -> Any:
    """The class of the wrapper's ``constructor``, resolved as mmengine's ``build_optim_wrapper``
    builds it (``'DefaultOptimWrapperConstructor'`` by default, in the config's default scope);
    ``None`` where it cannot be had."""
    constructor = wrapper.get('constructor', 'DefaultOptimWrapperConstructor')
    if isinstance(constructor, str):
        registry = registry_of(cfg, 'OPTIM_WRAPPER_CONSTRUCTORS')
        return registered_class(registry, constructor)[1] if registry is not None else None
    return constructor


def wrapper_key_problems(cfg: Config, wrapper: dict, at: str) -> list[str]:
    """The wrapper's keys: :data:`BUILD_KEYS` and the arguments of its class (``type``,
    ``'OptimWrapper'`` by default: mmengine's constructor sets it), up its MRO while an
    ``__init__`` passes ``**kwargs`` on (``AmpOptimWrapper``'s and ``OptimWrapper``'s; dna_mm's
    ``AutoAmpOptimWrapper``, a function of ``**kwargs``, through :data:`WRAPPER_FUNCTIONS`): the
    constructor passes any other key on to the wrapper, a ``TypeError`` once the model is built
    (one that names no valid key where the wrapper takes ``**kwargs``). The closest valid name
    suggested. Checked where the constructor is mmengine's ``DefaultOptimWrapperConstructor`` or
    a subclass that builds the wrapper as it does (dna_mm's layer decay, MMAction2's); a wrapper
    whose arguments cannot be told is left alone."""
    from mmengine.optim import DefaultOptimWrapperConstructor  # noqa: PLC0415

    constructor = constructor_class(cfg, wrapper)
    builds = isinstance(constructor, type) and issubclass(constructor, DefaultOptimWrapperConstructor)
    if not builds or any(
        getattr(constructor, m) is not getattr(DefaultOptimWrapperConstructor, m)
        for m in ('__init__', '__call__')
    ):
        return []
    kind = wrapper.get('type', 'OptimWrapper')
    registry = registry_of(cfg, 'OPTIM_WRAPPERS')
    target = kind
    if isinstance(kind, str):
        target = registered_class(registry, kind)[1] if registry is not None else None
    function = WRAPPER_FUNCTIONS.get(
        f'{getattr(target, "__module__", "")}.{getattr(target, "__qualname__", "")}'
    )
    if function is not None and registry is not None:
        target = registered_class(registry, function)[1]
    valid = class_arguments(target) if isinstance(target, type) else None
    if valid is None:
        return []
    valid = list(dict.fromkeys([*BUILD_KEYS[:2], *valid, *BUILD_KEYS[2:]]))
    given = {k: v for k, v in wrapper.items() if not str(k).startswith('_')}  # _scope_
    what = f'a key of the optim wrapper {type_name(kind)}'
    amp = class_arguments(registered_class(registry, 'AmpOptimWrapper')[1]) if registry is not None else None
    out = []
    for k in given:  # an AMP key under a full-precision wrapper (a child's type over its base's dtype)
        if k in valid:
            continue
        if amp is not None and k in amp:
            out.append(
                f'{at}{k} is not {what} (full precision): it is an argument of AmpOptimWrapper (mixed '
                f"precision); drop it, or set {at}type='AutoAmpOptimWrapper'"
            )
        else:
            out += unknown_keys({k: given[k]}, valid, at[:-1], what)
    return out
