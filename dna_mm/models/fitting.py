"""Fit a state dict's attentions to the attention classes of a built model: a DnA module
reading softmax weights gets its negative branch generated, a DnA module of more projections
reads a variant of fewer exactly, a module without a negative branch drops one. The backbones'
``pretrained`` loader, the ``dna_vit_*`` checkpoint filter and the attention swap's load hooks
all fit through :func:`adapt_attentions` (MViTv2's pooling form: :func:`adapt_pooled_attention`),
each negative branch by the one rule, :func:`~dna_mm.converters.attention.negative_branch`.

What a module needs is asked of it (the member contract,
:class:`~dna_mm.models.attention.AttentionBase`): the negative branch it has
(:meth:`~dna_mm.models.attention.AttentionBase.negative_variant`), what it starts itself
(:attr:`~dna_mm.models.attention.AttentionBase.own_start`), the extra heads MViTv2's form pools
(:meth:`~dna_mm.models.attention.AttentionBase.extra_heads`, ``own_heads``).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Collection, Mapping, Sequence

from torch import Tensor, nn

from ..converters.attention import dna_to_softmax, negative_branch
from ..converters.hosts import extra_pooling
from ..family import EXACT_UPGRADE, NEGATIVE_INIT, NEGATIVE_KEYS, NegativeInit
from .attention import AttentionBase


def abbreviate(items: Sequence[str], limit: int, sep: str = ', ', tail: str = ', ') -> str:
    """The first ``limit`` items joined by ``sep``, then ``{tail}... (K more)`` for the rest."""
    more = f'{tail}... ({len(items) - limit} more)' if len(items) > limit else ''
    return sep.join(items[:limit]) + more


def own_start_keys(module: AttentionBase, sd: Mapping[str, Tensor], prefix: str = '') -> list[str]:
    """The keys of ``module`` (under ``prefix``) that it starts itself rather than read from
    ``sd``: each group of :attr:`~.attention.AttentionBase.own_start` (keys starting with one of
    its prefixes: Diff's ``lambda_*``, a gated member's ``gate.*``) of which ``sd`` has no key. A
    group ``sd`` has some of is the file's, and read from it."""
    own = list(module.state_dict())
    keys: list[str] = []
    for start in module.own_start:
        group = [prefix + k for k in own if k.startswith(start)]
        if not any(k in sd for k in group):
            keys += group
    return keys


def fill_own_start(module: AttentionBase, sd: dict, prefix: str = '') -> list[str]:
    """Complete ``sd`` (in place) with what ``module`` (under ``prefix``) starts itself and ``sd``
    lacks (:func:`own_start_keys`: a gate, Diff's ``lambda_*``), at the module's current values:
    their start, for a strict load. Returns the keys filled."""
    keys = own_start_keys(module, sd, prefix)
    if keys:
        current = module.state_dict()
        sd.update({k: current[k[len(prefix) :]].detach().clone() for k in keys})
    return keys


def adapt_attentions(
    model: nn.Module,
    sd: Mapping[str, Tensor],
    neg_init: NegativeInit = NEGATIVE_INIT,
    source: str = 'checkpoint',
    self_init: Collection[str] = (),
) -> tuple['OrderedDict[str, Tensor]', list[str]]:
    """Fit every attention's keys in ``sd`` to the attention class in ``model``.

    * DnA target, softmax source: a negative branch is generated (:func:`negative_branch`,
      with ``neg_init``, the module's :meth:`~.attention.AttentionBase.negative_variant` and
      heads), from the packed ``qkv`` or the separate ``q_proj`` / ``v_proj``;
    * DnA target, DnA source of a variant with fewer projections (``qpm_v`` into ``qpm_vpm``,
      say): the missing ones are filled exactly (``q_neg = Q``, ``v_neg = V``, ``α = 1``:
      :data:`~dna_mm.family.EXACT_UPGRADE`);
    * non-DnA target: a negative branch present in ``sd`` is dropped.

    Returns the new state dict and the keys it generated.

    Args:
        self_init: Keys of the model that keep their initialisation when ``sd`` lacks them.

    Raises:
        ValueError: ``sd`` has keys for one of the model's attentions but not all of that
            attention's tensors (an unconverted layout, a truncated file); the message names
            ``source`` and the missing keys. Parameters a member starts itself
            (:attr:`~.attention.AttentionBase.own_start`: Diff's ``lambda_*``, ``sub_norm``, a gated
            member's ``gate``) may be absent, each group where the source has none of it
            (:func:`own_start_keys`), and the keys in ``self_init``.
    """
    out = OrderedDict(sd)
    generated: list[str] = []
    incomplete: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        p = f'{name}.' if name else ''
        if not isinstance(module, AttentionBase):
            continue
        if not any(k.startswith(p) for k in out):  # not in the file: the load report's job
            continue
        own = [p + k for k in module.state_dict()]
        if p + 'qkv.weight' in out or p + 'q_proj.weight' in out:
            # the attention's own tensors: 'qkv.weight', 'alpha', 'sub_norm.weight', ...
            sub = OrderedDict(
                (k, v) for k, v in out.items() if k.startswith(p) and k[len(p) :].count('.') <= 1
            )
            variant = module.negative_variant()
            if variant is None:
                new = dna_to_softmax(sub, strict=False)
            else:
                from_dna = any(p + k in sub for k in NEGATIVE_KEYS)
                init = EXACT_UPGRADE if from_dna else neg_init
                new = negative_branch(sub, p, variant, module.num_heads, init)
            for k in sub.keys() - new.keys():
                del out[k]
            for k in [k for k in new if k not in sub]:  # the converter's order: a stable log
                out[k] = new[k]
                generated.append(k)
        started = set(own_start_keys(module, out, p))
        missing = [k for k in own if k not in out and k not in self_init and k not in started]
        if missing:
            incomplete[p] = missing
    if incomplete:
        lines = [
            f'  {p[:-1] or "<root>"}: missing {", ".join(k[len(p) :] for k in keys)}'
            for p, keys in sorted(incomplete.items())
        ]
        raise ValueError(
            f'{source}: {len(incomplete)} attention(s) have keys in the file but not all of their '
            f'tensors (an unconverted layout or a truncated file):\n' + abbreviate(lines, 12, '\n', '\n  ')
        )
    return out, generated


def adapt_pooled_attention(
    module: nn.Module,
    sd: Mapping[str, Tensor],
    neg_init: NegativeInit = NEGATIVE_INIT,
    source: str = 'checkpoint',
) -> tuple['OrderedDict[str, Tensor]', list[str]]:
    """:func:`adapt_attentions` for MViTv2's pooling form (keys relative to it), whose norm after
    each pooling removes any scale of a projection. Each extra head the module pools itself
    (:meth:`~.attention.AttentionBase.extra_heads` it computes by its own projection,
    :meth:`~.attention.AttentionBase.own_heads`) gets the pooling of the head whose place it
    takes (:func:`~dna_mm.converters.hosts.extra_pooling`: the convolution copied, the norm's
    affine scaled). For DnA from softmax weights the scales go on the pooled ``Q-`` / ``V-``
    (``q_neg_scale`` / ``v_neg_scale`` of ``neg_init``) and the projections are copied (scales
    1, ``α`` of ``neg_init``); from DnA weights of a variant without ``Q-`` / ``V-``, and for a
    member without DnA's negative branch, copies (exact). A module drops the pooling of an extra
    head it does not pool."""
    from_softmax = not any(k in sd for k in NEGATIVE_KEYS)
    scales = neg_init if from_softmax and module.has_negative_branch else EXACT_UPGRADE
    scale_of = dict(q=scales.q_neg_scale, v=scales.v_neg_scale)  # an extra key head: copied
    own = module.own_heads()
    heads = {h: (base, scale_of.get(base, 1.0)) for h, base in module.extra_heads().items() if h in own}
    pooled, pooling = extra_pooling(dict(sd), heads)
    copies = dataclasses.replace(neg_init, q_neg_scale=1.0, v_neg_scale=1.0)
    out, generated = adapt_attentions(module, pooled, copies, source=source)
    return out, generated + pooling
