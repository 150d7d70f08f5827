"""Differential attention (Ye et al., ICLR 2025), at the softmax parameter budget.

Per head, ``Q, K`` are split into halves ``Q1, Q2, K1, K2`` of width ``d/2``; ``V`` keeps ``d``:

    A   = softmax(Q1 K1^T / sqrt(d/2) + b) - λ softmax(Q2 K2^T / sqrt(d/2) + b)
    out = (1 - λ_init) · RMSNorm_d(A V)
    λ   = exp(λq1·λk1) - exp(λq2·λk2) + λ_init,   λ_init = 0.8 - 0.6 exp(-0.3 · layer_index)

with ``λq1, λk1, λq2, λk2 ∈ R^{d/2}`` ~ N(0, 0.1) shared by the heads of a layer and a per-head
RMSNorm (eps 1e-5, learnable weight); ``b`` is ``attn_bias`` and the exclusion ``attn_mask`` is
added to both maps' logits. Parameter names match timm's ``DiffAttention`` (``lambda_q1`` …,
``sub_norm``), so its checkpoints load. Maps: ``{'pos': A1, 'neg': A2}`` (``A = A1 - λ A2``).

Head layout (``diff_heads``), both at the softmax parameter budget:

* ``'paper'`` (default, the DnA paper's wording): ``H`` heads; ``Q1 / Q2`` (``K1 / K2``) are the
  two halves of each head's ``d`` channels, ``V`` keeps ``d``.
* ``'official'`` (the Differential Transformer's code, and timm's ``DiffAttention(num_heads=H/2)``):
  ``H/2`` heads of width ``2d``: ``Q1, Q2, K1, K2`` of width ``d``, ``V`` of ``2d``, λ vectors of
  ``d``, RMSNorm over ``2d``. ``num_heads`` / ``head_dim`` then hold ``H/2`` / ``2d``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from mmengine.registry import MODELS
from timm.layers import RmsNorm
from torch import Tensor, nn

from ...errors import ConfigError
from . import functional as AF
from .base import AttentionBase, CrossAttentionMixin, MixingWeight


@MODELS.register_module()
class DiffAttention(AttentionBase):
    """Differential attention.

    Args:
        embed_dims, num_heads, qkv_bias, **kwargs: See :class:`.base.AttentionBase`.
        layer_index: 0-based depth of the layer (sets ``λ_init``); timm's ``depth`` is an alias.
        diff_heads: ``'paper'`` (``H`` heads of ``d/2``-wide ``Q1, Q2``) or ``'official'``
            (``H/2`` heads of ``d``-wide ``Q1, Q2``), see the module docstring.
    """

    short_name = 'diff'
    map_names = ('pos', 'neg')
    #: a position bias inside its two maps is not defined by its formula: hosts with one refuse it
    takes_position_bias = False
    #: λ and the sub-norm start as their own init when loading softmax weights
    own_start = ('lambda_', 'sub_norm.')

    @classmethod
    def layer_config(cls, cfg: dict, layer_index: int, num_layers: int) -> dict:
        """``layer_index`` (sets ``λ_init``) from the layer's depth, unless the config sets it."""
        return {'layer_index': layer_index, **cfg}

    def __init__(
        self,
        embed_dims: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        layer_index: int = 0,
        depth: Optional[int] = None,
        diff_heads: str = 'paper',
        **kwargs,
    ) -> None:
        if diff_heads not in ('paper', 'official'):
            raise ConfigError(f"DiffAttention: diff_heads must be 'paper' or 'official', got {diff_heads!r}")
        if diff_heads == 'official':
            if num_heads % 2:
                raise ConfigError(
                    f"DiffAttention: diff_heads='official' needs an even num_heads "
                    f'(it uses num_heads / 2 heads of twice the width), got {num_heads}'
                )
            num_heads //= 2
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        self.diff_heads = diff_heads
        if self.head_dim % 2:
            raise ConfigError(f'DiffAttention: head dim {self.head_dim} must be even')
        self.layer_index = layer_index if depth is None else depth
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * self.layer_index)
        half, dd = self.head_dim // 2, self.factory_kwargs
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(half, **dd) * 0.1) for _ in range(4)
        )
        self.sub_norm = RmsNorm(self.head_dim, eps=1e-5, **dd)

    def lambda_full(self) -> Tensor:
        """``λ = exp(λq1·λk1) - exp(λq2·λk2) + λ_init`` (a scalar)."""
        dtype = AF.compute_dtype(self.lambda_q1.dtype)
        return (
            torch.exp(torch.dot(self.lambda_q1, self.lambda_k1).to(dtype))
            - torch.exp(torch.dot(self.lambda_q2, self.lambda_k2).to(dtype))
            + self.lambda_init
        )

    def neg_coefficient(self) -> Tensor:
        """``-λ`` (a scalar shaped ``[1, 1, 1, 1]``): ``A = A1 - λ A2``."""
        return -self.lambda_full().reshape(1, 1, 1, 1)

    def mixing_weights(self) -> dict[str, MixingWeight]:
        """``{'lambda': λ}`` (a scalar, starting near ``λ_init``)."""
        return {'lambda': MixingWeight(self.lambda_full(), self.lambda_init)}

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        bias = AF.single_bias(attn_bias, type(self).__name__)
        q1, q2 = heads['q'].chunk(2, dim=-1)  # [B, H, M, d/2] × 2
        k1, k2 = heads['k'].chunk(2, dim=-1)
        scale = (self.head_dim // 2) ** -0.5
        o1, a1 = self.softmax_branch(q1, k1, heads['v'], attn_mask, bias, eager, scale=scale)
        o2, a2 = self.softmax_branch(q2, k2, heads['v'], attn_mask, bias, eager, scale=scale)
        out = self.sub_norm(o1 - self.lambda_full().to(q1.dtype) * o2) * (1 - self.lambda_init)
        return out, ({'pos': a1, 'neg': a2} if eager else {})  # [B, H, M, d]

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, layer_index={self.layer_index}, diff_heads={self.diff_heads!r}'


@MODELS.register_module()
class DiffCrossAttention(CrossAttentionMixin, DiffAttention):
    """Differential cross-attention: queries ``[B, M, C]``, context ``[B, N, C]``."""
