"""Softmax attention (the ViT baseline): ``softmax(s Q K^T + b) V`` per head, ``s = d ** -0.5``.

Parameter names follow timm's ``Attention`` (``qkv``, ``proj``). Maps: ``{'attn': A}``.
"""
from __future__ import annotations

from typing import Optional

from mmengine.registry import MODELS
from torch import Tensor

from . import functional as AF
from .base import AttentionBase, CrossAttentionMixin


@MODELS.register_module()
class SoftmaxAttention(AttentionBase):
    """Standard multi-head self-attention. Arguments: see :class:`.base.AttentionBase`."""

    def core(self, q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor] = None,
             return_attn: bool = False) -> tuple[Tensor, dict[str, Tensor]]:
        if self.fused_attn and not return_attn:
            return AF.sdpa(q, k, v, attn_mask, self.scale, self.dropout_p), {}
        out, attn = AF.eager(q, k, v, attn_mask, self.scale, self.attn_drop)
        return out, {'attn': attn}


@MODELS.register_module()
class SoftmaxCrossAttention(CrossAttentionMixin, SoftmaxAttention):
    """Softmax cross-attention: queries ``[B, M, C]``, context ``[B, N, C]``."""
