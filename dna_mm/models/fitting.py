"""Fit a state dict's attentions to the attention classes of a built model: a DnA module
reading softmax weights gets its negative branch generated, a DnA module of more projections
reads a variant of fewer exactly, a module without a negative branch drops one. The backbones'
``pretrained`` loader, the ``dna_vit_*`` checkpoint filter and the attention swap's load hooks
all fit through :func:`adapt_attentions`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Collection, Mapping, Sequence

import torch
from torch import Tensor, nn

from ..converters.attention import dna_to_softmax, softmax_to_dna
from ..family import NEGATIVE_INIT, NEGATIVE_KEYS, NegativeInit
from .attention import AttentionBase, DiffAttention, DnAAttention


def abbreviate(items: Sequence[str], limit: int, sep: str = ', ', tail: str = ', ') -> str:
    """The first ``limit`` items joined by ``sep``, then ``{tail}... (K more)`` for the rest."""
    more = f'{tail}... ({len(items) - limit} more)' if len(items) > limit else ''
    return sep.join(items[:limit]) + more


def _upgrade_dna(sub: 'OrderedDict[str, Tensor]', p: str, module: DnAAttention) -> 'OrderedDict[str, Tensor]':
    """A DnA attention of a variant with fewer projections → ``module``'s variant, exactly:
    a variant without its own ``Q-`` (``V-``) uses ``Q+`` (``V+``), so ``q_neg = Q`` (``v_neg =
    V``); a variant without ``α`` has ``α = 1``."""
    out = OrderedDict(sub)
    for name in ('weight', 'bias'):
        qkv = out.get(p + 'qkv.' + name)
        if qkv is None:
            continue
        q, _, v = qkv.chunk(3, dim=0)
        if module.q_neg is not None and p + 'q_neg.' + name not in out:
            out[p + 'q_neg.' + name] = q.clone()
        if module.v_neg is not None and p + 'v_neg.' + name not in out:
            out[p + 'v_neg.' + name] = v.clone()
    if module.alpha is not None and p + 'alpha' not in out:
        out[p + 'alpha'] = torch.ones(module.num_heads, dtype=out[p + 'qkv.weight'].dtype)
    return out


def adapt_attentions(
    model: nn.Module,
    sd: Mapping[str, Tensor],
    neg_init: NegativeInit = NEGATIVE_INIT,
    source: str = 'checkpoint',
    self_init: Collection[str] = (),
) -> tuple['OrderedDict[str, Tensor]', list[str]]:
    """Fit every attention's keys in ``sd`` to the attention class in ``model``.

    * DnA target, softmax source: a negative branch is generated (:func:`softmax_to_dna`,
      with ``neg_init`` and the module's variant and heads);
    * DnA target, DnA source of a variant with fewer projections (``qpm_v`` into ``qpm_vpm``,
      say): the missing ones are filled exactly (``q_neg = Q``, ``v_neg = V``, ``α = 1``);
    * non-DnA target: a negative branch present in ``sd`` is dropped.

    Returns the new state dict and the keys it generated.

    Args:
        self_init: Keys of the model that keep their initialisation when ``sd`` lacks them.

    Raises:
        ValueError: ``sd`` has keys for one of the model's attentions but not all of that
            attention's tensors (an unconverted layout, a truncated file); the message names
            ``source`` and the missing keys. Parameters a Diff attention adds to a softmax one
            (``lambda_*``, ``sub_norm``) may be absent when the source has none of them, and
            the keys in ``self_init``.
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
        if p + 'qkv.weight' in out:
            # the attention's own tensors: 'qkv.weight', 'alpha', 'sub_norm.weight', ...
            sub = OrderedDict(
                (k, v) for k, v in out.items() if k.startswith(p) and k[len(p) :].count('.') <= 1
            )
            if not isinstance(module, DnAAttention):
                new = dna_to_softmax(sub, strict=False)
            elif any(p + k in sub for k in NEGATIVE_KEYS):
                new = _upgrade_dna(sub, p, module)
            else:
                scales = neg_init.q_neg_scale, neg_init.v_neg_scale
                new = softmax_to_dna(sub, *scales, module.variant, module.num_heads, strict=False)
            for k in sub.keys() - new.keys():
                del out[k]
            for k in [k for k in new if k not in sub]:  # the converter's order: a stable log
                out[k] = new[k]
                generated.append(k)
        missing = [k for k in own if k not in out and k not in self_init]
        if isinstance(module, DiffAttention) and not any(
            p + k in out for k in module.state_dict() if k.startswith(('lambda_', 'sub_norm.'))
        ):
            missing = [k for k in missing if not k[len(p) :].startswith(('lambda_', 'sub_norm.'))]
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
