"""Models: the attention family (root ``MODELS``), backbones (``mmaction`` / timm)."""

from importlib.util import find_spec as _find_spec

from . import adapters, backbones
from .attention import (
    CogAttention,
    CogCrossAttention,
    DiffAttention,
    DiffCrossAttention,
    DnAAttention,
    DnACrossAttention,
    GatedAttention,
    GatedCrossAttention,
    SigmoidAttention,
    SigmoidCrossAttention,
    SoftmaxAttention,
    SoftmaxCrossAttention,
    build_attention,
)

if _find_spec('mmdet') is not None:  # the detection half (mmdet scope)
    from . import necks  # noqa: F401  (SimpleFPN, LN2d)
    from .backbones import vitdet  # noqa: F401  (ViTDet)

__all__ = [
    'DnAAttention',
    'DnACrossAttention',
    'SoftmaxAttention',
    'SoftmaxCrossAttention',
    'DiffAttention',
    'DiffCrossAttention',
    'CogAttention',
    'CogCrossAttention',
    'GatedAttention',
    'GatedCrossAttention',
    'SigmoidAttention',
    'SigmoidCrossAttention',
    'build_attention',
    'backbones',
    'adapters',
]
