"""Swapping the attention of models other libraries build (``with_attention``, root
``MODELS``, and each library's): MMAction2's VideoMAE ViT, Video Swin, UniFormerV2 and MViTv2,
MMPretrain's ViT / DeiT III, BEiT and Swin, MMDetection's Swin, mmcv
``MultiheadAttention`` layers (DETR, any ``BaseTransformerLayer``), torch
``nn.MultiheadAttention`` (torchvision's ViT, CLIP blocks), timm ``Attention`` / ``EvaAttention``.
The hosts: :mod:`.hosts`; their forms: :mod:`dna_mm.models.layers`."""

from ..layers.eva_attention import EvaAttentionAdapter
from ..layers.swin_attention import WindowAttention3DAdapter
from ..layers.uniformerv2_attention import ExtractorAdapter
from .hosts import HostSpec, host_specs
from .swap import is_container, swap_attention, with_attention

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
