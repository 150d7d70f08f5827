"""Backbones: timm DnA ViTs (``dna_vit_*``) and MMAction2's TimeSformer with configurable
attention (``DnATimeSformer``, registered in the ``mmaction`` scope)."""
from .timesformer import DnATimeSformer, adapt_attentions, load_pretrained
from .timm_vit import DnAVisionTransformer

__all__ = ['DnAVisionTransformer', 'DnATimeSformer', 'adapt_attentions', 'load_pretrained']
