"""Backbones: timm DnA ViTs (``dna_vit_*``) and MMAction2's TimeSformer with configurable
attention (``DnATimeSformer``, registered in the ``mmaction`` scope)."""

from ..fitting import adapt_attentions
from .pretrained import ModelKeys, load_pretrained
from .timesformer import DnATimeSformer
from .timm_vit import DnAVisionTransformer

__all__ = ['DnAVisionTransformer', 'DnATimeSformer', 'ModelKeys', 'adapt_attentions', 'load_pretrained']
