"""MMPretrain's attentions with a family attention inside (``attn.*``), built by their
``from_*`` functions:

* :class:`MultiheadAttentionAdapter`: ``mmpretrain.models.utils.attention.MultiheadAttention``
  (ViT, DeiT, DeiT III, ...: ``forward(x [B, N, C])``), then the host's layer scale ``gamma1``
  and its ``out_drop`` (the drop path of ViT's layers), as the host ends;
* :class:`BEiTAttentionAdapter`: ``BEiTAttention`` (BEiT, BEiT v2): its own relative position
  table and the backbone's shared ``rel_pos_bias`` are ``attn_bias`` (inside both branches'
  logits); the ``q_bias`` / ``v_bias`` become the ``qkv`` bias
  (:func:`~dna_mm.converters.hosts.beit_keys`). A member that takes no position bias is refused
  where the host has its table (:func:`from_beit`) or the backbone its shared one (the host
  row's ``bias_from``, :mod:`dna_mm.models.adapters.hosts`).

MMPretrain's and MMDetection's Swin ``WindowMSA`` take Video Swin's form
(:mod:`.swin_attention`, the same call and bias table), reached through their ``ShiftWindowMSA``.
"""

from __future__ import annotations

from typing import Optional

from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from ..attention import build_attention
from ..attention.builder import AttnCfg
from .forms import PositionBias, member_for_host, refuse


class MultiheadAttentionAdapter(nn.Module):
    """``out_drop(gamma1(attn(x)))``: MMPretrain's ``MultiheadAttention`` call on ``family``."""

    def __init__(self, family: nn.Module, gamma1: nn.Module, out_drop: nn.Module) -> None:
        super().__init__()
        self.attn = family
        self.gamma1 = gamma1
        self.out_drop = out_drop

    def forward(self, x: Tensor) -> Tensor:
        return self.out_drop(self.gamma1(self.attn(x)))  # [B, N, C]


def from_multihead(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of MMPretrain's ``MultiheadAttention`` ``host`` (its scale is always
    ``head_dims ** -0.5``: MMPretrain ignores ``qk_scale``'s value); refuses ``input_dims`` other
    than ``embed_dims`` and ``v_shortcut`` (T2T-ViT's token layers)."""
    if host.input_dims != host.embed_dims or host.v_shortcut:
        refuse(host, 'input_dims different from embed_dims (v_shortcut)')
    family = build_attention(
        attn_cfg,
        host.embed_dims,
        host.num_heads,
        layer_index,
        num_layers,
        qkv_bias=host.qkv.bias is not None,
        proj_bias=host.proj.bias is not None,
        attn_drop=host.attn_drop,
        proj_drop=host.proj_drop.p,
    )
    return MultiheadAttentionAdapter(family, host.gamma1, host.out_drop)


class BEiTAttentionAdapter(nn.Module):
    """BEiT's attention on ``family``: ``forward(x [B, N, C], rel_pos_bias [H, N, N] or None)``
    with ``table[index]`` (``relative_position_*``, when the host has its own) plus
    ``rel_pos_bias`` as the ``attn_bias``."""

    def __init__(self, family: nn.Module, table: Optional[Tensor], index: Optional[Tensor]) -> None:
        super().__init__()
        self.attn = family
        self.relative_position_bias_table = None if table is None else nn.Parameter(table.detach().clone())
        if index is not None:
            self.register_buffer('relative_position_index', index.clone())

    def init_weights(self) -> None:
        """The host's: the relative position table truncated normal (std 0.02)."""
        if self.relative_position_bias_table is not None:
            trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, x: Tensor, rel_pos_bias: Optional[Tensor] = None) -> Tensor:
        bias = rel_pos_bias  # [H, N, N] (the backbone's shared table) or None
        if self.relative_position_bias_table is not None:
            n = self.relative_position_index.shape[0]
            own = self.relative_position_bias_table[self.relative_position_index.view(-1)]
            own = own.view(n, n, -1).permute(2, 0, 1)  # [H, N, N]
            bias = own if bias is None else own + bias
        return self.attn(x, attn_bias=None if bias is None else bias.unsqueeze(0).to(x.dtype))


def from_beit(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of MMPretrain's ``BEiTAttention`` ``host``: its scale, dropouts, biases and
    table; refuses a member that takes no position bias where the host has its table."""
    bias = dict(qkv_bias=host.bias is not False)  # 'qv_bias', True or False
    table = None
    if host.relative_position_bias_table is not None:
        table = PositionBias(
            'its relative position bias table (use_rel_pos_bias=True)', 'use_rel_pos_bias=False'
        )
    family = member_for_host(host, attn_cfg, layer_index, num_layers, host.embed_dims, table, **bias)
    return BEiTAttentionAdapter(family, host.relative_position_bias_table, host.relative_position_index)
