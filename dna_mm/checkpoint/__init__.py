"""Checkpoint loading, one job per module: what a file may contain (:mod:`.policy`), how a name
becomes its contents (:mod:`.sources`), the strict whole-model load (:mod:`.loading`).

    from dna_mm.checkpoint import load_whole_model, read_checkpoint
    report = load_whole_model(model, 'work_dirs/x/epoch_15.pth')  # strict; report.layout
"""

from ..errors import (
    CheckpointMismatchError,
    CorruptCheckpointError,
    NotACheckpointError,
    UnreadableCheckpointError,
    UnsafeCheckpointError,
)
from .loading import StateDictReport, compare_state_dict, load_whole_model
from .policy import ALLOWED_GLOBALS, weights_only_loads
from .sources import install, read_checkpoint, weights_only

__all__ = [
    'ALLOWED_GLOBALS',
    'CheckpointMismatchError',
    'CorruptCheckpointError',
    'NotACheckpointError',
    'StateDictReport',
    'UnreadableCheckpointError',
    'UnsafeCheckpointError',
    'compare_state_dict',
    'install',
    'load_whole_model',
    'read_checkpoint',
    'weights_only',
    'weights_only_loads',
]
