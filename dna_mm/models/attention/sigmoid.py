"""Sigmoid attention (Ramapuram et al., "Theory, Analysis, and Best Practices for Sigmoid
Self-Attention", ICLR 2025): each weight its own sigmoid, no normalisation over the keys.

Per head, with ``s = d ** -0.5`` and ``n`` keys:

=========  ====================================================  ===============================
term       formula                                               note
=========  ====================================================  ===============================
logits     ``S = s Q K^T + β + b``                               ``b``: ``attn_bias``
weights    ``W = sigmoid(S + m)``                                ``m``: the exclusion mask
output     ``W V``                                               rows of ``W`` do not sum to 1
bias       ``β = -log n`` (default, the paper's)                 or ``sigmoid_bias``, a number
=========  ====================================================  ===============================

``n`` is the number of keys the call attends over (its ``K``'s length), whatever the mask
excludes: the paper's ``b = -log n`` of the sequence length, as its reference code
(apple/ml-sigmoid-attention) fixes the bias per context length and masks a key by sending its
logit to the dtype's lowest value before the bias. An exclusion mask is added to the logits as
for every member (``False`` / ``-inf`` → ``sigmoid(-inf) = 0``: the key gets weight 0 and no
gradient; Swin's ``-100``, ``-1e4``: a weight below ``e^-100``); a row whose every key is
masked gives 0, not NaN. A host's position bias (ViTDet's, MViTv2's relative positions) enters
the logits, ``sigmoid(s Q K^T + β + b)``. The parameters are the base's (``qkv``, ``proj``), so
a softmax checkpoint loads unchanged.

There is no SDPA form of sigmoid attention (its fused kernel, FlashSigmoid, is CUDA code of its
own), so this module always computes the map explicitly, in at least float32. Maps:
``{'attn': W}``, non-negative weights in ``(0, 1)`` that are not a distribution over the keys
(:attr:`~.base.AttentionBase.normalised_maps` is False).
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

import torch
import torch.fx
from mmengine.registry import MODELS
from torch import Tensor

from ...errors import ConfigError
from . import functional as AF
from .base import AttentionBase, CrossAttentionMixin


@torch.fx.wrap
def sigmoid_weights(s: Tensor, attn_mask: Optional[Tensor], bias: Optional[float]) -> Tensor:
    """``sigmoid(S + β + m)`` over logits ``s [B, H, M, N]``, ``β = -log N`` where ``bias`` is
    None, in at least fp32 and cast back; an FX leaf (it branches on the mask and reads ``N``)."""
    n = s.shape[-1]  # no key (an empty context): no weight, and no -log 0
    beta = (-math.log(n) if n > 0 else 0.0) if bias is None else bias
    z = AF.add_mask(s.to(AF.compute_dtype(s.dtype)) + beta, attn_mask)
    return torch.sigmoid(z).to(s.dtype)


@MODELS.register_module()
class SigmoidAttention(AttentionBase):
    """Sigmoid attention.

    Args:
        embed_dims, num_heads, qkv_bias, **kwargs: See :class:`.base.AttentionBase`
            (``fused_attn`` is ignored: the map is always explicit).
        sigmoid_bias: The logit bias ``β``: None (default) for ``-log n`` of each call's ``n``
            keys, or a number for every call (the paper's fixed bias of a context length).
    """

    short_name = 'sigmoid'
    label = 'sigmoid'
    #: its weights are not normalised over the keys
    normalised_maps = False

    def __init__(
        self,
        embed_dims: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        sigmoid_bias: Optional[float] = None,
        **kwargs,
    ) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        number = isinstance(sigmoid_bias, numbers.Real) and not isinstance(sigmoid_bias, bool)
        if sigmoid_bias is not None and not (number and math.isfinite(sigmoid_bias)):
            raise ConfigError(
                f'SigmoidAttention: sigmoid_bias must be a finite number or None, got {sigmoid_bias}'
            )
        self.sigmoid_bias = None if sigmoid_bias is None else float(sigmoid_bias)

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        s = AF.scores(heads, self.scale, attn_bias, type(self).__name__)  # [B, H, M, N]
        w = sigmoid_weights(s, attn_mask, self.sigmoid_bias)
        return self.attn_drop(w) @ heads['v'], ({'attn': w} if eager else {})  # [B, H, M, d]

    def extra_repr(self) -> str:
        beta = '-log n' if self.sigmoid_bias is None else self.sigmoid_bias
        return f'{super().extra_repr()}, sigmoid_bias={beta}'


@MODELS.register_module()
class SigmoidCrossAttention(CrossAttentionMixin, SigmoidAttention):
    """Sigmoid cross-attention: queries ``[B, M, C]``, context ``[B, N, C]`` (``n``: its tokens)."""
