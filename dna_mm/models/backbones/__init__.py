"""Backbones: timm DnA ViTs (``dna_vit_*``) and MMAction2's TimeSformer with configurable
attention (``DnATimeSformer``, registered in the ``mmaction`` scope)."""

from ...converters import adapt_attentions  # re-exported: it used to live here
from .timesformer import DnATimeSformer, load_pretrained
from .timm_vit import DnAVisionTransformer

__all__ = ['DnAVisionTransformer', 'DnATimeSformer', 'adapt_attentions', 'load_pretrained']
