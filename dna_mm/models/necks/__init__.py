"""ViTDet's ``SimpleFPN`` (and ``LN2d``), and the ImageNet classifiers' ``ClsTokenNeck``,
registered in MMEngine's root ``MODELS`` under the reference's names: found from the ``mmdet`` and
``mmpretrain`` scopes, and no clash with MMDetection's ``projects/ViTDet``, whose classes
(registered in the ``mmdet`` registry) take precedence there when it is imported."""

from ..layers.ln2d import LN2d
from .cls_token import ClsTokenNeck
from .simple_fpn import SimpleFPN

__all__ = ['SimpleFPN', 'LN2d', 'ClsTokenNeck']
