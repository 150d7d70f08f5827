"""A seconds-long in-process training run for the fault tests: ``DnARunner`` on a model of a few
weights, whose loss is ``sum(w * log(x))`` over the batch's values ``x``, so a batch with a
negative value makes a real NaN loss (and NaN gradients) and a positive one a finite step."""

from __future__ import annotations

import itertools
import os
from typing import Optional, Sequence

import torch
from mmengine.config import Config
from mmengine.model import BaseModel
from torch.utils.data import Dataset

_RUNS = itertools.count()


class Values(Dataset):
    """One sample per value: ``dict(inputs=tensor([v] * 4))``."""

    def __init__(self, values: Sequence[float]) -> None:
        self.values = list(values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> dict:
        return dict(inputs=torch.full((4,), float(self.values[i])))


class LogModel(BaseModel):
    """``loss = sum(w * log(x))`` (NaN for ``x < 0``). ``norm=True``: ``log(x)`` also passes a
    ``BatchNorm1d`` (whose running statistics take in a NaN batch); ``linear=True``: a 4 x 4
    ``Linear`` (a matrix product, which autocast runs in fp16)."""

    def __init__(self, norm: bool = False, linear: bool = False) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.0, 4))
        self.norm = torch.nn.BatchNorm1d(1) if norm else None
        self.linear = torch.nn.Linear(4, 4) if linear else None

    def forward(self, inputs, data_samples=None, mode='loss'):
        x = torch.log(inputs)
        if self.norm is not None:  # the batch's values as the samples of one channel
            x = self.norm(x.reshape(-1, 1)).reshape(x.shape) + x
        if self.linear is not None:
            x = self.linear(x)
        return dict(loss=(self.w * x).sum())


def toy_runner(
    work_dir,
    values: Sequence[float],
    max_iters: Optional[int] = None,
    hooks: Optional[list] = None,
    default_hooks: Optional[dict] = None,
    resume: bool = False,
    norm: bool = False,
    linear: bool = False,
    checkpoint_interval: int = 100,
    launcher: str = 'none',
    accumulate: int = 1,
    optimizer: Optional[dict] = None,
    param_scheduler: Optional[list] = None,
    train_cfg: Optional[dict] = None,
    rng_hook: bool = True,
    load_from: Optional[str] = None,
):
    """A ``DnARunner`` on :class:`LogModel` over ``values`` (batch 1, in order), SGD with momentum
    and a step schedule (state to save), iteration-based (``ResumableIterBasedTrainLoop``) with a
    checkpoint every ``checkpoint_interval`` iterations and dna_mm's default fault hooks;
    ``launcher='pytorch'``: a rank of a gloo group already started (DDP without device ids);
    ``accumulate``: the optimizer steps after every ``accumulate``-th backward pass;
    ``optimizer``, ``param_scheduler``, ``train_cfg``: others than that SGD, step schedule and
    loop; ``rng_hook=False``: no ``RNGStateHook`` (a config of dna_mm 0.1.0, whose runner added it);
    ``load_from`` with ``resume=True``: resume from that file."""
    from dna_mm.engine import DnARunner

    hooks_cfg = dict(
        checkpoint=dict(type='CheckpointHook', interval=checkpoint_interval, by_epoch=False),
        logger=dict(type='LoggerHook', interval=1),
        preemption=dict(type='PreemptionHook'),
        non_finite=dict(type='NonFiniteLossHook'),
    )
    hooks_cfg.update(default_hooks or {})
    wrapper = None if launcher == 'none' else dict(type='MMDistributedDataParallel', device_ids=None)
    return DnARunner(
        model=LogModel(norm=norm, linear=linear),
        work_dir=str(work_dir),
        train_dataloader=dict(
            dataset=Values(values),
            sampler=dict(type='DefaultSampler', shuffle=False),
            collate_fn=dict(type='default_collate'),
            batch_size=1,
            num_workers=0,
        ),
        optim_wrapper=dict(
            optimizer=optimizer or dict(type='SGD', lr=0.1, momentum=0.9), accumulative_counts=accumulate
        ),
        param_scheduler=param_scheduler or dict(type='StepLR', step_size=3, gamma=0.5, by_epoch=False),
        train_cfg=train_cfg or dict(type='ResumableIterBasedTrainLoop', max_iters=max_iters or len(values)),
        default_hooks=hooks_cfg,
        custom_hooks=[*([dict(type='RNGStateHook')] if rng_hook else []), *(hooks or [])],
        resume=resume,
        load_from=load_from,
        launcher=launcher,
        env_cfg=dict(dist_cfg=dict(backend='gloo')),
        default_scope='mmengine',  # dna_mm's hooks and loops are in the root registries
        cfg=Config(dict(default_scope='mmengine', model_wrapper_cfg=wrapper)),
        experiment_name=f'toy_{os.getpid()}_{next(_RUNS)}',
        randomness=dict(seed=0),
    )


def weights(runner) -> torch.Tensor:
    model = getattr(runner.model, 'module', runner.model)
    return model.w.detach().clone()
