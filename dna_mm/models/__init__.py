"""Models: the attention family (root ``MODELS``), backbones (``mmaction`` / timm)."""

# Order matters: the attention, then the backbones that use the converters.
# isort: off
from .attention import (
    CogAttention,
    CogCrossAttention,
    DiffAttention,
    DiffCrossAttention,
    DnAAttention,
    DnACrossAttention,
    SoftmaxAttention,
    SoftmaxCrossAttention,
    build_attention,
)
from . import backbones  # noqa: E402  (after .attention: backbones use the converters)
from . import adapters  # noqa: E402

from importlib.util import find_spec as _find_spec  # noqa: E402

if _find_spec('mmdet') is not None:  # the detection half (mmdet scope)
    from . import necks  # noqa: E402,F401  (SimpleFPN, LN2d)
    from .backbones import vitdet  # noqa: E402,F401  (ViTDet)
# isort: on

__all__ = [
    'DnAAttention',
    'DnACrossAttention',
    'SoftmaxAttention',
    'SoftmaxCrossAttention',
    'DiffAttention',
    'DiffCrossAttention',
    'CogAttention',
    'CogCrossAttention',
    'build_attention',
    'backbones',
    'adapters',
]
