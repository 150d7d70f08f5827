"""Utilities: safe checkpoint loading."""
from .checkpoint import (UnsafeCheckpointError, allow_mmengine_globals, install as
                         install_safe_checkpoint_loading, load_checkpoint_file)

__all__ = ['UnsafeCheckpointError', 'allow_mmengine_globals', 'install_safe_checkpoint_loading',
           'load_checkpoint_file']
