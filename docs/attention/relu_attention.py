"""ReLU attention (Wortsman et al., "Replacing softmax with ReLU in Vision Transformers", 2023)
as a member of dna_mm's attention family, in one file:

    out = (1 / N) · relu(s Q Kᵀ + b) V,     s = d ** -0.5 (``self.scale``)

``b``: the host's position bias (``attn_bias``: ViTDet's and MViTv2's relative positions); a key
the host excludes (``attn_mask``: False, -inf, Swin's -100) gets weight 0. Its parameters are the
base's (``qkv``, ``proj``), so a softmax checkpoint loads into it unchanged.

Use it by importing this file (``custom_imports = dict(imports=['relu_attention'])`` with its
folder on ``PYTHONPATH``, or a plain import) and naming it: ``attn_cfg='relu'`` or
``dict(type='ReLUAttention')`` in ``DnATimeSformer``, ``ViTDet`` or ``with_attention``.
"""

from __future__ import annotations

from typing import Optional

import torch
from mmengine.registry import MODELS
from torch import Tensor

from dna_mm.models.attention import AttentionBase
from dna_mm.models.attention.base import CrossAttentionMixin
from dna_mm.models.attention.functional import BiasArg, add_mask, single_bias


@MODELS.register_module()
class ReLUAttention(AttentionBase):
    """ReLU attention. Arguments: those of :class:`~dna_mm.models.attention.AttentionBase`."""

    short_name = 'relu'

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        s = (heads['q'] * self.scale) @ heads['k'].transpose(-2, -1)  # [B, H, M, N]
        bias = single_bias(attn_bias, type(self).__name__)
        if bias is not None:
            s = s + bias.to(s.dtype)
        w = torch.relu(add_mask(s, attn_mask)) / s.shape[-1]  # an excluded key: relu(-inf) = 0
        return self.attn_drop(w) @ heads['v'], ({'attn': w} if eager else {})  # [B, H, M, d]


@MODELS.register_module()
class ReLUCrossAttention(CrossAttentionMixin, ReLUAttention):
    """Its cross form: queries ``[B, M, C]``, keys and values from ``context [B, N, C]``."""
