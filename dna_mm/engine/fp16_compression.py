"""``Fp16CompresssionHook``: all-reduce DDP gradients in fp16 (MMDetection ``projects/ViTDet``).

The ViTDet reference config (``vitdet_mask-rcnn_vit-b-mae_lsj-100e.py``) ends with
``custom_hooks = [dict(type='Fp16CompresssionHook')]``; this is the same hook under the same
name (spelled as the reference spells it, so a reference config runs unchanged). Before
training it registers PyTorch's ``fp16_compress_hook`` as the communication hook of the
``DistributedDataParallel`` model: each gradient bucket ``g`` is cast to fp16, all-reduced and
divided by the world size, and cast back::

    g_i  <-  fp32( sum_ranks fp16(g_i) / world_size )

halving the bytes every step sends (the optimizer still sees fp32 gradients). A model that is
not wrapped in ``DistributedDataParallel`` (one process, or another wrapper) is left alone, with
one info line saying so.

Registered in MMEngine's root ``HOOKS`` (found from the ``mmdet`` scope and any other), not in
MMDetection's: MMDetection's own ``projects/ViTDet`` registers its class under this name in the
``mmdet`` registry, and both can then be imported in either order (its class, when imported,
takes precedence in the ``mmdet`` scope; the two do the same).
"""

from __future__ import annotations

from typing import Any

from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

NAME = 'Fp16CompresssionHook'  # three s: the reference's spelling


class Fp16CompresssionHook(Hook):
    """Register ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.fp16_compress_hook``
    on the runner's ``DistributedDataParallel`` model before training (see the module docstring).
    No arguments."""

    priority = 'NORMAL'

    def before_train(self, runner: Any) -> None:
        model = runner.model
        if isinstance(model, DistributedDataParallel):  # incl. mmengine's MMDistributedDataParallel
            model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
            runner.logger.info(
                f'{NAME}: DDP gradients are all-reduced in fp16 (torch fp16_compress_hook, '
                f'{type(model).__name__})'
            )
        else:
            runner.logger.info(
                f'{NAME}: the model is not wrapped in DistributedDataParallel '
                f'({type(model).__name__}); gradients are not compressed'
            )


if NAME not in HOOKS.module_dict:  # another package's root hook of this name is kept
    HOOKS.register_module(name=NAME, module=Fp16CompresssionHook)
