"""A run's config: read and built into its model (:mod:`.build`, the one config → model home),
prepared for the tools' flags (:mod:`.prepare`: work dir, AMP, schedule, TensorBoard, the metrics
line) and checked before anything is built (:mod:`.check`: one line per problem, naming its key)."""

from .build import build_part, clear_pretrained_weights, default_scope, read_config
from .check import check_config
from .model import model_from_config
from .prepare import (
    enable_tensorboard,
    format_metrics,
    make_work_dir,
    prepare_cfg,
    shutdown_distributed,
    skip_unreadable,
    sync_schedule,
)

__all__ = [
    'read_config',
    'build_part',
    'model_from_config',
    'default_scope',
    'clear_pretrained_weights',
    'check_config',
    'prepare_cfg',
    'make_work_dir',
    'format_metrics',
    'shutdown_distributed',
    'sync_schedule',
    'skip_unreadable',
    'enable_tensorboard',
]
