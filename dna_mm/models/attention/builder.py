"""Build an attention module of the family from a config, per layer.

``cfg`` is an MMEngine config dict whose ``type`` is a registered member (a subclass of
:class:`~dna_mm.models.attention.AttentionBase` in MMEngine's ``MODELS``: the shipped ones, or
your own, registered by your import), the member's short name (``'softmax'``, ``'dna'``,
``'gated'``, ...: a member's :attr:`~.base.AttentionBase.short_name`), the member class itself
(a new-style config's ``type=DnAAttention``) or its dotted path (``'dna_mm.models.DnAAttention'``:
the dump of such a config), as MMEngine's registry takes them (:func:`member_type`). Each member states its
own per-layer rule (:meth:`~.base.AttentionBase.layer_config`): Diff's ``λ_init`` by depth,
Cog's softmax first and last layer; this module keeps no list of members.

A tool that puts the member it is given by name in a model's self-attention (the demos, the
study, the benchmarks) looks the name up with :func:`self_attention_class`: a cross form is
refused there, and its messages name the self-attention members only.

Every model builds its attentions here: MMAction2's wrappers, ``with_attention``'s hosts and
ViTDet. Every host takes the attention as one keyword, :data:`ATTENTION_KEY` (``attn_cfg``); a
key it took before is a deprecated alias for one release (:func:`deprecated_key`).
"""

from __future__ import annotations

import copy
import difflib
import inspect
import warnings
from typing import Any, Optional, Union

from mmengine.registry import MODELS
from mmengine.utils import get_object_from_string
from torch import nn

from ...errors import ConfigError, SettingError
from ...family import method_attention
from ..scopes import current_registry
from .base import AttentionBase, CrossAttentionMixin, check_formula
from .registration import short_name_owner

AttnCfg = Union[str, type, dict]
#: the keyword every host takes its attention by
ATTENTION_KEY = 'attn_cfg'


class NoTypeError(ConfigError, KeyError):
    """An attention config without ``type``: a config mistake (one line from the tools), and the
    ``KeyError`` it was before."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ''


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


def is_cross_form(cls: type) -> bool:
    """``cls`` is a cross form (:class:`~.base.CrossAttentionMixin`: queries from one input, keys
    and values from a ``context``), which a host's self-attention cannot call."""
    return issubclass(cls, CrossAttentionMixin)


def self_attention_class(name: str) -> type:
    """The self-attention member ``name`` (a short name or registered type) names: the lookup of
    the tools that put a member in a model's self-attention (the demos, the study, the
    benchmarks: ``dna_mm.tools.cli.known_names``), whose messages name only such members.

    Raises:
        ConfigError: a name no member holds (the closest self-attention member, and the valid
            ones), or a cross form's (its self-attention form named).
        MemberError: a member that defines no ``attend`` (:func:`~.base.check_formula`).
    """
    types = attention_types()
    cls = types.get(short_names().get(name, name))
    if cls is None:
        raise ConfigError(unknown_attention(name, cross_forms=False))
    if is_cross_form(cls):
        own = next((c for c in cls.__mro__[1:] if c in types.values() and not is_cross_form(c)), None)
        of = f' of {known_as(own)}' if own is not None else ''
        raise ConfigError(
            f'{name} is a cross form (query and context){of}; these tools take self-attention '
            f'members: {valid_names(cross_forms=False)}'
        )
    check_formula(cls)  # a member of no formula (one registered without a short name): before any work
    return cls


def check_settings(member: str, settings: dict) -> None:
    """Refuse a method's ``settings`` (:func:`~dna_mm.family.method_attention`) that the
    self-attention member ``member`` names does not take: a variant of a member without DnA's
    variants (``softmax:apm``).

    Raises:
        SettingError: what a variant is.
        ConfigError: no such member, or a cross form (:func:`self_attention_class`).
    """
    if 'variant' in settings and 'variant' not in accepted_arguments(self_attention_class(member)):
        raise SettingError(f"{member} has no variants; a variant is a DnA attention's (dna:apm, dna:A±, A±)")


def attention_cfg(cfg: AttnCfg) -> dict:
    """Normalise ``'dna'`` / ``dict(type='dna', ...)`` to ``dict(type='DnAAttention', ...)`` (a
    dotted path to a member too; a member's class, or a dict of one, keeps it). A name may carry
    the settings the tools' methods do (:func:`~dna_mm.family.method_attention`): ``'dna:apm+gated'``
    → ``dict(type='DnAAttention', variant='apm', gated=True)``, ``'A±'`` → DnA's A± variant.

    Raises:
        NoTypeError: a config without ``type`` (a :class:`~dna_mm.errors.ConfigError` and a
            ``KeyError``).
        ConfigError: a type that is not a registered member (the message lists them), an unknown
            variant or setting in a name.
    """
    if isinstance(cfg, str):
        member, settings = method_attention(cfg)
        cfg = dict(type=member, **settings)
    cfg = dict(type=cfg) if inspect.isclass(cfg) else copy.deepcopy(dict(cfg))
    if 'type' not in cfg:
        raise NoTypeError(f'attention config {cfg} has no "type"')
    if isinstance(cfg['type'], str):  # a class stays as it is
        member = member_type(cfg['type'])
        if member is None:
            raise ConfigError(unknown_attention(cfg['type']))
        cfg['type'] = member
    return cfg


def member_type(kind: Any) -> Optional[Union[str, type]]:
    """The member a config's ``type`` names, as :func:`attention_cfg` writes it: the registered
    name of a short name, of a registered name, or of a dotted path that resolves to a registered
    member (``'dna_mm.models.DnAAttention'``: what the dump of a new-style config holds; MMEngine's
    registry resolves one too); a member class (``type=DnAAttention`` in a new-style config)
    itself; ``None`` for anything else (no member's name, a class that is no member)."""
    if inspect.isclass(kind):
        return kind if issubclass(kind, AttentionBase) else None
    if not isinstance(kind, str):
        return None
    types = attention_types()
    kind = short_names().get(kind, kind)
    if kind in types or '.' not in kind:
        return kind if kind in types else None
    try:
        cls = get_object_from_string(kind)
    except (ImportError, AttributeError):  # a module that does not import, a name it lacks
        return None
    return next((name for name, member in types.items() if member is cls), None)


#: how a member of your own is found by its name (docs/attention.md)
OWN_MEMBER = ' (your own member: subclass AttentionBase and register it in MODELS, docs/attention.md)'


def unknown_attention(name: str, cross_forms: bool = True) -> str:
    """The line for a ``name`` no member holds: the closest valid name and the valid ones
    (:func:`suggest_attention`; without ``cross_forms``, the self-attention members only)."""
    return f'attention type {name!r} is not registered; {suggest_attention(name, cross_forms)}{OWN_MEMBER}'


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
    if unknown:  # the closest argument it takes, else all of them (a tool that builds unchecked)
        takes = sorted(accepted_arguments(cls))
        near = difflib.get_close_matches(unknown[0], takes, n=1)
        hint = f'did you mean {near[0]!r}?' if near else f'it takes {", ".join(takes)}'
        raise ConfigError(f'{cls.__name__} takes no argument {", ".join(map(repr, unknown))}; {hint}')
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


def member_names(cross_forms: bool = True) -> tuple[dict[str, str], tuple[str, ...]]:
    """``(short name → registered name, registered names)`` of the members registered now
    (:func:`short_names`, :func:`attention_types`); without ``cross_forms``, of the
    self-attention members only (:func:`is_cross_form`)."""
    types = {n: c for n, c in attention_types().items() if cross_forms or not is_cross_form(c)}
    return {s: n for s, n in short_names().items() if n in types}, tuple(types)


def valid_names(cross_forms: bool = True) -> str:
    """``'softmax, dna, … or SoftmaxAttention, DnAAttention, …'``: the short names, then the
    registered names (:func:`member_names`)."""
    shorts, types = member_names(cross_forms)
    return f'{", ".join(shorts)} or {", ".join(types)}'


def known_as(cls: type) -> str:
    """How a message names the registered member ``cls``: ``'DnAAttention / dna'`` (its registered
    name and short name), or its registered name."""
    shorts, types = short_names(), attention_types()
    name = next(n for n, c in types.items() if c is cls)
    short = next((s for s, n in shorts.items() if n == name), None)
    return f'{name} / {short}' if short is not None else name


def suggest_attention(name: str, cross_forms: bool = True) -> str:
    """``'did you mean DnAAttention / dna?'`` for the valid name closest to ``name`` (difflib; of
    a dotted path, its last part), else the list of valid names; without ``cross_forms``, of the
    self-attention members only."""
    shorts, types = member_names(cross_forms)
    short_of = {v: k for k, v in shorts.items()}
    candidates = {c.lower(): c for c in (*shorts, *types)}
    valid = f'valid: {valid_names(cross_forms)}'
    name = name.rsplit('.', 1)[-1]  # a dotted path's class name
    match = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.5)
    if not match:
        return valid
    best = candidates[match[0]]
    full = shorts.get(best, best)
    names = f'{full} / {short_of[full]}' if full in short_of else full
    return f'did you mean {names}? ({valid})'
