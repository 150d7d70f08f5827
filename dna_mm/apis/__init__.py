"""Helpers shared by ``tools/train.py`` and ``tools/test.py``."""
from .config import format_metrics, prepare_cfg, shutdown_distributed

__all__ = ['prepare_cfg', 'format_metrics', 'shutdown_distributed']
