"""Inference with a trained recognizer, as MMAction2's ``apis`` means it: load a recognizer from
a config and checkpoint, predict a video's classes (:mod:`.inference`), extract its features
(:mod:`.features`)."""

from importlib import import_module
from typing import Any

from .inference import Prediction, load_recognizer, predict, resolve_class_names, test_pipeline_of

__all__ = ['Prediction', 'load_recognizer', 'predict', 'resolve_class_names', 'test_pipeline_of']

#: names this package exported before the training runtime and the config helpers moved
#: (removed in the next release)
_MOVED = {
    **dict.fromkeys(
        (
            'check_config',
            'prepare_cfg',
            'format_metrics',
            'shutdown_distributed',
            'sync_schedule',
            'skip_unreadable',
            'enable_tensorboard',
        ),
        'dna_mm.config',
    ),
    **dict.fromkeys(
        (
            'DnARunner',
            'SetupDumpFilter',
            'build_runner',
            'refuse_busy_work_dir',
            'GlobalBatchHook',
            'apply_global_batch',
        ),
        'dna_mm.engine',
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    from .._moved import warn_moved

    warn_moved(f'{__name__}.{name}', f'{_MOVED[name]}.{name}')
    return getattr(import_module(_MOVED[name]), name)
