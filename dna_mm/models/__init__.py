"""Models: the attention family (root ``MODELS``), backbones (``mmaction`` / timm)."""
from .attention import (CogAttention, CogCrossAttention, DiffAttention, DiffCrossAttention,
                        DnAAttention, DnACrossAttention, SoftmaxAttention, SoftmaxCrossAttention,
                        build_attention)
from . import backbones  # noqa: E402  (after .attention: backbones use the converters)
from . import adapters  # noqa: E402

__all__ = ['DnAAttention', 'DnACrossAttention', 'SoftmaxAttention', 'SoftmaxCrossAttention',
           'DiffAttention', 'DiffCrossAttention', 'CogAttention', 'CogCrossAttention',
           'build_attention', 'backbones', 'adapters']
