"""State-dict converters between softmax attention, the authors' DnA layouts and dna_mm's.

dna_mm layout of one DnA attention (prefix ``P``): ``P.qkv`` = ``[Q+, K, V+]`` (``Linear(C, 3C)``,
timm's layout), ``P.q_neg`` = ``Q-``, ``P.v_neg`` = ``V-``, ``P.alpha [H]``, ``P.proj``. The same
keys serve :class:`~dna_mm.models.attention.DnAAttention` and its cross-attention form
:class:`~dna_mm.models.attention.DnACrossAttention`.

All functions keep key prefixes, leave unrelated keys untouched, never modify their input and
return a new ``OrderedDict``.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from typing import Mapping, Optional

import torch
from torch import Tensor

from ..errors import DataError
from ..family import (
    DNA_DEFAULT_VARIANT,
    DNA_VARIANTS,
    NEGATIVE_INIT,
    NEGATIVE_KEYS,
    NEGATIVE_MARKERS,
    NegativeInit,
    canonical_variant,
    check_combine,
)

StateDict = Mapping[str, Tensor]
_PARAMS = ('weight', 'bias')


class NothingToConvertError(DataError):
    """A conversion found no attention of the layouts it converts (the message names them)."""


def _nothing_to_convert(
    what: str, layouts: str, state_dict: StateDict, note: str = ''
) -> NothingToConvertError:
    return NothingToConvertError(
        f'no {what} to convert: looked for {layouts}; {note}the first keys are {list(state_dict)[:5]} '
        f'({len(state_dict)} in all)'
    )


#: the attention layouts each converter looks for (named in its error)
SOFTMAX_LAYOUTS = "timm's '<prefix>qkv.weight' and nn.MultiheadAttention's '<prefix>in_proj_weight'"
DNA_LAYOUTS = "dna_mm's '<prefix>alpha', '<prefix>q_neg.weight' or '<prefix>v_neg.weight'"
OFFICIAL_LAYOUTS = (
    "the authors' '<prefix>qqkvv.weight' (Q±V±), '<prefix>qqkv.weight' (Q±V), "
    "'<prefix>neg_scalers' (qkv + q_neg + v_neg, their TimeSformer) and VisCoP's "
    "'<prefix>q_pos_proj.weight'"
)


def _prefixes(sd: StateDict, suffix: str) -> list[str]:
    """Prefixes ``P`` (``''`` or ending in ``.``) of the keys ``P + suffix``."""
    return [k[: len(k) - len(suffix)] for k in sd if k == suffix or k.endswith('.' + suffix)]


def _rename_attention_keys(
    state_dict: StateDict, anchor: str, table: tuple[tuple[str, str], ...]
) -> 'OrderedDict[str, Tensor]':
    """Rename, next to every key ending in ``anchor``, the sibling keys per ``table``
    (``(old, new)``; an ``old`` ending in ``.`` renames a sub-module prefix)."""
    prefixes = set(_prefixes(state_dict, anchor))
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict.items():
        p = max((p for p in prefixes if key.startswith(p)), key=len, default=None)
        if p is not None:
            rest = key[len(p) :]
            for old, new in table:
                if rest == old or (old.endswith('.') and rest.startswith(old)):
                    key = p + new + rest[len(old) :]
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
    return _rename_attention_keys(state_dict, 'qkv.weight', tuple((new, old) for old, new in _MHA_TO_TIMM))


def negative_branch(
    state_dict: StateDict, prefix: str, variant: str, num_heads: int, init: NegativeInit = NEGATIVE_INIT
) -> 'OrderedDict[str, Tensor]':
    """The negative branch of the attention at ``prefix`` from its positive projections, for the
    tensors ``state_dict`` lacks (the one rule every loader, swap and converter applies)::

        q_neg = init.q_neg_scale · Q,   v_neg = init.v_neg_scale · V   (weights and biases)
        alpha = init.alpha                                            ([num_heads])

    where ``variant`` has them; ``Q`` / ``V`` are the rows of the packed ``qkv`` (``[Q, K, V]``)
    or the separate ``q_proj`` / ``v_proj`` (``nn.MultiheadAttention`` with ``kdim`` / ``vdim``).
    With :data:`~dna_mm.family.EXACT_UPGRADE` it completes a variant of fewer projections exactly.
    """
    sep_q, sep_v, learn_alpha = DNA_VARIANTS[canonical_variant(variant)]
    out = OrderedDict(state_dict)
    packed = prefix + 'qkv.weight' in out
    for name in _PARAMS:
        if packed:
            rows = out.get(f'{prefix}qkv.{name}')
            q, v = (None, None) if rows is None else rows.chunk(3, dim=0)[::2]  # [C, ...] each
        else:
            q, v = out.get(f'{prefix}q_proj.{name}'), out.get(f'{prefix}v_proj.{name}')
        for own, src, scale in (('q_neg', q, init.q_neg_scale), ('v_neg', v, init.v_neg_scale)):
            key = f'{prefix}{own}.{name}'
            if (sep_q if own == 'q_neg' else sep_v) and src is not None and key not in out:
                out[key] = src * scale
    if learn_alpha and prefix + 'alpha' not in out:
        like = out[prefix + ('qkv.weight' if packed else 'q_proj.weight')]
        out[prefix + 'alpha'] = torch.full((num_heads,), float(init.alpha), dtype=like.dtype)
    return out


def softmax_to_dna(
    state_dict: StateDict,
    q_neg_scale: float = NEGATIVE_INIT.q_neg_scale,
    v_neg_scale: float = NEGATIVE_INIT.v_neg_scale,
    variant: str = DNA_DEFAULT_VARIANT,
    num_heads: Optional[int] = None,
    alpha_init: float = NEGATIVE_INIT.alpha,
    *,
    strict: bool = True,
) -> 'OrderedDict[str, Tensor]':
    """Initialise DnA attentions from softmax ones (the paper's fine-tuning initialisation).

    Every attention found by a ``qkv.weight`` (timm layout) or ``in_proj_weight``
    (``nn.MultiheadAttention``, renamed to ``qkv`` / ``proj``) gets its negative branch by
    :func:`negative_branch`: where the variant has them, ``q_neg = q_neg_scale · Q`` and
    ``v_neg = v_neg_scale · V`` (weights and biases) and ``alpha = alpha_init`` per head.
    Attentions that already have a negative branch are kept.

    Args:
        state_dict: The softmax state dict (any key prefix).
        q_neg_scale: Scale of ``Q-`` relative to the pretrained ``Q`` (authors: ``+1e-4``).
        v_neg_scale: Scale of ``V-`` relative to the pretrained ``V`` (authors: ``-1e-4``).
        variant: DnA variant the result is for.
        num_heads: Heads per attention (length of ``alpha``); required when the variant has
            ``α`` (it cannot be read off the weights).
        alpha_init: Initial ``α`` (authors': :data:`~dna_mm.family.NEGATIVE_INIT`).
        strict: Refuse a state dict in which no softmax attention is found.

    Raises:
        ValueError: ``num_heads`` is missing for a variant with ``α``, or does not divide ``C``.
        NothingToConvertError: ``strict`` and no attention without a negative branch is found.
    """
    variant = canonical_variant(variant)
    learn_alpha = DNA_VARIANTS[variant][2]
    init = NegativeInit(q_neg_scale, v_neg_scale, alpha_init)
    out = rename_mha(state_dict)
    found = _prefixes(out, 'qkv.weight')
    softmax = [p for p in found if not any(p + k in out for k in NEGATIVE_MARKERS)]
    if strict and not softmax:
        note = f'the {len(found)} found already have a negative branch; ' if found else ''
        raise _nothing_to_convert('softmax attention', SOFTMAX_LAYOUTS, state_dict, note)
    for p in softmax:
        embed_dims = out[p + 'qkv.weight'].shape[1]
        if learn_alpha and num_heads is None:
            raise ValueError(
                f'softmax_to_dna: num_heads is required to create {p}alpha (one α '
                f'per head; the weights do not tell the head count)'
            )
        heads = num_heads or 1
        if embed_dims % heads:
            raise ValueError(f'{p}qkv.weight: width {embed_dims} is not divisible by num_heads={heads}')
        out = negative_branch(out, p, variant, heads, init)
    return out


def dna_to_softmax(
    state_dict: StateDict, layout: str = 'timm', *, strict: bool = True
) -> 'OrderedDict[str, Tensor]':
    """Drop the negative branch (``q_neg``, ``v_neg``, ``alpha``) of every DnA attention.

    Args:
        layout: ``'timm'`` (``qkv`` / ``proj`` keys) or ``'mha'`` (``nn.MultiheadAttention``'s
            ``in_proj_*`` / ``out_proj``, e.g. for a stock MMAction2 TimeSformer).
        strict: Refuse a state dict without any DnA attention.

    Raises:
        NothingToConvertError: ``strict`` and no DnA attention is found.
    """
    if layout not in ('timm', 'mha'):
        raise ValueError(f"layout must be 'timm' or 'mha', got {layout!r}")
    dna = {p for suffix in NEGATIVE_MARKERS for p in _prefixes(state_dict, suffix)}
    if strict and not dna:
        note = (
            "(the authors' files: official-to-dna-mm first); " if has_official_attention(state_dict) else ''
        )
        raise _nothing_to_convert('DnA attention', DNA_LAYOUTS, state_dict, note)
    drop = {p + s for p in dna for s in NEGATIVE_KEYS}
    out = OrderedDict((k, v) for k, v in state_dict.items() if k not in drop)
    return _to_mha(out) if layout == 'mha' else out


_OFFICIAL_ALPHA = 'neg_scalers'
#: VisCoP's DnA cross-attention (viscop/viscop/model/viscop_vision_encoder/
#: modeling_viscop_vision_encoder.py): one ``Linear(C, C)`` with bias per projection; the
#: first three become the rows ``[Q+, K, V+]`` of ``qkv``, the others are renamed
_VISCOP_QKV = ('q_pos_proj', 'k_proj', 'v_pos_proj')
_VISCOP_RENAME = (('q_neg_proj', 'q_neg'), ('v_neg_proj', 'v_neg'), ('out_proj', 'proj'))
_VISCOP_NAMES = _VISCOP_QKV + tuple(old for old, _ in _VISCOP_RENAME)
_VISCOP_KEY = re.compile(r'(.*\.)?(?:' + '|'.join(_VISCOP_NAMES) + r')\.(?:weight|bias)')


def _viscop_attention(state_dict: StateDict, p: str) -> 'OrderedDict[str, Tensor]':
    """One VisCoP DnA attention at prefix ``p`` → dna_mm keys (all but ``neg_scalers``):
    ``qkv = cat[q_pos_proj, k_proj, v_pos_proj]`` (rows), ``q_neg``, ``v_neg``, ``proj``.

    Raises:
        ValueError: a projection's weight is missing, or only some of ``Q+, K, V+`` have a bias.
    """
    missing = [f'{n}.weight' for n in _VISCOP_NAMES if f'{p}{n}.weight' not in state_dict]
    if missing:
        raise ValueError(f"VisCoP DnA attention '{p[:-1] or '<root>'}': missing {', '.join(missing)}")
    out: OrderedDict[str, Tensor] = OrderedDict()
    for name in _PARAMS:
        rows = [state_dict.get(f'{p}{n}.{name}') for n in _VISCOP_QKV]  # Q+, K, V+: [C, ...] each
        if all(r is not None for r in rows):
            out[f'{p}qkv.{name}'] = torch.cat(rows, dim=0)  # type: ignore[arg-type]  # [3C, ...]
        elif any(r is not None for r in rows):
            raise ValueError(
                f"VisCoP DnA attention '{p[:-1] or '<root>'}': {name} on only some of {_VISCOP_QKV}"
            )
        for old, new in _VISCOP_RENAME:
            if f'{p}{old}.{name}' in state_dict:
                out[f'{p}{new}.{name}'] = state_dict[f'{p}{old}.{name}']
    return out


def has_official_attention(state_dict: StateDict) -> bool:
    """Whether ``state_dict`` holds an attention in one of the authors' layouts
    (:data:`OFFICIAL_LAYOUTS`)."""
    suffixes = ('qqkvv.weight', 'qqkv.weight', _OFFICIAL_ALPHA, 'q_pos_proj.weight')
    return any(k in suffixes or k.endswith(tuple('.' + s for s in suffixes)) for k in state_dict)


def official_to_dna_mm(
    state_dict: StateDict, combine: str = 'add', *, strict: bool = True
) -> 'OrderedDict[str, Tensor]':
    """The authors' DnA checkpoints (github rjccv/DnA) → dna_mm keys, mapped by meaning.

    * Q±V± layout: ``P.qqkvv`` = ``Linear(C, 5C)`` with chunks ``[Q+, Q-, K, V+, V-]`` →
      ``P.qkv = [Q+, K, V+]``, ``P.q_neg = Q-``, ``P.v_neg = V-``.
    * Q±V layout (shared values): ``P.qqkv`` = ``Linear(C, 4C)`` with chunks
      ``[Q+, Q-, K, V]`` → ``P.qkv = [Q+, K, V]``, ``P.q_neg = Q-`` (the ``qpm_v`` variant).
    * TimeSformer / older ViT layout: ``P.qkv = [Q+, K, V+]``, ``P.q_neg``, ``P.v_neg``: kept.
    * VisCoP layout (their video-LLM's DnA probe cross-attention, a ``P`` such as
      ``model.vision_encoder.vision_encoder.encoder.interaction_modules.{i}.``): one
      ``Linear(C, C)`` each for ``P.q_pos_proj``, ``P.q_neg_proj``, ``P.k_proj``,
      ``P.v_pos_proj``, ``P.v_neg_proj``, ``P.out_proj`` → ``P.qkv = cat[q_pos_proj, k_proj,
      v_pos_proj]``, ``P.q_neg``, ``P.v_neg``, ``P.proj``. Their forward (queries from the
      probes, ``K, V±`` from the patch tokens, scale ``d ** -0.5``, no rotary embedding) is
      ``softmax(s Q+ K^T) V+ − α softmin(s Q- K^T) V-``, i.e.
      :class:`~dna_mm.models.attention.DnACrossAttention` after the conversion (per packed
      sequence). Only these attentions are converted: the rest of a VisCoP file (its SigLIP
      encoder with 2-D rotary positions, the probes, the LLM) is passed through unchanged.
    * All: ``P.neg_scalers`` (any shape with ``H`` elements) → ``P.alpha [H]``.
    * A ViT ``pos_embed`` without a CLS row (``[1, N, C]``, ``N`` a square, next to a
      ``cls_token``: the authors' ``vit/dna_models.py`` gives the CLS token no position) gets a
      zero CLS row, the exact equivalent (:func:`pos_embed_with_cls`).

    Args:
        state_dict: The authors' state dict (any key prefix).
        combine: How the file's code combines the branches: ``'add'`` (``pos + α·neg``, dna_mm's
            form; kept) or ``'sub'`` (``pos − α·neg``; converted exactly by negating α). Their
            files use both under the same key names (:data:`~dna_mm.family.COMBINE_SIGNS`); the VisCoP layout
            only ``'sub'``.
        strict: Refuse a state dict with no attention in the authors' layouts (the loaders,
            which read any checkpoint, pass ``False``: the others pass through unchanged).

    Raises:
        ValueError: ``combine`` is neither; a VisCoP attention with ``combine='add'`` or with a
            projection missing; a fused ``qqkvv`` / ``qqkv`` whose rows are not ``5C`` / ``4C``.
        NothingToConvertError: ``strict`` and no attention in the authors' layouts is found.

    (The authors' own ViT module builds ``qqkvv`` from the second layout by concatenating
    ``[qkv, q_neg, v_neg]``, which puts ``K`` in the ``Q-`` slot; this converter does not.)
    """
    check_combine(combine, 'combine')
    if strict and not has_official_attention(state_dict):
        dna = _prefixes(state_dict, 'alpha') or _prefixes(state_dict, 'q_neg.weight')
        note = "the file already has dna_mm's keys (alpha / q_neg); " if dna else ''
        raise _nothing_to_convert("attention in the authors' layouts", OFFICIAL_LAYOUTS, state_dict, note)
    sign = 1.0 if combine == 'add' else -1.0
    viscop = set(_prefixes(state_dict, 'q_pos_proj.weight'))
    if viscop and combine != 'sub':
        raise ValueError(
            f"{len(viscop)} VisCoP DnA attention(s) (q_pos_proj / ... keys, e.g. "
            f"'{min(viscop)[:-1] or '<root>'}'): their code computes pos − α·neg; pass combine='sub'"
        )
    out: OrderedDict[str, Tensor] = OrderedDict()
    for key, value in state_dict.items():
        m = _VISCOP_KEY.fullmatch(key)
        if m and (m.group(1) or '') in viscop:
            p = m.group(1) or ''
            if p + 'qkv.weight' not in out:  # the first of its keys: emit the whole attention
                out.update(_viscop_attention(state_dict, p))
            continue
        m = re.fullmatch(r'(.*?)(qqkvv|qqkv)\.(weight|bias)', key)
        if m:
            p, kind, name = m.groups()
            n = 5 if kind == 'qqkvv' else 4
            if value.shape[0] % n:
                raise ValueError(f'{key}: first dim {value.shape[0]} is not {n}·C')
            if kind == 'qqkvv':
                q_pos, q_neg, k, v_pos, v_neg = value.chunk(5, dim=0)
                out[f'{p}v_neg.{name}'] = v_neg.clone()
            else:
                q_pos, q_neg, k, v_pos = value.chunk(4, dim=0)
            out[f'{p}qkv.{name}'] = torch.cat([q_pos, k, v_pos], dim=0)
            out[f'{p}q_neg.{name}'] = q_neg.clone()
        elif key == _OFFICIAL_ALPHA or key.endswith('.' + _OFFICIAL_ALPHA):
            out[key[: len(key) - len(_OFFICIAL_ALPHA)] + 'alpha'] = sign * value.reshape(-1)
        else:
            out[key] = value
    return pos_embed_with_cls(out)


def pos_embed_with_cls(state_dict: StateDict) -> 'OrderedDict[str, Tensor]':
    """Give a ``pos_embed`` of ``[1, N, C]`` with ``N`` a square (no CLS position) a zero CLS row
    ``[1, 1 + N, C]`` when the same prefix has a ``cls_token`` (adding zero to the CLS token is
    what giving it no position does). Other state dicts are returned unchanged (a copy)."""
    out = OrderedDict(state_dict)
    for p in _prefixes(out, 'pos_embed'):
        pos = out[p + 'pos_embed']
        if p + 'cls_token' not in out or pos.dim() != 3:
            continue
        n = pos.shape[1]
        if int(math.isqrt(n)) ** 2 == n and n > 1:
            out[p + 'pos_embed'] = torch.cat([pos.new_zeros(1, 1, pos.shape[2]), pos], dim=1)
    return out
