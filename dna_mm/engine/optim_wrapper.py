"""``AutoAmpOptimWrapper``: the project's one mixed-precision rule, chosen by the device.

=========================================  =================================================
device                                     what ``AutoAmpOptimWrapper`` builds
=========================================  =================================================
CUDA, compute capability >= 8.0            MMEngine ``AmpOptimWrapper``: bf16 autocast, no
(A100, A10, L4, RTX 30 / 40, H100, ...)    loss scaling (``loss_scale=dict(enabled=False)``)
CUDA, older (V100, T4, RTX 20, ...)        MMEngine ``AmpOptimWrapper``: fp16 autocast and a
                                           dynamic ``GradScaler`` (``loss_scale='dynamic'``)
no CUDA (CPU)                              MMEngine ``OptimWrapper``: full precision (the AMP
                                           keys are dropped)
=========================================  =================================================

bf16 has fp32's exponent range, so small gradients do not flush to zero and need no scaling;
fp16 has 5 exponent bits, so its gradients are scaled up by a ``GradScaler`` (and a step whose
scaled gradients overflow is skipped). Where the GPU computes bf16 natively (sm80 and newer)
bf16 is used; older GPUs would only emulate it, so they get fp16 + ``GradScaler``.

A config overrides the rule key by key (what it sets wins: ``dtype='float16'``, as the ViTDet
schedules do since mmcv's RoIAlign has no bf16; ``loss_scale=512.0``), and
``type='OptimWrapper'`` is full precision everywhere. MMEngine's ``AmpOptimWrapper`` asserts a
GPU at construction, hence the CPU branch: one config serves a GPU run and a CPU smoke run. See
``docs/mixed_precision.md``.

bf16 and MMAction2's heads: ``BaseHead.loss_by_feat`` logs the top-k accuracy through NumPy,
which has no bf16; this module (imported by ``import dna_mm``) wraps it to hand bf16 scores
over as fp32 (:func:`fp32_head_scores`; autocast computes the cross-entropy in fp32 anyway).
"""

from __future__ import annotations

import functools
from typing import Optional, Union

import torch
from mmengine.logging import print_log
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS

AMP_ONLY_KEYS = ('loss_scale', 'dtype', 'use_fsdp')
#: first compute capability with native bf16 arithmetic (Ampere)
BF16_CAPABILITY = (8, 0)
#: ``loss_scale`` without loss scaling: a disabled ``GradScaler`` passes losses and steps unchanged
NO_LOSS_SCALE = dict(enabled=False)


def amp_settings(
    capability: Optional[tuple[int, int]], dtype: Union[str, torch.dtype, None] = None, **given
) -> dict:
    """The AMP keys of ``AmpOptimWrapper`` for a CUDA device of compute ``capability``.

    ``dtype``: the config's choice, else ``'bfloat16'`` from :data:`BF16_CAPABILITY` on and
    ``'float16'`` below it; ``loss_scale``: the config's (in ``given``), else ``'dynamic'`` for
    fp16 and :data:`NO_LOSS_SCALE` for any other dtype. Other keys in ``given`` (``use_fsdp``)
    are passed on. ``capability=None`` (no GPU) gives ``{}``: no AMP.
    """
    if capability is None:
        return {}
    if dtype is None:
        dtype = 'bfloat16' if tuple(capability) >= BF16_CAPABILITY else 'float16'
    name = str(dtype).replace('torch.', '')
    loss_scale = given.pop('loss_scale', 'dynamic' if name == 'float16' else NO_LOSS_SCALE)
    return dict(
        given, dtype=name, loss_scale=dict(loss_scale) if isinstance(loss_scale, dict) else loss_scale
    )


@OPTIM_WRAPPERS.register_module(name='AutoAmpOptimWrapper')
def auto_amp_optim_wrapper(**kwargs) -> OptimWrapper:
    """``AmpOptimWrapper`` with :func:`amp_settings` on CUDA, else ``OptimWrapper`` without the
    AMP keys (see the module docstring for the rule)."""
    capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    wrapper_kwargs = {k: v for k, v in kwargs.items() if k not in AMP_ONLY_KEYS}
    if capability is None:
        print_log('AMP: no CUDA device, full precision (OptimWrapper)', logger='current')
        return OptimWrapper(**wrapper_kwargs)
    amp = amp_settings(capability, **{k: v for k, v in kwargs.items() if k in AMP_ONLY_KEYS})
    scaled = amp['loss_scale'] != NO_LOSS_SCALE
    print_log(
        f'AMP: {amp["dtype"]} autocast, {"a GradScaler" if scaled else "no loss scaling"} '
        f'(compute capability {capability[0]}.{capability[1]})',
        logger='current',
    )
    return AmpOptimWrapper(**wrapper_kwargs, **amp)


def fp32_head_scores() -> None:
    """Wrap MMAction2's ``BaseHead.loss_by_feat`` so that bf16 class scores reach it as fp32
    (see the module docstring); other dtypes pass unchanged. Idempotent."""
    from mmaction.models.heads.base import BaseHead

    original = BaseHead.loss_by_feat
    if getattr(original, 'fp32_scores', False):
        return

    @functools.wraps(original)
    def loss_by_feat(self, cls_scores: torch.Tensor, data_samples, **kwargs) -> dict:
        if cls_scores.dtype == torch.bfloat16:
            cls_scores = cls_scores.float()
        return original(self, cls_scores, data_samples, **kwargs)

    loss_by_feat.fp32_scores = True  # type: ignore[attr-defined]
    BaseHead.loss_by_feat = loss_by_feat


fp32_head_scores()
