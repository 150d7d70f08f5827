"""A run resumed on another number of ranks goes on where it stopped in samples seen: the next
epoch trained whole, its iteration count and its schedule converted to the new epoch length
(the lr of each optimizer step that of a run never stopped in that layout), and the gradients of
a half-done accumulation step given back where they are the same samples' at the same scale.

Real ``DnARunner`` runs (:mod:`toy_runner`): 10 samples of batch 1 an epoch, 3 epochs, the global
batch of 4 samples a step reached as 1 rank x 4 accumulation steps or 2 gloo ranks x 2; a warm-up
over epoch 1 and a step at epoch 2, both by epoch and converted to iterations (as the recipes'
schedules are). An epoch is 10 iterations on 1 rank and 5 on 2, and its end falls half-way
through an accumulation step in both: a checkpoint there holds pending gradients.

The model's loss is linear in its weights (``sum(w * log(x))``), so its gradients, and SGD's
momentum buffer, do not depend on the weights or the lr: the weights a resumed run adds to its
checkpoint's are the ones the run never stopped adds to its own ``epoch_1.pth`` when its steps
see the same samples with the same lr."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import free_port
from mmengine.hooks import Hook
from toy_runner import toy_runner, weights

from dna_mm.checkpoint import read_checkpoint
from dna_mm.engine.global_batch import LAYOUT_KEY
from dna_mm.engine.pending_grads import PENDING_KEY

#: two spawned processes importing the stack, and four short runs: ~20 s on 2 idle cores
pytestmark = pytest.mark.slow

VALUES = [1.5, 2.0, 0.5, 3.0, 1.2, 0.8, 2.5, 1.1, 0.9, 1.7]  # 10 samples an epoch
EPOCHS = 3


class StepLr(Hook):
    """Records ``(iteration, lr)`` at each optimizer step (before the schedule moves on)."""

    priority = 'HIGHEST'

    def __init__(self) -> None:
        self.steps: list[tuple[int, float]] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        wrapper = runner.optim_wrapper
        if (
            wrapper._inner_count % wrapper._accumulative_counts == 0
            or wrapper._inner_count == wrapper._max_counts
        ):
            self.steps.append((runner.iter + 1, wrapper.get_lr()['lr'][0]))


def _run(work_dir, ranks: int, resume_from=None):
    """A run of :data:`EPOCHS` epochs on ``ranks`` ranks (this process one of them), resumed from
    ``resume_from`` (copied into ``work_dir``) when given; the runner and its :class:`StepLr`."""
    work_dir = Path(work_dir)
    if resume_from is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(resume_from, work_dir / 'from.pth')
    lr = StepLr()
    runner = toy_runner(
        work_dir,
        VALUES,
        hooks=[dict(type='PendingGradsHook'), lr],
        accumulate=4 // ranks,
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1, by_epoch=True)),
        train_cfg=dict(type='ResumableEpochBasedTrainLoop', max_epochs=EPOCHS),
        param_scheduler=[
            dict(
                type='LinearLR', start_factor=0.2, by_epoch=True, begin=0, end=1, convert_to_iter_based=True
            ),
            dict(type='MultiStepLR', milestones=[2], gamma=0.1, by_epoch=True, convert_to_iter_based=True),
        ],
        launcher='none' if ranks == 1 else 'pytorch',
        resume=resume_from is not None,
        load_from=None if resume_from is None else str(work_dir / 'from.pth'),
    )
    runner.train()
    return runner, lr


def _record(runner, lr: StepLr) -> dict:
    log = '\n'.join(p.read_text() for p in Path(runner.work_dir).glob('*/*.log'))
    return dict(iter=runner.iter, steps=lr.steps, weights=weights(runner), log=log)


def _after(steps: list, it: int) -> list:
    return [(i, lr) for i, lr in steps if i > it]


def _two_ranks(rank: int, port: int, out: str) -> None:
    """Rank ``rank`` of 2 (gloo): the run never stopped, then the one resumed from the 1-rank
    run's ``epoch_1.pth``; rank 0 saves what each did."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE='2')
    os.environ.update(LOCAL_RANK=str(rank), OMP_NUM_THREADS='1')
    import torch.distributed as dist

    import dna_mm  # noqa: F401

    dist.init_process_group('gloo')
    try:
        full = _record(*_run(f'{out}/two', 2))
        dist.barrier()
        resumed = _record(*_run(f'{out}/one_to_two', 2, resume_from=f'{out}/one/epoch_1.pth'))
        if rank == 0:
            torch.save(dict(full=full, resumed=resumed), f'{out}/two_ranks.pth')
    finally:
        dist.barrier()
        dist.destroy_process_group()


@pytest.fixture(scope='module')
def runs(tmp_path_factory) -> dict:
    """The 1-rank run never stopped, and (two spawned ranks) the 2-rank one and the 2-rank run
    resumed from the 1-rank run's ``epoch_1.pth``."""
    out = tmp_path_factory.mktemp('layouts')
    one = _record(*_run(out / 'one', 1))
    torch.multiprocessing.spawn(_two_ranks, args=(free_port(), str(out)), nprocs=2)
    return dict(out=out, one=one, **torch.load(out / 'two_ranks.pth', weights_only=False))


def _added(record: dict, start: Path) -> torch.Tensor:
    """The weights a run added to those of the checkpoint ``start``."""
    return record['weights'] - read_checkpoint(str(start))['state_dict']['w']


def test_a_one_rank_run_resumed_on_two_trains_the_next_epoch_as_a_two_rank_run(runs) -> None:
    out, full, resumed = runs['out'], runs['full'], runs['resumed']
    saved = read_checkpoint(str(out / 'one' / 'epoch_1.pth'))
    assert saved['meta'][LAYOUT_KEY] == dict(
        world_size=1, batch_size=1, accumulative_counts=4, iters_per_epoch=10
    )
    assert PENDING_KEY in saved  # 10 passes: 2 into the third step
    assert resumed['iter'] == full['iter'] == EPOCHS * 5  # epochs 2 and 3 trained, 5 iterations each
    assert resumed['steps'] == _after(full['steps'], 5)  # the same steps, at the same lr
    assert (
        'resume: saved on 1 process x 1 clip x 4 accumulation steps (10 iterations an epoch)'
        in resumed['log']
    )
    assert 'iteration 10 is iteration 5 here' in resumed['log']
    assert 'their gradients are given back' in resumed['log']
    torch.testing.assert_close(
        _added(resumed, out / 'one' / 'epoch_1.pth'), _added(full, out / 'two' / 'epoch_1.pth')
    )


def test_a_two_rank_run_resumed_on_one_goes_on_without_a_second_warm_up(runs, tmp_path) -> None:
    out, one = runs['out'], runs['one']
    resumed = _record(*_run(tmp_path / 'two_to_one', 1, resume_from=out / 'two' / 'epoch_1.pth'))
    assert resumed['iter'] == one['iter'] == EPOCHS * 10
    assert resumed['steps'] == _after(one['steps'], 10)  # no warm-up again: the lr of the run never stopped
    assert "the config's settings replace" not in resumed['log']  # the same config: nothing changed
    assert 'iteration 5 is iteration 10 here' in resumed['log']
    assert 'resume: iteration 10 is 2 backward passes into an accumulation step' in resumed['log']
    torch.testing.assert_close(
        _added(resumed, out / 'two' / 'epoch_1.pth'), _added(one, out / 'one' / 'epoch_1.pth')
    )
