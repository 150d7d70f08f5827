"""``LN2d``: LayerNorm over the channels of a ``[B, C, H, W]`` map (ViTDet's neck and heads).

Registered under the reference's name in the root ``MODELS`` (see :mod:`dna_mm.models.necks`),
so ``norm_cfg=dict(type='LN2d', eps=1e-6)`` builds it through mmcv's ``build_norm_layer`` (as
``norm_layer`` inside a ``ConvModule``: detector checkpoints keep their keys). Give ``eps``
explicitly: ``build_norm_layer`` fills in 1e-5 when the config has none; detectron2 uses 1e-6."""

from __future__ import annotations

import torch
from mmengine.registry import MODELS
from torch import Tensor, nn


@MODELS.register_module()
class LN2d(nn.Module):
    """``y = w_c · (x_c − mean_c(x)) / sqrt(var_c(x) + eps) + b_c`` per pixel, statistics over
    the channel axis of ``x [B, C, H, W]`` (biased variance, as ``nn.LayerNorm``).

    Args:
        normalized_shape: Number of channels ``C``.
        eps: Added to the variance.
    """

    def __init__(self, normalized_shape: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.normalized_shape = (normalized_shape,)

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(1, keepdim=True)  # [B, 1, H, W]
        var = (x - mean).pow(2).mean(1, keepdim=True)  # [B, 1, H, W]
        x = (x - mean) * torch.rsqrt(var + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]

    def extra_repr(self) -> str:
        return f'{self.normalized_shape[0]}, eps={self.eps}'
