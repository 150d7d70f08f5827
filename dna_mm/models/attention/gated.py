"""Gated attention (Qiu et al., "Gated Attention for Large Language Models", NeurIPS 2025):
softmax attention whose output is gated per channel by the block's input, before ``proj``.

Per layer, with ``x [B, N, C]`` the input the queries come from and ``s = d ** -0.5``:

==========  ===========================================================  ==============
term        formula                                                      params
==========  ===========================================================  ==============
heads       ``O_h = softmax(s Q_h K_h^T + b + m) V_h``                   ``qkv``
gate        ``G = sigmoid(x W_g^T + b_g)``  ``[B, N, C]``                 ``gate``: C² + C
output      ``proj([O_1, …, O_H] ⊙ G)``                                  ``proj``
==========  ===========================================================  ==============

(``b``: ``attn_bias``, ``m``: the exclusion ``attn_mask``, as for softmax.) The gate is the
base class's ``gated=True`` (:meth:`~.base.AttentionBase.project_out`), so any member takes it
with one setting (``dict(type='DnAAttention', gated=True)``); this member is softmax with it on.
Keys and values: timm's ``Attention(dim, num_heads, qkv_bias=True, gated=True)`` (``qkv``,
``gate``, ``proj``), whose state dict it loads strictly and whose output it gives. A softmax
checkpoint loads too; the gate keeps its own start (it has none there). Maps: ``{'attn': A}``,
the softmax map (the gate acts on the output, not on the map).
"""

from __future__ import annotations

from mmengine.registry import MODELS

from .base import CrossAttentionMixin
from .softmax import SoftmaxAttention


@MODELS.register_module()
class GatedAttention(SoftmaxAttention):
    """Softmax attention with the output gate.

    Args:
        embed_dims, num_heads, qkv_bias, **kwargs: See :class:`.base.AttentionBase`.
        gated: The gate (default True; False gives :class:`SoftmaxAttention`'s module).
    """

    short_name = 'gated'
    label = 'gated softmax'

    def __init__(
        self, embed_dims: int, num_heads: int = 8, qkv_bias: bool = True, gated: bool = True, **kwargs
    ) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, gated=gated, **kwargs)


@MODELS.register_module()
class GatedCrossAttention(CrossAttentionMixin, GatedAttention):
    """Gated cross-attention: queries ``[B, M, C]`` (the gate's input), context ``[B, N, C]``."""
