"""Swapping the attention of models other libraries build (``with_attention``, root
``MODELS``): MMAction2's VideoMAE ViT and Video Swin, mmcv ``MultiheadAttention`` layers
(DETR, any ``BaseTransformerLayer``), timm ``Attention``."""

from .hosts import EvaAttentionAdapter, HostSpec, WindowAttention3DAdapter, host_specs
from .swap import swap_attention, with_attention

__all__ = [
    'EvaAttentionAdapter',
    'HostSpec',
    'WindowAttention3DAdapter',
    'host_specs',
    'swap_attention',
    'with_attention',
]
