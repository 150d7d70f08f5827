"""Swapping the attention of models other libraries build (``with_attention``, root
``MODELS``): MMAction2's VideoMAE ViT, Video Swin, UniFormerV2 and MViTv2, mmcv
``MultiheadAttention`` layers (DETR, any ``BaseTransformerLayer``), torch
``nn.MultiheadAttention`` (torchvision's ViT, CLIP blocks), timm ``Attention`` / ``EvaAttention``."""

from .hosts import (
    EvaAttentionAdapter,
    ExtractorAdapter,
    HostSpec,
    WindowAttention3DAdapter,
    host_specs,
    is_container,
)
from .swap import swap_attention, with_attention

__all__ = [
    'EvaAttentionAdapter',
    'ExtractorAdapter',
    'HostSpec',
    'WindowAttention3DAdapter',
    'host_specs',
    'is_container',
    'swap_attention',
    'with_attention',
]
