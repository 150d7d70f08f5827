"""State-dict converters between softmax attention, the authors' DnA layouts and dna_mm's.

dna_mm layout of one DnA attention (prefix ``P``): ``P.qkv`` = ``[Q+, K, V+]`` (``Linear(C, 3C)``,
timm's layout), ``P.q_neg`` = ``Q-``, ``P.v_neg`` = ``V-``, ``P.alpha [H]``, ``P.proj``.

All functions keep key prefixes, leave unrelated keys untouched, never modify their input and
return a new ``OrderedDict``.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Mapping, Optional

import torch
from torch import Tensor, nn

from ..models.attention.dna import DNA_VARIANTS, DnAAttention, canonical_variant

StateDict = Mapping[str, Tensor]
_PARAMS = ('weight', 'bias')


def _prefixes(sd: StateDict, suffix: str) -> list[str]:
    """Prefixes ``P`` (``''`` or ending in ``.``) of the keys ``P + suffix``."""
    return [k[: len(k) - len(suffix)] for k in sd if k == suffix or k.endswith('.' + suffix)]


def _rename_attention_keys(state_dict: StateDict, anchor: str,
                           table: tuple[tuple[str, str], ...]) -> 'OrderedDict[str, Tensor]':
    """Rename, next to every key ending in ``anchor``, the sibling keys per ``table``
    (``(old, new)``; an ``old`` ending in ``.`` renames a sub-module prefix)."""
    prefixes = set(_prefixes(state_dict, anchor))
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict.items():
        p = max((p for p in prefixes if key.startswith(p)), key=len, default=None)
        if p is not None:
            rest = key[len(p):]
            for old, new in table:
                if rest == old or (old.endswith('.') and rest.startswith(old)):
                    key = p + new + rest[len(old):]
                    break
        out[key] = value
    return out


_MHA_TO_TIMM = (('in_proj_weight', 'qkv.weight'), ('in_proj_bias', 'qkv.bias'), ('out_proj.', 'proj.'))


def rename_mha(state_dict: StateDict) -> 'OrderedDict[str, Tensor]':
    """``nn.MultiheadAttention`` keys → timm-style: ``in_proj_weight/bias`` → ``qkv.weight/bias``,
    ``out_proj.*`` → ``proj.*`` (only next to an ``in_proj_weight``)."""
    return _rename_attention_keys(state_dict, 'in_proj_weight', _MHA_TO_TIMM)


def _to_mha(state_dict: StateDict) -> 'OrderedDict[str, Tensor]':
    """Inverse of :func:`rename_mha` for the attentions found by their ``qkv.weight``."""
    return _rename_attention_keys(state_dict, 'qkv.weight',
                                  tuple((new, old) for old, new in _MHA_TO_TIMM))


def softmax_to_dna(state_dict: StateDict,
                   q_neg_scale: float = 1e-4,
                   v_neg_scale: float = -1e-4,
                   variant: str = 'qpm_vpm',
                   num_heads: Optional[int] = None,
                   alpha_init: float = 0.5) -> 'OrderedDict[str, Tensor]':
    """Initialise DnA attentions from softmax ones (SPEC §1).

    Every attention found by a ``qkv.weight`` (timm layout) or ``in_proj_weight``
    (``nn.MultiheadAttention``, renamed to ``qkv`` / ``proj``) gets, where the variant has them,
    ``q_neg = q_neg_scale · Q`` and ``v_neg = v_neg_scale · V`` (weights and biases) and
    ``alpha = alpha_init`` per head. Attentions that already have a negative branch are kept.

    Args:
        state_dict: The softmax state dict (any key prefix).
        q_neg_scale: Scale of ``Q-`` relative to the pretrained ``Q`` (authors: ``+1e-4``).
        v_neg_scale: Scale of ``V-`` relative to the pretrained ``V`` (authors: ``-1e-4``).
        variant: DnA variant the result is for.
        num_heads: Heads per attention (length of ``alpha``); default ``C // 64``, the head
            width of every ViT / TimeSformer size.
        alpha_init: Initial ``α``.
    """
    variant = canonical_variant(variant)
    sep_q, sep_v, learn_alpha = DNA_VARIANTS[variant]
    out = rename_mha(state_dict)
    for p in _prefixes(out, 'qkv.weight'):
        if p + 'alpha' in out or p + 'q_neg.weight' in out or p + 'v_neg.weight' in out:
            continue
        embed_dims = out[p + 'qkv.weight'].shape[1]
        heads = num_heads or max(embed_dims // 64, 1)
        if embed_dims % heads:
            raise ValueError(f'{p}qkv.weight: width {embed_dims} is not divisible by '
                             f'num_heads={heads}')
        for name in _PARAMS:
            if p + 'qkv.' + name not in out:
                continue
            q, _, v = out[p + 'qkv.' + name].chunk(3, dim=0)
            if sep_q:
                out[p + 'q_neg.' + name] = q * q_neg_scale
            if sep_v:
                out[p + 'v_neg.' + name] = v * v_neg_scale
        if learn_alpha:
            out[p + 'alpha'] = torch.full((heads,), float(alpha_init),
                                          dtype=out[p + 'qkv.weight'].dtype)
    return out


def dna_to_softmax(state_dict: StateDict, layout: str = 'timm') -> 'OrderedDict[str, Tensor]':
    """Drop the negative branch (``q_neg``, ``v_neg``, ``alpha``) of every DnA attention.

    Args:
        layout: ``'timm'`` (``qkv`` / ``proj`` keys) or ``'mha'`` (``nn.MultiheadAttention``'s
            ``in_proj_*`` / ``out_proj``, e.g. for a stock MMAction2 TimeSformer).
    """
    if layout not in ('timm', 'mha'):
        raise ValueError(f"layout must be 'timm' or 'mha', got {layout!r}")
    dna = {p for suffix in ('alpha', 'q_neg.weight', 'v_neg.weight') for p in _prefixes(state_dict, suffix)}
    drop = {p + s for p in dna for s in ('alpha', 'q_neg.weight', 'q_neg.bias', 'v_neg.weight', 'v_neg.bias')}
    out = OrderedDict((k, v) for k, v in state_dict.items() if k not in drop)
    return _to_mha(out) if layout == 'mha' else out


_OFFICIAL_ALPHA = 'neg_scalers'


def official_to_dna_mm(state_dict: StateDict) -> 'OrderedDict[str, Tensor]':
    """The authors' DnA checkpoints (github rjccv/DnA) → dna_mm keys, mapped by meaning.

    * ViT layout: ``P.qqkvv`` = ``Linear(C, 5C)`` with chunks ``[Q+, Q-, K, V+, V-]`` →
      ``P.qkv = [Q+, K, V+]``, ``P.q_neg = Q-``, ``P.v_neg = V-``.
    * TimeSformer / older ViT layout: ``P.qkv = [Q+, K, V+]``, ``P.q_neg``, ``P.v_neg``: kept.
    * Both: ``P.neg_scalers`` (any shape with ``H`` elements) → ``P.alpha [H]``.

    (The authors' own ViT module builds ``qqkvv`` from the second layout by concatenating
    ``[qkv, q_neg, v_neg]``, which puts ``K`` in the ``Q-`` slot; this converter does not.)
    """
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict.items():
        m = re.fullmatch(r'(.*?)qqkvv\.(weight|bias)', key)
        if m:
            p, name = m.groups()
            if value.shape[0] % 5:
                raise ValueError(f'{key}: first dim {value.shape[0]} is not 5·C')
            q_pos, q_neg, k, v_pos, v_neg = value.chunk(5, dim=0)
            out[f'{p}qkv.{name}'] = torch.cat([q_pos, k, v_pos], dim=0)
            out[f'{p}q_neg.{name}'] = q_neg.clone()
            out[f'{p}v_neg.{name}'] = v_neg.clone()
        elif key == _OFFICIAL_ALPHA or key.endswith('.' + _OFFICIAL_ALPHA):
            out[key[: len(key) - len(_OFFICIAL_ALPHA)] + 'alpha'] = value.reshape(-1).clone()
        else:
            out[key] = value
    return out


def adapt_attentions(model: nn.Module, sd: 'OrderedDict[str, Tensor]', q_neg_scale: float = 1e-4,
                     v_neg_scale: float = -1e-4) -> tuple['OrderedDict[str, Tensor]', list[str]]:
    """Fit every attention's keys in ``sd`` to the attention class in ``model``.

    DnA targets without a negative branch in ``sd`` get one (:func:`softmax_to_dna`, with the
    module's variant and heads); non-DnA targets drop a negative branch present in ``sd``.
    Returns the new state dict and the keys it generated.
    """
    out = OrderedDict(sd)
    generated: list[str] = []
    for name, module in model.named_modules():
        p = f'{name}.' if name else ''
        if not hasattr(module, 'qkv') or p + 'qkv.weight' not in out:
            continue
        # the attention's own tensors: 'qkv.weight', 'alpha', 'sub_norm.weight', ...
        sub = OrderedDict((k, v) for k, v in out.items()
                          if k.startswith(p) and k[len(p):].count('.') <= 1)
        if isinstance(module, DnAAttention):
            new = softmax_to_dna(sub, q_neg_scale, v_neg_scale, module.variant, module.num_heads)
        else:
            new = dna_to_softmax(sub)
        for k in set(sub) - set(new):
            del out[k]
        for k in set(new) - set(sub):
            out[k] = new[k]
            generated.append(k)
    return out, generated
