"""``Fp16CompresssionHook`` (MMDetection ``projects/ViTDet``'s name): in a real 2-process gloo run
the DDP gradients are all-reduced in fp16; without DDP it only says so.

The gradient ``1 + 2**-12`` is exact in fp32 and rounds to ``1`` in fp16, so one SGD step
(lr 1, from 0) leaves ``-(1 + 2**-12)`` with fp32 communication and ``-1`` with the hook.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch
from conftest import free_port
from mmengine.config import Config
from torch.utils.data import Dataset

GRAD = 1.0 + 2.0**-12  # fp32: exact; fp16: 1.0


class _Ones(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> dict:
        return dict(inputs=torch.ones(1))


def _model():
    from mmengine.model import BaseModel

    class Toy(BaseModel):
        """``loss = GRAD · sum(w)``: every gradient is ``GRAD``."""

        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(8))

        def forward(self, inputs, data_samples=None, mode='loss'):
            return dict(loss=(self.w * GRAD).sum() * inputs.mean())

    return Toy()


def _runner(work_dir: str, hooks: list, launcher: str = 'none'):
    from mmengine.runner import Runner

    wrapper = None if launcher == 'none' else dict(type='MMDistributedDataParallel', device_ids=None)
    return Runner(
        model=_model(),
        work_dir=work_dir,
        train_dataloader=dict(
            dataset=_Ones(),
            sampler=dict(type='DefaultSampler', shuffle=False),
            collate_fn=dict(type='default_collate'),
            batch_size=1,
            num_workers=0,
        ),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=1.0)),
        train_cfg=dict(by_epoch=False, max_iters=1),
        default_hooks=dict(checkpoint=None, logger=dict(type='LoggerHook', interval=1)),
        custom_hooks=hooks,
        launcher=launcher,
        env_cfg=dict(dist_cfg=dict(backend='gloo')),
        default_scope='mmengine',  # the hook is in the root registry: found from any scope
        # mmengine reads the wrapper from the config; on CPU: no device_ids (as
        # dna_mm.config.prepare_cfg sets for distributed runs without CUDA)
        cfg=Config(dict(default_scope='mmengine', model_wrapper_cfg=wrapper)),
        experiment_name=f'fp16_{launcher}_{len(hooks)}_{os.getpid()}',
    )


def _worker(rank: int, port: int, out: str) -> None:
    """One rank: a run without the hook, then one with it (each a fresh Runner and DDP model)."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE='2')
    os.environ.update(LOCAL_RANK=str(rank), OMP_NUM_THREADS='1')
    import torch.distributed as dist

    import dna_mm  # noqa: F401  (registers the hook)

    dist.init_process_group('gloo')  # what tools/train.py does without CUDA (env://)
    try:
        for compress in (False, True):
            hooks = [dict(type='Fp16CompresssionHook')] if compress else []
            runner = _runner(f'{out}/work_{compress}', hooks, launcher='pytorch')
            runner.train()
            model = runner.model
            state = dict(w=model.module.w.detach().clone(), wrapper=type(model).__name__)
            torch.save(state, f'{out}/rank{rank}_{compress}.pt')
    finally:
        dist.barrier()
        dist.destroy_process_group()


@pytest.mark.slow  # two processes importing the stack: ~15 s idle, more on a shared machine
def test_ddp_gradients_are_reduced_in_fp16_with_the_hook(tmp_path: Path) -> None:
    torch.multiprocessing.spawn(_worker, args=(free_port(), str(tmp_path)), nprocs=2)
    for compress in (False, True):
        expected = -1.0 if compress else -GRAD
        for rank in (0, 1):
            result = torch.load(tmp_path / f'rank{rank}_{compress}.pt', weights_only=True)
            assert result['wrapper'] == 'MMDistributedDataParallel'
            assert torch.equal(result['w'], torch.full((8,), expected)), (compress, result['w'])
        logs = '\n'.join(p.read_text() for p in (tmp_path / f'work_{compress}').rglob('*.log'))
        said = 'Fp16CompresssionHook: DDP gradients are all-reduced in fp16' in logs
        assert said == compress, logs[-2000:]


def test_without_ddp_the_hook_only_says_so(tmp_path: Path, caplog) -> None:
    from mmdet.registry import HOOKS as MMDET_HOOKS

    import dna_mm  # noqa: F401
    from dna_mm.engine import Fp16CompresssionHook

    assert MMDET_HOOKS.get('Fp16CompresssionHook') is Fp16CompresssionHook  # found from mmdet's scope
    runner = _runner(str(tmp_path), [dict(type='Fp16CompresssionHook')])
    with caplog.at_level(logging.INFO):
        runner.train()
    assert not isinstance(runner.model, torch.nn.parallel.DistributedDataParallel)
    logs = next(tmp_path.rglob('*.log')).read_text()
    assert 'Fp16CompresssionHook: the model is not wrapped in DistributedDataParallel (Toy)' in logs
    assert torch.equal(runner.model.w.detach(), torch.full((8,), -GRAD))  # fp32, untouched


def test_the_lsj_configs_use_the_hook() -> None:
    root = Path(__file__).resolve().parents[2] / 'configs'
    for name in ('vitdet_dna_coco_lsj.py', 'vitdet_softmax_coco_lsj.py'):
        assert dict(type='Fp16CompresssionHook') in Config.fromfile(str(root / name)).custom_hooks, name
