"""Differential attention (Ye et al., ICLR 2025), at the softmax parameter budget.

Per head, ``Q, K`` are split into halves ``Q1, Q2, K1, K2`` of width ``d/2``; ``V`` keeps ``d``:

    A   = softmax(Q1 K1^T / sqrt(d/2) + b) - λ softmax(Q2 K2^T / sqrt(d/2) + b)
    out = (1 - λ_init) · RMSNorm_d(A V)
    λ   = exp(λq1·λk1) - exp(λq2·λk2) + λ_init,   λ_init = 0.8 - 0.6 exp(-0.3 · layer_index)

with ``λq1, λk1, λq2, λk2 ∈ R^{d/2}`` ~ N(0, 0.1) shared by the heads of a layer and a per-head
RMSNorm (eps 1e-5, learnable weight). Parameter names match timm's ``DiffAttention``
(``lambda_q1`` …, ``sub_norm``), so its checkpoints load. Maps: ``{'pos': A1, 'neg': A2}``
(``A = A1 - λ A2``).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from mmengine.registry import MODELS
from timm.layers import RmsNorm
from torch import Tensor, nn

from . import functional as AF
from .base import AttentionBase, CrossAttentionMixin


@MODELS.register_module()
class DiffAttention(AttentionBase):
    """Differential attention.

    Args:
        embed_dims, num_heads, qkv_bias, **kwargs: See :class:`.base.AttentionBase`.
        layer_index: 0-based depth of the layer (sets ``λ_init``); timm's ``depth`` is an alias.
    """

    def __init__(self, embed_dims: int, num_heads: int = 8, qkv_bias: bool = True,
                 layer_index: int = 0, depth: Optional[int] = None, **kwargs) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        if self.head_dim % 2:
            raise ValueError(f'DiffAttention: head dim {self.head_dim} must be even')
        self.layer_index = layer_index if depth is None else depth
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * self.layer_index)
        half, dd = self.head_dim // 2, self.factory_kwargs
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(half, **dd) * 0.1) for _ in range(4))
        self.sub_norm = RmsNorm(self.head_dim, eps=1e-5, **dd)

    def lambda_full(self) -> Tensor:
        """``λ = exp(λq1·λk1) - exp(λq2·λk2) + λ_init`` (a scalar)."""
        return (torch.exp(torch.dot(self.lambda_q1, self.lambda_k1).float())
                - torch.exp(torch.dot(self.lambda_q2, self.lambda_k2).float()) + self.lambda_init)

    def core(self, q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor] = None,
             return_attn: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
        q1, q2 = q.chunk(2, dim=-1)             # [B, H, M, d/2] × 2
        k1, k2 = k.chunk(2, dim=-1)
        scale = (self.head_dim // 2) ** -0.5
        lam = self.lambda_full().to(q.dtype)
        if self.fused_attn and not return_attn:
            out = (AF.sdpa(q1, k1, v, attn_mask, scale, self.dropout_p)
                   - lam * AF.sdpa(q2, k2, v, attn_mask, scale, self.dropout_p))
            maps: dict[str, Tensor] = {}
        else:
            o1, a1 = AF.eager(q1, k1, v, attn_mask, scale, self.attn_drop)
            o2, a2 = AF.eager(q2, k2, v, attn_mask, scale, self.attn_drop)
            out, maps = o1 - lam * o2, {'pos': a1, 'neg': a2}
        return self.sub_norm(out) * (1 - self.lambda_init), maps  # [B, H, M, d]

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, layer_index={self.layer_index}'


@MODELS.register_module()
class DiffCrossAttention(CrossAttentionMixin, DiffAttention):
    """Differential cross-attention: queries ``[B, M, C]``, context ``[B, N, C]``."""
