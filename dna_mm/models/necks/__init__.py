"""Necks registered in MMDetection's ``MODELS``: ViTDet's ``SimpleFPN`` (and ``LN2d``)."""

from ..layers.ln2d import LN2d
from .simple_fpn import SimpleFPN

__all__ = ['SimpleFPN', 'LN2d']
