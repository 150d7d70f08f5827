"""Training-engine pieces registered with MMEngine (optimizer wrappers, hooks, loops)."""

from .atomic_files import CheckpointWriteError
from .checkpoint_hook import AtomicCheckpointHook
from .fp16_compression import Fp16CompresssionHook
from .hooks import AlphaLoggerHook
from .loops import ResumableEpochBasedTrainLoop, ResumableIterBasedTrainLoop
from .non_finite import NonFiniteLossError, NonFiniteLossHook
from .optim_wrapper import auto_amp_optim_wrapper
from .preemption import Preempted, PreemptionHook
from .rng_state import RNGStateHook
from .test_loop import UnreadableVideosTestLoop
from .work_dir_lock import WorkDirBusyError, WorkDirLock

__all__ = [
    "auto_amp_optim_wrapper",
    "AlphaLoggerHook",
    "AtomicCheckpointHook",
    "CheckpointWriteError",
    "Fp16CompresssionHook",
    "NonFiniteLossError",
    "NonFiniteLossHook",
    "Preempted",
    "PreemptionHook",
    "RNGStateHook",
    "ResumableEpochBasedTrainLoop",
    "ResumableIterBasedTrainLoop",
    "UnreadableVideosTestLoop",
    "WorkDirBusyError",
    "WorkDirLock",
]
