"""Utilities: safe checkpoint loading (every mmengine scheme) and whole-model load checks."""

from .checkpoint import (
    CheckpointMismatchError,
    CorruptCheckpointError,
    NotACheckpointError,
    StateDictReport,
    UnreadableCheckpointError,
    UnsafeCheckpointError,
    allow_mmengine_globals,
    apply_load_pre_hooks,
    compare_state_dict,
    load_checkpoint_file,
    load_model_weights,
    read_checkpoint,
    safe_torch_load,
)
from .checkpoint import install as install_safe_checkpoint_loading

__all__ = [
    'UnsafeCheckpointError',
    'CheckpointMismatchError',
    'UnreadableCheckpointError',
    'NotACheckpointError',
    'CorruptCheckpointError',
    'StateDictReport',
    'allow_mmengine_globals',
    'install_safe_checkpoint_loading',
    'load_checkpoint_file',
    'read_checkpoint',
    'safe_torch_load',
    'apply_load_pre_hooks',
    'compare_state_dict',
    'load_model_weights',
]
