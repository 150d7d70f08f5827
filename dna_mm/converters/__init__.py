"""Checkpoint converters: attention keys (softmax ↔ DnA, the authors' layouts) and whole
TimeSformer / ViT checkpoint layouts."""

from .attention import (
    COMBINE_SIGNS,
    NothingToConvertError,
    adapt_attentions,
    dna_to_softmax,
    official_to_dna_mm,
    pos_embed_with_cls,
    rename_mha,
    softmax_to_dna,
)
from .timesformer import detect_layout, to_timesformer, unwrap

__all__ = [
    'official_to_dna_mm',
    'softmax_to_dna',
    'dna_to_softmax',
    'rename_mha',
    'to_timesformer',
    'detect_layout',
    'unwrap',
    'adapt_attentions',
    'pos_embed_with_cls',
    'COMBINE_SIGNS',
    'NothingToConvertError',
]
