"""Which registry builds a model config: dna_mm's types from any registry, in any scope.

dna_mm registers its models in MMEngine's root ``MODELS``, which every library's registry
(MMAction2's, MMDetection's, MMPretrain's) reaches through its parent, with or without a default
scope. A dna_mm model whose parts come from a library's registry builds them in that library's
scope (:func:`home_scope`), whatever the caller's, so it is the same model from everywhere.

A config that dna_mm builds on a user's behalf (``with_attention``'s ``model``) names another
library's type, often without saying which library (``type='MViT'``); :func:`build_model` looks
it up in this order:

1. what the config says: ``_scope_``, a ``scope.Type`` name, or a class;
2. the registry it was reached through (``mmaction.registry.MODELS``, ...), or the default
   scope's when one is set (MMEngine's own rule), with its parents;
3. else the one OpenMMLab library that has the type (several: an error naming them and how to
   choose one).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from importlib import import_module
from importlib.util import find_spec
from typing import Optional

from mmengine.registry import MODELS, DefaultScope, Registry
from torch import nn

from ..errors import ConfigError

#: the OpenMMLab libraries whose model registries dna_mm searches (those installed)
LIBRARIES = ('mmaction', 'mmdet', 'mmpretrain')


def library_registries() -> dict[str, Registry]:
    """``scope → MODELS`` of each installed library of :data:`LIBRARIES`."""
    found = {}
    for scope in LIBRARIES:
        try:
            found[scope] = import_module(f'{scope}.registry').MODELS
        except ImportError:
            continue
    return found


def detection_parts_scope() -> str:
    """The scope the detection half's plain-torch parts (ViTDet's norms and activations,
    SimpleFPN's convolutions and norms) are built in: MMDetection's where its models import
    (mmcv with its compiled ops), else MMEngine's root, which has mmcv's own (``LN``, ``GELU``,
    ``Conv2d``) and dna_mm's ``LN2d``. So the backbone and the neck run on an mmcv without ops
    (mmcv-lite, ``make demo``'s); only Mask R-CNN's heads need them."""
    return 'mmdet' if find_spec('mmcv._ext') is not None else 'mmengine'


def home_scope(scope: str) -> AbstractContextManager:
    """Build in ``scope`` (``'mmaction'``, ...) whatever the caller's default scope: a dna_mm
    model's parts come from the library it extends."""
    return DefaultScope.overwrite_default_scope(scope)


def current_registry(registry: Registry = MODELS) -> Registry:
    """``registry``, or the default scope's ``MODELS`` when ``registry`` is the root and a
    default scope is set (where MMEngine's build would look)."""
    current = DefaultScope.get_current_instance()
    if registry is not MODELS or current is None:
        return registry
    return library_registries().get(current.scope_name, registry)


def _holds(registry: Registry, name: str) -> bool:
    """``registry`` or one of its parents has ``name`` (MMEngine's lookup of a plain name)."""
    return registry.get(name) is not None


def _has_own(registry: Registry, name: str) -> bool:
    """``registry`` itself has ``name``, its library's models imported first; a library whose
    models do not import here (MMDetection's need mmcv's compiled ops) has none."""
    try:
        registry.import_from_location()
    except ImportError:
        return False
    return name in registry.module_dict


def scope_of(name: str, registry: Registry = MODELS) -> Optional[str]:
    """The scope to build type ``name`` in (module docstring, steps 2-3): ``registry``'s own
    scope (``None``: keep the caller's) when it or its parents have it, else the one library
    that has it.

    Raises:
        ConfigError: no library has it, or several do.
    """
    registry = current_registry(registry)
    if _holds(registry, name):
        return None if registry is MODELS else registry.scope
    holders = [scope for scope, reg in library_registries().items() if _has_own(reg, name)]
    if len(holders) == 1:
        return holders[0]
    if not holders:
        raise ConfigError(
            f'model type {name!r} is not in the registry of {", ".join(library_registries())} or '
            'MMEngine (a typo, or its library is not imported: custom_imports)'
        )
    raise ConfigError(
        f'model type {name!r} is in {" and ".join(holders)}: say which, as '
        f'type={holders[0] + "." + name!r} or _scope_={holders[0]!r}'
    )


def build_model(cfg: dict, registry: Registry = MODELS) -> nn.Module:
    """Build model config ``cfg`` reached through ``registry``, in the scope :func:`scope_of`
    picks (a config naming its scope or class is built as it says)."""
    kind = cfg.get('type')
    if not isinstance(kind, str) or '_scope_' in cfg:
        return registry.build(cfg)
    named, bare = Registry.split_scope_key(kind)
    if named in library_registries():  # 'mmaction.MViT': built as in MMAction2's scope
        with home_scope(named):
            return library_registries()[named].build({**cfg, 'type': bare})
    if named is not None:  # a module path ('package.module.Class')
        return registry.build(cfg)
    scope = scope_of(kind, registry)
    if scope is None:
        return current_registry(registry).build(cfg)
    with home_scope(scope):
        return library_registries()[scope].build(cfg)
