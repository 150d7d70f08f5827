"""Helpers shared by ``tools/train.py`` and ``tools/test.py``: config preparation and the runner."""

from .check import check_config
from .config import (
    enable_tensorboard,
    format_metrics,
    prepare_cfg,
    shutdown_distributed,
    skip_unreadable,
    sync_schedule,
)
from .global_batch import GlobalBatchHook, apply_global_batch
from .runner import DnARunner, SetupDumpFilter, build_runner, refuse_busy_work_dir

__all__ = [
    'check_config',
    'prepare_cfg',
    'format_metrics',
    'shutdown_distributed',
    'sync_schedule',
    'skip_unreadable',
    'enable_tensorboard',
    'apply_global_batch',
    'GlobalBatchHook',
    'DnARunner',
    'SetupDumpFilter',
    'build_runner',
    'refuse_busy_work_dir',
]
