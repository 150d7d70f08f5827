"""Softmax attention (the ViT baseline): ``softmax(s Q K^T + b + m) V`` per head, ``s = d ** -0.5``
(``b``: ``attn_bias``, ``m``: ``attn_mask``; for one branch the two add the same way).

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

    short_name = 'softmax'
    label = 'softmax'

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        bias = AF.single_bias(attn_bias, type(self).__name__)
        out, attn = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, bias, eager)
        return out, ({'attn': attn} if eager else {})


@MODELS.register_module()
class SoftmaxCrossAttention(CrossAttentionMixin, SoftmaxAttention):
    """Softmax cross-attention: queries ``[B, M, C]``, context ``[B, N, C]``."""
