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

passed to the family's ``attend`` as ``attn_bias`` (``(R(Q+), R(Q-))`` for DnA), so the fused
route is the family's SDPA route with the bias as SDPA's ``attn_mask`` (no map beyond the bias)
and ``return_attn=True`` the eager one. Differential and Cog attention with relative positions are
not defined by the DnA paper: their forms refuse ``use_rel_pos``.

Classes ``ViTDet{Member}`` (``ViTDetDnAAttention``, ...), one per member of the family
(:func:`~.forms.register_forms`), built by :func:`~.forms.build_form` with
:data:`VITDET_ATTENTIONS`.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor, nn

from ..attention import AttentionBase, DnAAttention, SoftmaxAttention
from ..attention.functional import BiasArg
from .forms import register_forms
from .positions import decomposed_rel_pos


class ViTDetAttentionMixin(AttentionBase):
    """Grid-shaped forward and relative positions for a family attention class (mixed in
    before it: ``class ViTDetDnAAttention(ViTDetAttentionMixin, DnAAttention)``).

    Args (keyword-only, beside the family class's own):
        use_rel_pos: Add decomposed relative positions.
        rel_pos_zero_init: Zero tables (detectron2's default); else truncated normal, std 0.02.
        input_size: Grid ``(h, w)`` the tables are made for (required with ``use_rel_pos``).
    """

    #: whether the form takes ``use_rel_pos``: the paper defines relative positions for softmax
    #: and DnA (set per class, :meth:`__init_subclass__`)
    supports_rel_pos: bool = False

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.supports_rel_pos = issubclass(cls, (SoftmaxAttention, DnAAttention))

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
                f'{name}: use_rel_pos=True is not defined by the DnA paper for this attention (no '
                f'shipped config uses it); use attn_cfg softmax or dna, or use_rel_pos=False'
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
        heads = self.project(x.reshape(b, h * w, c))  # each [B, heads, HW, d]
        bias = self.rel_pos_bias(heads, (h, w)) if self.use_rel_pos else None
        out, maps = self.run_attend(heads, None, bias, return_attn or not self.fused_attn)
        out = self.proj_drop(self.proj(self.merge_heads(out))).reshape(b, h, w, c)
        return (out, maps) if return_attn else out

    def extra_repr(self) -> str:
        rel = f', rel_pos={tuple(self.rel_pos_h.shape)}' if self.use_rel_pos else ''
        return super().extra_repr() + rel


#: family self-attention name → its ViTDet form (:func:`~.forms.build_form`)
VITDET_ATTENTIONS = register_forms(ViTDetAttentionMixin, 'ViTDet', globals(), 'on a [B, H, W, C] grid')
