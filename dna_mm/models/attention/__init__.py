"""The attention family: DnA (five variants) and the baselines, one interface.

Registered in MMEngine's root ``MODELS`` (so visible from the ``mmaction`` and ``mmdet``
scopes): ``SoftmaxAttention``, ``DnAAttention``, ``DiffAttention``, ``CogAttention`` and their
``*CrossAttention`` forms.
"""

from ...family import DNA_VARIANT_ALIASES, DNA_VARIANTS, canonical_variant
from .base import AttentionBase
from .builder import ATTENTION_TYPES, attention_cfg, build_attention
from .cog import CogAttention, CogCrossAttention
from .diff import DiffAttention, DiffCrossAttention
from .dna import DnAAttention, DnACrossAttention
from .softmax import SoftmaxAttention, SoftmaxCrossAttention

__all__ = [
    'AttentionBase',
    'SoftmaxAttention',
    'SoftmaxCrossAttention',
    'DnAAttention',
    'DnACrossAttention',
    'DiffAttention',
    'DiffCrossAttention',
    'CogAttention',
    'CogCrossAttention',
    'DNA_VARIANTS',
    'DNA_VARIANT_ALIASES',
    'canonical_variant',
    'ATTENTION_TYPES',
    'attention_cfg',
    'build_attention',
]
