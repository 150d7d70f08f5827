"""Build an attention module of the family from a config, per layer.

``cfg`` is an MMEngine config dict whose ``type`` is a registered member (a subclass of
:class:`~dna_mm.models.attention.AttentionBase` in MMEngine's ``MODELS``: the shipped ones, or
your own, registered by your import) or the member's short name (``'softmax'``, ``'dna'``,
``'gated'``, ...: a member's :attr:`~.base.AttentionBase.short_name`). Each member states its
own per-layer rule (:meth:`~.base.AttentionBase.layer_config`): Diff's ``λ_init`` by depth,
Cog's softmax first and last layer; this module keeps no list of members.

Every model builds its attentions here: MMAction2's wrappers, ``with_attention``'s hosts and
ViTDet. Every host takes the attention as one keyword, :data:`ATTENTION_KEY` (``attn_cfg``); a
key it took before is a deprecated alias for one release (:func:`deprecated_key`).
"""

from __future__ import annotations

import copy
import difflib
import inspect
import warnings
from typing import Union

from mmengine.registry import MODELS
from torch import nn

from ...errors import ConfigError
from ..scopes import current_registry
from .base import AttentionBase
from .registration import short_name_owner

AttnCfg = Union[str, dict]
#: the keyword every host takes its attention by
ATTENTION_KEY = 'attn_cfg'


def attention_types() -> dict[str, type]:
    """Registered name → class of every member registered now (root ``MODELS`` and the default
    scope's), the self-attentions before their cross forms."""
    found = {}
    for registry in dict.fromkeys((MODELS, current_registry(MODELS))):
        for name, cls in registry.module_dict.items():
            if inspect.isclass(cls) and issubclass(cls, AttentionBase):
                found.setdefault(name, cls)
    return dict(sorted(found.items(), key=lambda item: 'Cross' in item[0]))


def short_names() -> dict[str, str]:
    """Short name → registered name, from each member's own :attr:`~.base.AttentionBase.short_name`
    (of two, the one that took the other's place: :mod:`.registration`).

    Raises:
        MemberError: two members hold one short name and neither replaced the other.
    """
    types = attention_types()
    shorts = dict.fromkeys(cls.own_short_name() for cls in types.values() if cls.own_short_name())
    owners = {short: short_name_owner(short, types.values()) for short in shorts}
    return {short: next(n for n, cls in types.items() if cls is owner) for short, owner in owners.items()}


def attention_cfg(cfg: AttnCfg) -> dict:
    """Normalise ``'dna'`` / ``dict(type='dna', ...)`` to ``dict(type='DnAAttention', ...)``.

    Raises:
        KeyError: a config without ``type``.
        ValueError: a type that is not a registered member (the message lists them).
    """
    cfg = dict(type=cfg) if isinstance(cfg, str) else copy.deepcopy(dict(cfg))
    if 'type' not in cfg:
        raise KeyError(f'attention config {cfg} has no "type"')
    shorts = short_names()
    cfg['type'] = shorts.get(cfg['type'], cfg['type'])
    if isinstance(cfg['type'], str) and cfg['type'] not in attention_types():
        raise ValueError(
            f'attention type {cfg["type"]!r} is not registered; {suggest_attention(cfg["type"])} '
            '(your own member: subclass AttentionBase and register it in MODELS, docs/attention.md)'
        )
    return cfg


def attention_class(cfg: AttnCfg) -> type:
    """The member class a config (or short name) names."""
    return _class_of(attention_cfg(cfg)['type'])


def _class_of(kind: Union[str, type]) -> type:
    """The class of a normalised config's ``type``."""
    return kind if inspect.isclass(kind) else attention_types()[kind]


def accepted_arguments(cls: type) -> set[str]:
    """The arguments a member's constructor takes: its own and, through ``**kwargs``, its
    bases' (up to the first constructor without ``**kwargs``: :class:`AttentionBase`'s)."""
    accepted: set[str] = set()
    for klass in cls.__mro__:
        init = vars(klass).get('__init__')
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        accepted |= {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return accepted - {'self'}


def unknown_arguments(cfg: AttnCfg, layer_index: int = 1, num_layers: int = 3) -> list[str]:
    """The keys of ``cfg`` that its member takes neither in its constructor nor in its
    :meth:`~.base.AttentionBase.layer_config` (checked as layer ``layer_index`` of
    ``num_layers``: by default a middle layer, where Cog keeps its own type)."""
    cfg = attention_cfg(cfg)
    cfg = _class_of(cfg['type']).layer_config(cfg, layer_index, num_layers)
    return sorted(set(cfg) - {'type'} - accepted_arguments(_class_of(cfg['type'])))


def build_attention(
    cfg: AttnCfg, embed_dims: int, num_heads: int, layer_index: int = 0, num_layers: int = 1, **default_args
) -> nn.Module:
    """Build the attention of layer ``layer_index`` (0-based) of a ``num_layers``-deep model:
    the member's :meth:`~.base.AttentionBase.layer_config` applied, then ``default_args``
    (the host's sizes, dropouts, ...) filling what the config leaves out (also in a layer
    whose rule changed its type)."""
    cfg = attention_cfg(cfg)
    cfg = _class_of(cfg['type']).layer_config(cfg, layer_index, num_layers)
    cls = _class_of(cfg.pop('type'))
    unknown = sorted(set(cfg) - accepted_arguments(cls))
    if unknown:
        raise ConfigError(f'{cls.__name__} takes no argument {", ".join(map(repr, unknown))}')
    cfg = dict(embed_dims=embed_dims, num_heads=num_heads, **default_args) | cfg
    return cls(**cfg)


def deprecated_key(owner: str, old: str, new: str) -> None:
    """Warn (``FutureWarning``) that ``owner``'s argument ``old`` is a deprecated alias, kept
    for one release; ``new`` is what to write instead (it names the new key)."""
    warnings.warn(
        f'{owner}: {old} is deprecated and will be removed in the next release; use {new}',
        FutureWarning,
        stacklevel=3,
    )


def __getattr__(name: str) -> object:
    """``SHORT_NAMES`` / ``ATTENTION_TYPES`` of earlier releases, read from the registry now."""
    if name == 'SHORT_NAMES':
        return short_names()
    if name == 'ATTENTION_TYPES':
        return tuple(attention_types())
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def suggest_attention(name: str) -> str:
    """``'did you mean DnAAttention / dna?'`` for the valid name closest to ``name`` (difflib),
    else the list of valid names."""
    shorts, types = short_names(), tuple(attention_types())
    short_of = {v: k for k, v in shorts.items()}
    candidates = {c.lower(): c for c in (*shorts, *types)}
    valid = f'valid: {", ".join(shorts)} or {", ".join(types)}'
    match = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.5)
    if not match:
        return valid
    best = candidates[match[0]]
    full = shorts.get(best, best)
    names = f'{full} / {short_of[full]}' if full in short_of else full
    return f'did you mean {names}? ({valid})'
