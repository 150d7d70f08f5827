"""MMAction2 Video Swin's window attention (``WindowAttention3D``) with a family attention
inside: :class:`WindowAttention3DAdapter`, built by :func:`from_host`.

The relative position bias ``table[index]`` (``[H, N, N]``) is an ``attn_bias`` (inside the
formula: both DnA branches, ``s Q K^T + b``); the shifted-window mask (``0 / -100``) is an
exclusion ``attn_mask`` (a key of another window leaves both branches). Keys:
``relative_position_bias_table``, ``relative_position_index`` (as the host), ``attn.*``
(:func:`~dna_mm.converters.hosts.under_attn`). Every window attention has its table: a member that
takes no position bias is refused (:data:`TABLE`, :func:`~.forms.check_position_bias`).

MMPretrain's and MMDetection's Swin ``WindowMSA`` (2-D windows, the same call) take this form too.
"""

from __future__ import annotations

from typing import Optional

from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from ..attention.builder import AttnCfg
from .forms import PositionBias, member_for_host

#: the bias every Swin window attention adds (its table has no setting that leaves it out)
TABLE = PositionBias('its relative position bias table (relative_position_bias_table)')


class WindowAttention3DAdapter(nn.Module):
    """Video Swin's window attention with ``family`` (``attn.*``) inside: ``forward(x [B·nW, N,
    C], mask [nW, N, N] or None)`` as the host."""

    def __init__(self, family: nn.Module, table: Tensor, index: Tensor, window_size: tuple[int, ...]) -> None:
        super().__init__()
        self.attn = family
        self.embed_dims, self.num_heads = family.embed_dims, family.num_heads
        self.window_size = window_size
        self.relative_position_bias_table = nn.Parameter(table.detach().clone())
        self.register_buffer('relative_position_index', index.clone())

    def init_weights(self) -> None:
        """The hosts': the bias table truncated normal (std 0.02)."""
        trunc_normal_(self.relative_position_bias_table, std=0.02)

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        n = x.shape[1]
        bias = self.relative_position_bias_table[self.relative_position_index[:n, :n]]  # [N, N, H]
        bias = bias.permute(2, 0, 1).unsqueeze(0)  # [1, H, N, N]
        if mask is not None:  # [nW, N, N], windows minor in the batch: [B·nW, 1, N, N]
            mask = mask.to(x.dtype).repeat(x.shape[0] // mask.shape[0], 1, 1).unsqueeze(1)
        return self.attn(x, attn_mask=mask, attn_bias=bias.to(x.dtype))


def from_host(host: nn.Module, attn_cfg: AttnCfg, layer_index: int, num_layers: int) -> nn.Module:
    """The form of MMAction2's ``WindowAttention3D`` (or a Swin ``WindowMSA``) ``host``: its sizes,
    bias table and index; refuses a member that takes no position bias."""
    qkv_bias = host.qkv.bias is not None
    family = member_for_host(
        host, attn_cfg, layer_index, num_layers, host.embed_dims, TABLE, qkv_bias=qkv_bias
    )
    return WindowAttention3DAdapter(
        family, host.relative_position_bias_table, host.relative_position_index, tuple(host.window_size)
    )
