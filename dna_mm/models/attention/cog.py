"""Cog attention (Lv et al., arXiv 2411.07176): signed weights that can subtract tokens.

    S = s Q K^T + b,   W = sign(S) ⊙ softmax(|S| + m),   out = W V

with ``b`` the ``attn_bias`` (inside the signed logits) and ``m`` the exclusion ``attn_mask``
(added to the magnitudes, so ``False`` / ``-inf`` / ``-1e4`` give a key weight 0; a query
whose every key is excluded, weights 0). There is no SDPA form of
``sign(S) ⊙ softmax(|S|)``, so this module always computes the map explicitly. The authors
keep plain softmax attention in the first and last layer; :func:`.builder.build_attention`
does the same by default. Maps: ``{'attn': W}``.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.fx
from mmengine.registry import MODELS
from torch import Tensor

from . import functional as AF
from .base import BASE_KEYS, AttentionBase, CrossAttentionMixin


@torch.fx.wrap
def cog_weights(s: Tensor, attn_mask: Optional[Tensor]) -> Tensor:
    """``sign(S) ⊙ softmax(|S| + m)`` over the last dim, normalised in at least fp32 (a row whose
    every key ``m`` excludes: weights 0, :func:`.functional.softmax`); an FX leaf (it
    branches on the mask, which a symbolic trace cannot follow)."""
    mag = AF.softmax(s.abs().to(AF.compute_dtype(s.dtype)), attn_mask)  # [B, H, M, N]
    return torch.sign(s) * mag.to(s.dtype)


@MODELS.register_module()
class CogAttention(AttentionBase):
    """Cog attention. Arguments: see :class:`.base.AttentionBase` (``fused_attn`` is ignored);
    ``softmax_first_last`` (config only, default True): :meth:`layer_config` builds the first
    and the last layer as :attr:`softmax_type`."""

    short_name = 'cog'
    #: a position bias inside its signed map is not defined by its formula: hosts with one refuse it
    takes_position_bias = False
    signed_maps = True
    #: what the first and last layer are (the authors' setting)
    softmax_type = 'SoftmaxAttention'

    @classmethod
    def layer_config(cls, cfg: dict, layer_index: int, num_layers: int) -> dict:
        """The first and last layer softmax (keeping the arguments every member takes) unless
        ``softmax_first_last=False``."""
        cfg = dict(cfg)
        if cfg.pop('softmax_first_last', True) and layer_index in (0, num_layers - 1):
            return {k: v for k, v in cfg.items() if k in BASE_KEYS} | dict(type=cls.softmax_type)
        return cfg

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: AF.BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        s = AF.scores(heads, self.scale, attn_bias, type(self).__name__)  # [B, H, M, N]
        w = cog_weights(s, attn_mask)
        return self.attn_drop(w) @ heads['v'], ({'attn': w} if eager else {})


@MODELS.register_module()
class CogCrossAttention(CrossAttentionMixin, CogAttention):
    """Cog cross-attention: queries ``[B, M, C]``, context ``[B, N, C]``."""

    softmax_type = 'SoftmaxCrossAttention'
