"""``Fp16CompresssionHook``: all-reduce DDP gradients in fp16 (MMDetection ``projects/ViTDet``).

The ViTDet reference config (``vitdet_mask-rcnn_vit-b-mae_lsj-100e.py``) ends with
``custom_hooks = [dict(type='Fp16CompresssionHook')]``; this is the same hook under the same
name (spelled as the reference spells it, so a reference config runs unchanged). Before
training it registers PyTorch's ``fp16_compress_hook`` as the communication hook of the
``DistributedDataParallel`` model: each gradient bucket ``g`` is cast to fp16, all-reduced and
divided by the world size, and cast back::

    g_i  <-  fp32( sum_ranks fp16(g_i) / world_size )

halving the bytes every step sends (the optimizer still sees fp32 gradients). A model not
wrapped in ``DistributedDataParallel`` is left alone, with one info line saying so.

Registered in MMEngine's root ``HOOKS`` (found from every scope), not in MMDetection's, where
``projects/ViTDet`` registers its own class of this name: both import in either order (theirs
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
    """Register torch's ``fp16_compress_hook`` on the runner's DDP model before training (module
    docstring). No arguments."""

    priority = 'NORMAL'

    def before_train(self, runner: Any) -> None:
        model, kind = runner.model, type(runner.model).__name__
        if isinstance(model, DistributedDataParallel):  # incl. mmengine's MMDistributedDataParallel
            model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
            what = f'DDP gradients are all-reduced in fp16 (torch fp16_compress_hook, {kind})'
        else:
            what = (
                f'the model is not wrapped in DistributedDataParallel ({kind}); gradients are not compressed'
            )
        runner.logger.info(f'{NAME}: {what}')


if NAME not in HOOKS.module_dict:  # another package's root hook of this name is kept
    HOOKS.register_module(name=NAME, module=Fp16CompresssionHook)
