"""ViTDet's attention for every member of the family: ``[B, H, W, C]`` in and out, optional
decomposed relative positions.

Each class is the family module itself (same parameters, same names: ``qkv``, ``proj``, and for
DnA ``q_neg``, ``v_neg``, ``alpha``) plus ``rel_pos_h`` / ``rel_pos_w`` ``[2·S − 1, d]`` when
``use_rel_pos`` (``S``: the grid side, or the window side in window blocks), so a block's keys are
``blocks.{i}.attn.{qkv,proj,q_neg,v_neg,alpha,rel_pos_h,rel_pos_w}``.

With relative positions each branch adds the decomposed bias of its own unscaled queries
(:func:`~dna_mm.models.layers.positions.decomposed_rel_pos`, tables shared):

=========  ==============================================================================
softmax    ``softmax(s Q Kᵀ + R(Q)) V`` (detectron2 / MMDetection ViTDet's ``Attention``)
DnA        ``softmax(s Q+ Kᵀ + R(Q+)) V+ + α softmin(s Q- Kᵀ + R(Q-)) V-``
=========  ==============================================================================

passed to the family's ``core`` as ``attn_bias`` (``(R(Q+), R(Q-))`` for DnA), so the fast path
is the family's SDPA path with the bias as SDPA's ``attn_mask`` (no map beyond the bias) and
``return_attn=True`` the eager one. Differential and Cog attention with relative positions are
not defined by the DnA paper: :func:`build_vitdet_attention` refuses them.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor, nn

from ..attention import (
    AttentionBase,
    CogAttention,
    DiffAttention,
    DnAAttention,
    SoftmaxAttention,
    attention_cfg,
)
from ..attention.functional import BiasArg
from .positions import decomposed_rel_pos

AttnCfg = Union[str, dict]


class ViTDetAttentionMixin(AttentionBase):
    """Grid-shaped forward and relative positions for a family attention class (mixed in
    before it: ``class ViTDetDnAAttention(ViTDetAttentionMixin, DnAAttention)``).

    Args (keyword-only, beside the family class's own):
        use_rel_pos: Add decomposed relative positions.
        rel_pos_zero_init: Zero tables (detectron2's default); else truncated normal, std 0.02.
        input_size: Grid ``(h, w)`` the tables are made for (required with ``use_rel_pos``).
    """

    supports_rel_pos = True

    def __init__(
        self,
        *args,
        use_rel_pos: bool = False,
        rel_pos_zero_init: bool = True,
        input_size: Optional[tuple[int, int]] = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        name = type(self).__name__
        self.use_rel_pos = use_rel_pos
        if not use_rel_pos:
            return
        if not self.supports_rel_pos:
            raise ValueError(
                f'{name}: relative positions (use_rel_pos=True) are not defined for '
                f'this attention; use attn_cfg softmax or dna, or use_rel_pos=False'
            )
        if input_size is None or len(input_size) != 2 or min(input_size) <= 0:
            raise ValueError(f'{name}: use_rel_pos=True needs input_size=(h, w), got {input_size}')
        h, w = input_size
        dd = self.factory_kwargs
        self.rel_pos_h = nn.Parameter(torch.zeros(2 * h - 1, self.head_dim, **dd))
        self.rel_pos_w = nn.Parameter(torch.zeros(2 * w - 1, self.head_dim, **dd))
        if not rel_pos_zero_init:
            nn.init.trunc_normal_(self.rel_pos_h, std=0.02)
            nn.init.trunc_normal_(self.rel_pos_w, std=0.02)

    def rel_pos_bias(self, heads: dict[str, Tensor], hw: tuple[int, int]) -> BiasArg:
        """``R(Q)`` ``[B, H, N, N]``, or ``(R(Q+), R(Q-))`` for heads with a ``q_neg``."""
        bias = decomposed_rel_pos(heads['q'], self.rel_pos_h, self.rel_pos_w, hw, hw)
        q_neg = heads.get('q_neg')
        if q_neg is None:
            return bias
        if q_neg is heads['q']:  # no separate Q- (variants apm, apm_alpha, q_vpm)
            return bias, bias
        return bias, decomposed_rel_pos(q_neg, self.rel_pos_h, self.rel_pos_w, hw, hw)

    def forward(
        self, x: Tensor, return_attn: bool = False
    ) -> Union[Tensor, tuple[Tensor, dict[str, Tensor]]]:
        """``x [B, H, W, C]`` → ``[B, H, W, C]`` (and the maps ``[B, heads, HW, HW]`` with
        ``return_attn``)."""
        b, h, w, c = x.shape
        tokens = x.reshape(b, h * w, c)
        if not self.use_rel_pos:
            result = super().forward(tokens, return_attn=return_attn)
            out, maps = result if return_attn else (result, {})
        else:
            heads = self.project(tokens)  # each [B, heads, HW, d]
            out, maps = self.core(
                **heads, attn_bias=self.rel_pos_bias(heads, (h, w)), return_attn=return_attn
            )
            out = self.proj_drop(self.proj(self.merge_heads(out)))
        out = out.reshape(b, h, w, c)
        return (out, maps) if return_attn else out

    def extra_repr(self) -> str:
        rel = f', rel_pos={tuple(self.rel_pos_h.shape)}' if self.use_rel_pos else ''
        return super().extra_repr() + rel


class ViTDetSoftmaxAttention(ViTDetAttentionMixin, SoftmaxAttention):
    """Softmax attention on a ``[B, H, W, C]`` grid (MMDetection / detectron2 ViTDet's)."""


class ViTDetDnAAttention(ViTDetAttentionMixin, DnAAttention):
    """DnA attention on a ``[B, H, W, C]`` grid, per-branch relative positions."""


class ViTDetDiffAttention(ViTDetAttentionMixin, DiffAttention):
    """Differential attention on a ``[B, H, W, C]`` grid (no relative positions)."""

    supports_rel_pos = False


class ViTDetCogAttention(ViTDetAttentionMixin, CogAttention):
    """Cog attention on a ``[B, H, W, C]`` grid (no relative positions)."""

    supports_rel_pos = False


#: family class name → its ViTDet form
VITDET_ATTENTIONS: dict[str, type] = {
    'SoftmaxAttention': ViTDetSoftmaxAttention,
    'DnAAttention': ViTDetDnAAttention,
    'DiffAttention': ViTDetDiffAttention,
    'CogAttention': ViTDetCogAttention,
}
#: arguments every family member takes (what a Cog layer keeps when it falls back to softmax)
_COMMON_KEYS = ('qkv_bias', 'attn_drop', 'proj_drop', 'proj_bias', 'fused_attn')


def build_vitdet_attention(
    attn_cfg: AttnCfg,
    embed_dims: int,
    num_heads: int,
    layer_index: int,
    num_layers: int,
    use_rel_pos: bool = False,
    rel_pos_zero_init: bool = True,
    input_size: Optional[tuple[int, int]] = None,
    **default_args,
) -> nn.Module:
    """The ViTDet attention of block ``layer_index`` of ``num_layers``.

    ``attn_cfg`` as for :func:`~dna_mm.models.attention.build_attention`, with its per-layer
    rules: Cog attention is softmax in the first and last block (unless
    ``softmax_first_last=False``), Differential attention's ``λ_init`` follows the depth.

    Raises:
        ValueError: a cross-attention or unknown type, or ``use_rel_pos`` with Diff / Cog.
    """
    cfg = attention_cfg(attn_cfg)
    kind = cfg.pop('type')
    kind = kind if isinstance(kind, str) else kind.__name__
    if kind not in VITDET_ATTENTIONS:
        raise ValueError(
            f'ViTDet attention: {kind!r} is not a self-attention of the family; '
            f'expected one of {sorted(VITDET_ATTENTIONS)}'
        )
    if use_rel_pos and not VITDET_ATTENTIONS[kind].supports_rel_pos:
        raise ValueError(
            f'ViTDet: {kind} with use_rel_pos=True is not defined by the DnA paper '
            f'(no shipped config uses it); use attn_cfg softmax or dna, or '
            f'use_rel_pos=False'
        )
    if kind == 'CogAttention' and cfg.pop('softmax_first_last', True) and layer_index in (0, num_layers - 1):
        kind, cfg = 'SoftmaxAttention', {k: v for k, v in cfg.items() if k in _COMMON_KEYS}
    if kind == 'DiffAttention':
        cfg.setdefault('layer_index', layer_index)
    for key, value in default_args.items():
        cfg.setdefault(key, value)
    embed_dims, num_heads = cfg.pop('embed_dims', embed_dims), cfg.pop('num_heads', num_heads)
    return VITDET_ATTENTIONS[kind](
        embed_dims,
        num_heads,
        use_rel_pos=use_rel_pos,
        rel_pos_zero_init=rel_pos_zero_init,
        input_size=input_size,
        **cfg,
    )
