"""Softmax attention (the ViT baseline): ``softmax(s Q K^T + b + m) V`` per head, ``s = d ** -0.5``
(``b``: ``attn_bias``, ``m``: ``attn_mask``; for one branch the two add the same way).

Parameter names follow timm's ``Attention`` (``qkv``, ``proj``). Maps: ``{'attn': A}``.
"""

from __future__ import annotations

from typing import Optional

from mmengine.registry import MODELS
from torch import Tensor

from . import functional as AF
from .base import AttentionBase, CrossAttentionMixin, checked_kernel, has_tokens

#: fused routes: ``scaled_dot_product_attention``, or the packed short-sequence Triton kernel
KERNELS = ('sdpa', 'triton')


@MODELS.register_module()
class SoftmaxAttention(AttentionBase):
    """Standard multi-head self-attention.

    Args:
        embed_dims, num_heads, qkv_bias, **kwargs: See :class:`.base.AttentionBase`.
        kernel: Fused route: ``'sdpa'`` (``scaled_dot_product_attention``) or ``'triton'``: over
            sequences of at most 32 queries and keys without a bias or mask (TimeSformer's
            temporal attention), the packed kernel of :func:`dna_mm.ops.short_softmax_attention`
            (the baseline of DnA's ``kernel='triton'``), SDPA otherwise; refused here, with the
            reason, where the kernel cannot run.
    """

    short_name = 'softmax'
    label = 'softmax'

    def __init__(
        self, embed_dims: int, num_heads: int = 8, qkv_bias: bool = True, kernel: str = 'sdpa', **kwargs
    ) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        self.kernel = checked_kernel(type(self).__name__, kernel, KERNELS, self.head_dim)

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        bias = AF.single_bias(attn_bias, type(self).__name__)
        q, k, v = heads['q'], heads['k'], heads['v']
        if (
            not eager
            and self.kernel == 'triton'
            and self.dropout_p == 0.0
            and attn_mask is None
            and bias is None
            and has_tokens(heads)
        ):
            from ...ops.kernel_config import takes_short_kernels

            if takes_short_kernels(q.shape[2], k.shape[2], has_bias=False):
                from ...ops import short_softmax_attention

                return short_softmax_attention(q, k, v, self.scale), {}
        out, attn = self.softmax_branch(q, k, v, attn_mask, bias, eager)
        return out, ({'attn': attn} if eager else {})

    def extra_repr(self) -> str:
        kernel = f', kernel={self.kernel!r}' if self.kernel != 'sdpa' else ''
        return f'{super().extra_repr()}{kernel}'


@MODELS.register_module()
class SoftmaxCrossAttention(CrossAttentionMixin, SoftmaxAttention):
    """Softmax cross-attention: queries ``[B, M, C]``, context ``[B, N, C]``."""
