"""Training-engine pieces registered with MMEngine (optimizer wrappers, hooks)."""

from .hooks import AlphaLoggerHook
from .optim_wrapper import auto_amp_optim_wrapper

__all__ = ["auto_amp_optim_wrapper", "AlphaLoggerHook"]
