"""``AutoAmpOptimWrapper``: mixed precision where CUDA is available, a plain optimizer elsewhere.

MMEngine's ``AmpOptimWrapper`` asserts a GPU at construction, so a config that asks for AMP
cannot run on a CPU machine. This wrapper type lets one config serve both::

    optim_wrapper = dict(type='AutoAmpOptimWrapper', optimizer=dict(type='SGD', lr=0.005))

On CUDA it builds ``AmpOptimWrapper`` (``loss_scale``, ``dtype`` and ``use_fsdp`` honoured);
elsewhere ``OptimWrapper`` (those keys dropped).
"""

from __future__ import annotations

import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS

AMP_ONLY_KEYS = ('loss_scale', 'dtype', 'use_fsdp')


@OPTIM_WRAPPERS.register_module(name='AutoAmpOptimWrapper')
def auto_amp_optim_wrapper(**kwargs) -> OptimWrapper:
    """``AmpOptimWrapper(**kwargs)`` on CUDA, else ``OptimWrapper`` without the AMP keys."""
    if torch.cuda.is_available():
        return AmpOptimWrapper(**kwargs)
    return OptimWrapper(**{k: v for k, v in kwargs.items() if k not in AMP_ONLY_KEYS})
