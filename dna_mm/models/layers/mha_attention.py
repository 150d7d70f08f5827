"""``torch.nn.MultiheadAttention``'s call for any member of the family (:class:`MultiheadForm`).

The member keeps its class, parameters and names (``qkv``, ``proj``, and for DnA ``q_neg``,
``v_neg``, ``alpha``) and answers ``nn.MultiheadAttention``'s call, so a host that
calls ``self.attn(q, k, v, ...)`` runs unchanged (torchvision's ``vit_*`` ``EncoderBlock``, the
CLIP-style ``ResidualAttentionBlock`` of MMAction2's UniFormerV2, OpenAI CLIP and OpenCLIP,
``nn.TransformerEncoderLayer``)::

    out, weights = attn(query, key, value, key_padding_mask=None, need_weights=True,
                        attn_mask=None, average_attn_weights=True, is_causal=False)

* Layout: ``[L, N, E]`` tokens (``batch_first=False``, the default) or ``[N, L, E]``, or one
  unbatched ``[L, E]`` sequence, as the host.
* Self-attention when ``key`` and ``value`` are ``query`` (the same tensor), cross-attention
  otherwise: ``Q±`` from ``query``, ``K`` from ``key``, ``V±`` from ``value``.
* Masks (:func:`mha_masks`): ``attn_mask`` ``[L, S]`` or
  ``[N·H, L, S]`` and ``key_padding_mask`` ``[N, S]``, ``bool`` (True = not allowed) or float
  (added), are **exclusion masks** (dna_mm's rule, :mod:`dna_mm.models.attention.functional`):
  added unchanged to every branch's logits after the softmin sign, so a masked key leaves both
  DnA branches and the positive branch keeps the additive meaning the host gives a float mask.
  ``is_causal`` is, as for the host, a hint that ``attn_mask`` is the causal mask: ``attn_mask``
  decides, and ``is_causal`` without it is the host's error.
* ``need_weights=True`` (the host's default) takes the eager route and returns the positive
  (softmax) map ``[N, L, S]`` (the host's map, for DnA and Diff the first branch's; softmax and
  Cog have one), averaged over the heads unless ``average_attn_weights=False`` (``[N, H, L, S]``);
  the host returns its map after attention dropout, this one before it (equal in eval). Both
  DnA maps: :meth:`AttentionBase.forward` with ``return_attn=True`` on ``[N, L, E]`` tokens.
  ``need_weights=False`` takes the fused route (the family's SDPA calls, in place of the host's
  own fused ``_native_multi_head_attention`` path) and returns ``(out, None)``.

Keys: ``nn.MultiheadAttention``'s ``in_proj_weight`` / ``in_proj_bias`` are ``qkv.weight`` /
``qkv.bias`` (rows ``[Q, K, V]`` in both), ``out_proj.*`` is ``proj.*``
(:func:`dna_mm.converters.rename_mha`). A host with ``kdim`` / ``vdim`` other than ``E`` has
separate ``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` (and the packed
``in_proj_bias``): they are the member's ``q_proj``, ``k_proj``, ``v_proj`` (its ``kdim`` /
``vdim``). :func:`from_host` builds the form of a host module.
"""

from __future__ import annotations

import functools
import operator
from typing import Optional

import torch
from torch import Tensor, nn

from ..attention import AttentionBase, build_attention
from ..attention.base import check_inputs
from ..attention.builder import AttnCfg
from ..attention.functional import additive_mask
from .forms import HostForm, refuse


def mha_masks(
    attn_mask: Optional[Tensor],
    key_padding_mask: Optional[Tensor],
    batch: int,
    num_heads: int,
    dtype: torch.dtype,
) -> Optional[Tensor]:
    """``nn.MultiheadAttention``'s two masks → one exclusion mask broadcastable to
    ``[B, H, M, N]`` (``bool``: True = attend, or an additive float).

    ``attn_mask``: ``[M, N]`` or ``[B·H, M, N]``, ``bool`` True = masked out, float added;
    ``key_padding_mask``: ``[B, N]``, ``bool`` True = ignore, float added.
    """
    if attn_mask is not None and attn_mask.dim() == 3:  # [B·H, M, N] -> [B, H, M, N]
        attn_mask = attn_mask.reshape(batch, num_heads, *attn_mask.shape[-2:])
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask[:, None, None, :]  # [B, 1, 1, N]
    masks = [
        ~m.bool() if m.dtype in (torch.bool, torch.uint8) else m  # bool: True = attend
        for m in (attn_mask, key_padding_mask)
        if m is not None
    ]
    if not masks:
        return None
    if all(m.dtype == torch.bool for m in masks):
        return functools.reduce(operator.and_, masks)
    return functools.reduce(operator.add, (additive_mask(m, dtype).to(dtype) for m in masks))


class MultiheadForm(HostForm):
    """``nn.MultiheadAttention``'s call and layout on a member.

    Args:
        batch_first: ``[N, L, E]`` tokens (True) or ``[L, N, E]`` (False, the host's default);
            the member's ``batch_first`` attribute from then on, as the host's.
        returns_weights: False for a module that calls its ``nn.MultiheadAttention`` with
            ``need_weights=True`` (the default) and drops the weights (mmcv's
            ``MultiheadAttention`` and MMAction2's divided space-time steps take ``[0]``): the
            call then takes the fused route and returns ``(out, None)`` whatever it asks.

    :meth:`attach` also gives the member the host's attributes that callers read:
    ``embed_dim``, ``batch_first``, ``dropout``, ``_qkv_same_embed_dim``, and
    ``in_proj_weight`` / ``in_proj_bias`` set to ``None`` (as on a host without packed
    projections): ``nn.TransformerEncoderLayer`` reads them to pick its fused path, and ``None``
    sends it to the path that calls the member. The weights are in ``qkv`` (or ``q_proj``,
    ``k_proj``, ``v_proj``) and ``proj``.
    """

    host = 'nn.MultiheadAttention'

    def __init__(self, batch_first: bool = False, returns_weights: bool = True) -> None:
        self.batch_first = batch_first
        self.returns_weights = returns_weights

    def attach(self, member: nn.Module) -> AttentionBase:
        member = super().attach(member)
        member.batch_first = self.batch_first
        member.embed_dim, member.dropout = member.embed_dims, member.attn_drop_p
        member._qkv_same_embed_dim = member.packed_projections
        member.in_proj_weight = member.in_proj_bias = None
        return member

    def describe(self, member: AttentionBase) -> str:
        dims = '' if member.packed_projections else f', kdim={member.kdim}, vdim={member.vdim}'
        weights = '' if self.returns_weights else ', returns_weights=False'
        return f'{super().describe(member)}, batch_first={member.batch_first}{dims}{weights}'

    def __call__(
        self,
        member: AttentionBase,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = True,
        attn_mask: Optional[Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """``query [L, N, E]``, ``key [S, N, kdim]``, ``value [S, N, vdim]`` (``[N, ·, ·]`` when
        ``batch_first``, ``[·, ·]`` unbatched) → ``(out, weights or None)``, ``out`` shaped as
        ``query``."""
        name = type(member).__name__
        need_weights = need_weights and self.returns_weights
        if is_causal and attn_mask is None:
            raise RuntimeError(f'{name}: is_causal=True needs attn_mask (as nn.MultiheadAttention)')
        self_attn = key is query and value is query
        values_are_keys = value is key
        unbatched = query.dim() == 2
        if unbatched:  # [L, E] -> [1, L, E]
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not member.batch_first:  # [L, N, E] -> [N, L, E] (the member's attribute, as the host's)
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if not member.packed_projections:
            _check_widths(name, (member.embed_dims, member.kdim, member.vdim), query, key, value)
        context = None if self_attn else key
        value = None if self_attn or values_are_keys else value
        if member.packed_projections:
            check_inputs(name, member.embed_dims, query, context, value)
        mask = mha_masks(attn_mask, key_padding_mask, query.shape[0], member.num_heads, query.dtype)
        heads = member.project(query, context, value)
        out, maps = member.run_attend(heads, mask, None, need_weights or not member.fused_attn)
        out = member.project_out(member.merge_heads(out), query)  # [N, L, E]
        weights = None
        if need_weights:
            weights = maps['attn'] if 'attn' in maps else maps['pos']  # [N, H, L, S]
            weights = weights.mean(dim=1) if average_attn_weights else weights
            weights = weights.squeeze(0) if unbatched else weights
        if unbatched:
            out = out.squeeze(0)
        elif not member.batch_first:
            out = out.transpose(0, 1)
        return out, weights


def _check_widths(name: str, widths: tuple[int, int, int], query: Tensor, key: Tensor, value: Tensor) -> None:
    """A ``ValueError`` naming the shapes unless ``query [N, L, E]``, ``key [N, S, kdim]`` and
    ``value [N, S, vdim]`` (``widths = (E, kdim, vdim)``)."""
    for label, t, width in zip(('query', 'key', 'value'), (query, key, value), widths, strict=True):
        if t.dim() != 3 or t.shape[-1] != width or t.shape[0] != query.shape[0]:
            raise ValueError(f'{name}: expected {label} of width {width}, got {list(t.shape)} (batch first)')
    if key.shape[1] != value.shape[1]:
        raise ValueError(f'{name}: value has {value.shape[1]} tokens, keys have {key.shape[1]}')


def form_of(
    mha: nn.Module,
    attn_cfg: AttnCfg,
    layer_index: int,
    num_layers: int,
    owner: nn.Module,
    returns_weights: bool = True,
) -> nn.Module:
    """The form of the ``nn.MultiheadAttention`` ``mha``: its sizes (``kdim`` / ``vdim``
    included), biases, dropout and layout; ``owner`` (the module swapped, ``mha`` or a block
    holding it) is named in a refusal of ``add_bias_kv`` / ``add_zero_attn``;
    ``returns_weights``: as :class:`MultiheadForm`'s."""
    if mha.bias_k is not None or mha.add_zero_attn:
        what = '' if owner is mha else 'its nn.MultiheadAttention with '
        refuse(owner, f'{what}add_bias_kv=True or add_zero_attn=True')
    member = build_attention(
        attn_cfg,
        mha.embed_dim,
        mha.num_heads,
        layer_index,
        num_layers,
        qkv_bias=mha.in_proj_bias is not None,
        proj_bias=mha.out_proj.bias is not None,
        attn_drop=mha.dropout,
        kdim=mha.kdim,
        vdim=mha.vdim,
    )
    return MultiheadForm(mha.batch_first, returns_weights).attach(member)


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of torch's ``nn.MultiheadAttention`` ``host`` (:func:`form_of`)."""
    return form_of(host, attn_cfg, layer_index, num_layers, host)
