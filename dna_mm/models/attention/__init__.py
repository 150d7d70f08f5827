"""The attention family: DnA (five variants) and the baselines, one interface.

Registered in MMEngine's root ``MODELS`` (so visible from every library's scope):
``SoftmaxAttention``, ``DnAAttention``, ``DiffAttention``, ``CogAttention``,
``GatedAttention``, ``SigmoidAttention`` and their ``*CrossAttention`` forms; any of them gated
by ``gated=True``. A member of your own is one file: a subclass of :class:`AttentionBase`
registered there (docs/attention.md), under names no other member holds (:mod:`.registration`).
"""

from ...family import DNA_VARIANT_ALIASES, DNA_VARIANTS, canonical_variant
from .base import AttentionBase, BranchHeads, MixingWeight
from .builder import (
    attention_cfg,
    attention_class,
    attention_types,
    build_attention,
    self_attention_class,
    short_names,
)

# registered in this order, the order messages list the members in
# isort: off
from .softmax import SoftmaxAttention, SoftmaxCrossAttention
from .dna import DnAAttention, DnACrossAttention
from .diff import DiffAttention, DiffCrossAttention
from .cog import CogAttention, CogCrossAttention
from .gated import GatedAttention, GatedCrossAttention
from .sigmoid import SigmoidAttention, SigmoidCrossAttention

# isort: on

__all__ = [
    'AttentionBase',
    'BranchHeads',
    'MixingWeight',
    'SoftmaxAttention',
    'SoftmaxCrossAttention',
    'DnAAttention',
    'DnACrossAttention',
    'DiffAttention',
    'DiffCrossAttention',
    'CogAttention',
    'CogCrossAttention',
    'GatedAttention',
    'GatedCrossAttention',
    'SigmoidAttention',
    'SigmoidCrossAttention',
    'DNA_VARIANTS',
    'DNA_VARIANT_ALIASES',
    'canonical_variant',
    'ATTENTION_TYPES',
    'attention_cfg',
    'attention_class',
    'attention_types',
    'build_attention',
    'self_attention_class',
    'short_names',
]


def __getattr__(name: str) -> object:
    """``ATTENTION_TYPES`` of earlier releases: the registered members now."""
    if name == 'ATTENTION_TYPES':
        return tuple(attention_types())
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
