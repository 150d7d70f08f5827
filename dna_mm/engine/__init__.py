"""Training-engine pieces registered with MMEngine (optimizer wrappers, hooks, loops)."""

from .fp16_compression import Fp16CompresssionHook
from .hooks import AlphaLoggerHook
from .loops import ResumableEpochBasedTrainLoop, ResumableIterBasedTrainLoop
from .optim_wrapper import auto_amp_optim_wrapper
from .rng_state import RNGStateHook
from .test_loop import UnreadableVideosTestLoop

__all__ = [
    "auto_amp_optim_wrapper",
    "AlphaLoggerHook",
    "Fp16CompresssionHook",
    "RNGStateHook",
    "ResumableEpochBasedTrainLoop",
    "ResumableIterBasedTrainLoop",
    "UnreadableVideosTestLoop",
]
