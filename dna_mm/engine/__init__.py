"""The training runtime: :class:`~.runner.DnARunner` and its set-up (:mod:`.distributed`: ranks,
their timeouts and ends; :mod:`.global_batch`), with the pieces it runs, registered with MMEngine:
loops, hooks, optimizer wrappers, layer decay, checkpoints written whole, loader workers ended on
every path."""

from .accumulated_schedule import AccumulatedScheduleHook
from .atomic_files import CheckpointWriteError
from .checkpoint_hook import AtomicCheckpointHook
from .fp16_compression import Fp16CompresssionHook
from .global_batch import GlobalBatchHook, apply_global_batch
from .hooks import AlphaLoggerHook
from .loops import ResumableEpochBasedTrainLoop, ResumableIterBasedTrainLoop
from .non_finite import NonFiniteLossError, NonFiniteLossHook
from .optim_wrapper import auto_amp_optim_wrapper
from .pending_grads import PendingGradsHook
from .preemption import Preempted, PreemptionHook
from .rng_state import RNGStateHook
from .runner import DnARunner, SetupDumpFilter, build_runner, refuse_busy_work_dir
from .test_loop import ResumableTestLoop, UnreadableVideosTestLoop
from .work_dir_lock import WorkDirBusyError, WorkDirLock

__all__ = [
    "DnARunner",
    "SetupDumpFilter",
    "build_runner",
    "refuse_busy_work_dir",
    "GlobalBatchHook",
    "apply_global_batch",
    "auto_amp_optim_wrapper",
    "AccumulatedScheduleHook",
    "AlphaLoggerHook",
    "AtomicCheckpointHook",
    "CheckpointWriteError",
    "Fp16CompresssionHook",
    "NonFiniteLossError",
    "NonFiniteLossHook",
    "PendingGradsHook",
    "Preempted",
    "PreemptionHook",
    "RNGStateHook",
    "ResumableEpochBasedTrainLoop",
    "ResumableIterBasedTrainLoop",
    "ResumableTestLoop",
    "UnreadableVideosTestLoop",
    "WorkDirBusyError",
    "WorkDirLock",
]
