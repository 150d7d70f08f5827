"""ViTDet's attention for any member of the family: ``[B, H, W, C]`` in and out, optional
decomposed relative positions (:class:`GridForm`, built by :func:`vitdet_attention`).

The member keeps its class, parameters and names (``qkv``, ``proj`` and its own, for DnA
``q_neg``, ``v_neg``, ``alpha``); with ``use_rel_pos`` the form adds ``rel_pos_h`` / ``rel_pos_w``
``[2·S − 1, d]`` to it (``S``: the grid side, or the window side in window blocks), so a block's
keys are ``blocks.{i}.attn.{qkv,proj,q_neg,v_neg,alpha,rel_pos_h,rel_pos_w}``.

With relative positions each branch adds the decomposed bias of its own unscaled queries
(:func:`~dna_mm.models.layers.positions.decomposed_rel_pos`, tables shared):

=========  ==============================================================================
softmax    ``softmax(s Q Kᵀ + R(Q)) V`` (detectron2 / MMDetection ViTDet's ``Attention``)
DnA        ``softmax(s Q+ Kᵀ + R(Q+)) V+ + α softmin(s Q- Kᵀ + R(Q-)) V-``
=========  ==============================================================================

passed to the member's ``attend`` as ``attn_bias``: the member says which queries each branch
reads (:meth:`~dna_mm.models.attention.AttentionBase.position_bias`: ``R(Q)``, or one per
branch, DnA's ``(R(Q+), R(Q-))``), so any member of the family, the shipped ones or your own,
gets it the same way. The fused route is the member's SDPA route with the bias as SDPA's
``attn_mask`` and ``return_attn=True`` the eager one. With ``use_rel_pos`` the form declares its
bias (:meth:`GridForm.position_bias`), so a member whose
:attr:`~dna_mm.models.attention.AttentionBase.takes_position_bias` is False (Diff, Cog, or your
own) is refused when the model is built (:func:`~.forms.check_position_bias`).
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor, nn

from ...errors import ConfigError
from ..attention import AttentionBase, build_attention
from ..attention.builder import AttnCfg
from ..attention.functional import BiasArg
from .forms import HostForm, PositionBias
from .positions import decomposed_rel_pos


class GridForm(HostForm):
    """ViTDet's call ``(x [B, H, W, C], return_attn=False) → [B, H, W, C]`` (and the maps
    ``[B, heads, HW, HW]`` with ``return_attn``), with relative positions when ``use_rel_pos``."""

    host = 'ViTDet'

    def __init__(self, use_rel_pos: bool = False) -> None:
        self.use_rel_pos = use_rel_pos

    def position_bias(self) -> Optional[PositionBias]:
        """With ``use_rel_pos``: the decomposed relative positions, inside the logits."""
        return (
            PositionBias('relative positions (use_rel_pos=True)', 'use_rel_pos=False')
            if self.use_rel_pos
            else None
        )

    def add_rel_pos(
        self, member: AttentionBase, input_size: Optional[tuple[int, int]], zero_init: bool
    ) -> None:
        """``rel_pos_h`` / ``rel_pos_w`` on ``member`` for the grid ``input_size = (h, w)``: zeros
        (detectron2's default) or truncated normal (std 0.02)."""
        name = f'ViTDet {type(member).__name__}'
        if input_size is None or len(input_size) != 2 or min(input_size) <= 0:
            raise ConfigError(f'{name}: use_rel_pos=True needs input_size=(h, w), got {input_size}')
        h, w = input_size
        dd = member.factory_kwargs
        member.rel_pos_h = nn.Parameter(torch.zeros(2 * h - 1, member.head_dim, **dd))
        member.rel_pos_w = nn.Parameter(torch.zeros(2 * w - 1, member.head_dim, **dd))
        if not zero_init:
            nn.init.trunc_normal_(member.rel_pos_h, std=0.02)
            nn.init.trunc_normal_(member.rel_pos_w, std=0.02)

    @staticmethod
    def rel_pos_bias(member: AttentionBase, heads: dict[str, Tensor], hw: tuple[int, int]) -> BiasArg:
        """``R(Q)`` ``[B, H, N, N]`` of each branch's queries, as the member hands them to its
        ``attend`` (:meth:`~dna_mm.models.attention.AttentionBase.position_bias`)."""
        tables = (member.rel_pos_h, member.rel_pos_w)
        return member.position_bias(heads, lambda q: decomposed_rel_pos(q, *tables, hw, hw))

    def describe(self, member: AttentionBase) -> str:
        rel = f', rel_pos={tuple(member.rel_pos_h.shape)}' if self.use_rel_pos else ''
        return super().describe(member) + rel

    def __call__(
        self, member: AttentionBase, x: Tensor, return_attn: bool = False
    ) -> Union[Tensor, tuple[Tensor, dict[str, Tensor]]]:
        b, h, w, c = x.shape
        tokens = x.reshape(b, h * w, c)
        heads = member.project(tokens)  # each [B, heads, HW, d]
        bias = self.rel_pos_bias(member, heads, (h, w)) if self.use_rel_pos else None
        out, maps = member.run_attend(heads, None, bias, return_attn or not member.fused_attn)
        out = member.project_out(member.merge_heads(out), tokens).reshape(b, h, w, c)
        return (out, maps) if return_attn else out


def vitdet_attention(
    attn_cfg: AttnCfg,
    embed_dim: int,
    num_heads: int,
    layer_index: int,
    num_layers: int,
    use_rel_pos: bool = False,
    rel_pos_zero_init: bool = True,
    input_size: Optional[tuple[int, int]] = None,
    **kwargs,
) -> AttentionBase:
    """The member ``attn_cfg`` names, as attention ``layer_index`` of ``num_layers``, answering
    ViTDet's call (:class:`GridForm`); ``kwargs``: the member's arguments (``qkv_bias``, ...).

    Raises:
        UnsupportedModelError: ``use_rel_pos`` for a member that takes no position bias.
        ValueError: ``use_rel_pos`` without ``input_size``; a cross-attention.
    """
    member = build_attention(attn_cfg, embed_dim, num_heads, layer_index, num_layers, **kwargs)
    form = GridForm(use_rel_pos)
    member = form.attach(member)
    if use_rel_pos:
        form.add_rel_pos(member, input_size, rel_pos_zero_init)
    return member
