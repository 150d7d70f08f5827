"""Checkpoint converters: attention keys (softmax ↔ DnA, the authors' layouts) and whole
TimeSformer / ViT checkpoint layouts. Pure key / tensor functions: nothing here imports
:mod:`dna_mm.models` (fitting a state dict to a built model is
:func:`dna_mm.models.backbones.adapt_attentions`)."""

from ..family import COMBINE_SIGNS
from .attention import (
    NothingToConvertError,
    dna_to_softmax,
    negative_branch,
    official_to_dna_mm,
    pos_embed_with_cls,
    rename_mha,
    softmax_to_dna,
)
from .timesformer import detect_layout, to_timesformer, unwrap

__all__ = [
    'official_to_dna_mm',
    'softmax_to_dna',
    'negative_branch',
    'dna_to_softmax',
    'rename_mha',
    'to_timesformer',
    'detect_layout',
    'unwrap',
    'pos_embed_with_cls',
    'COMBINE_SIGNS',
    'NothingToConvertError',
]
