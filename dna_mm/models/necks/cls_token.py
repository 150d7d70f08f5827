"""``ClsTokenNeck``: the class token of a ViT's token map, for a classification head.

MMPretrain's ``TIMMBackbone`` resets the timm model's classifier with no pooling, so a timm ViT
returns its token map ``[B, 1 + N, C]`` (after the last norm); timm's own ``global_pool='token'``
reads its first token, and so does this neck::

    (x [B, 1 + N, C], ...)  ->  (x[:, 0] [B, C], ...)
"""

from __future__ import annotations

from mmengine.model import BaseModule
from mmengine.registry import MODELS
from torch import Tensor


@MODELS.register_module()
class ClsTokenNeck(BaseModule):
    """Take the class token (index 0) of each ``[B, 1 + N, C]`` map; no parameters."""

    def forward(self, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        for x in inputs:
            if x.dim() != 3:
                raise ValueError(f'ClsTokenNeck expects [B, 1 + N, C] token maps, got shape {list(x.shape)}')
        return tuple(x[:, 0] for x in inputs)  # [B, C] each
