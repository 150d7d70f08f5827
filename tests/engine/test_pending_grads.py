"""A checkpoint written between two optimizer steps of gradient accumulation keeps the gradients
of the passes since the last step, and a run resumed from it ends with the weights of the run
never stopped; a checkpoint written during validation keeps the training's random state.

Real ``DnARunner`` runs (:mod:`toy_runner`: SGD with momentum, a step schedule, the resumable
iteration loop and dna_mm's checkpoint hooks) in this process."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import free_port
from toy_runner import toy_runner, weights

from dna_mm.checkpoint import read_checkpoint
from dna_mm.engine import PendingGradsHook, RNGStateHook
from dna_mm.engine.global_batch import LAYOUT_KEY
from dna_mm.engine.pending_grads import PENDING_KEY

VALUES = [1.5, 2.0, 0.5, 3.0, 1.2, 0.8, 2.5, 1.1, 0.9]  # 9 iterations: 3 steps of 3 passes


def _resume_from(tmp_path, name: str, saved, hooks: list) -> torch.Tensor:
    """The weights at the end of a run resumed from the checkpoint ``saved``."""
    work = tmp_path / name
    work.mkdir()
    shutil.copy(saved, work / saved.name)
    (work / 'last_checkpoint').write_text(str(work / saved.name))
    runner = toy_runner(work, VALUES, hooks=hooks, resume=True, accumulate=3, checkpoint_interval=100)
    runner.train()
    return weights(runner), '\n'.join(p.read_text() for p in work.glob('*/*.log'))


@pytest.mark.parametrize('at', [4, 8], ids=['1 pass into a step', '2 passes into a step'])
def test_a_resume_between_two_steps_ends_with_the_uninterrupted_weights(tmp_path, at: int) -> None:
    hooks = [dict(type='PendingGradsHook')]
    full = toy_runner(tmp_path / 'full', VALUES, hooks=hooks, accumulate=3, checkpoint_interval=at)
    full.train()
    saved = tmp_path / 'full' / f'iter_{at}.pth'
    checkpoint = read_checkpoint(str(saved))
    assert set(checkpoint[PENDING_KEY]) == {'w'} and checkpoint['meta']['iter'] == at
    resumed, log = _resume_from(tmp_path, 'resumed', saved, hooks)
    assert torch.equal(resumed, weights(full)), (resumed, weights(full))
    assert f'resume: iteration {at} is {at % 3} backward pass' in log
    assert 'Resumed iteration number is not divisible' not in log  # mmengine's "lost": not so now

    # the same checkpoint without its pending gradients: the comparison can fail
    del checkpoint[PENDING_KEY]
    torch.save(checkpoint, tmp_path / saved.name)
    blind, _ = _resume_from(tmp_path, 'blind', tmp_path / saved.name, hooks)
    assert not torch.allclose(blind, weights(full))


def test_pending_gradients_of_another_accumulation_are_dropped_with_a_warning(tmp_path) -> None:
    """Saved 1 pass into a step of 3 (1/3 of each loss), resumed with steps of 2
    (``--global-batch``): added to a step of 2 they would weigh 1/3 where its passes weigh 1/2.
    They are dropped, with one warning, and the run goes on as from a checkpoint without them."""
    hooks = [dict(type='PendingGradsHook')]
    toy_runner(tmp_path / 'full', VALUES, hooks=hooks, accumulate=3, checkpoint_interval=4).train()
    saved = tmp_path / 'full' / 'iter_4.pth'
    assert read_checkpoint(str(saved))['meta'][LAYOUT_KEY]['accumulative_counts'] == 3

    def resume(name: str, checkpoint) -> tuple[torch.Tensor, str]:
        runner = toy_runner(
            tmp_path / name, VALUES, hooks=hooks, accumulate=2, resume=True, load_from=checkpoint
        )
        runner.train()
        return weights(runner), (Path(runner.log_dir) / f'{runner.timestamp}.log').read_text()

    dropped, log = resume('dropped', str(saved))
    lines = [line for line in log.splitlines() if 'do not fit' in line]
    assert len(lines) == 1 and 'WARNING' in lines[0], log
    assert (
        'the gradients pending in the checkpoint (1 sample into a step of 1 process x 1 clip x 3 '
        'accumulation steps) do not fit a step of 1 process x 1 clip x 2 accumulation steps' in lines[0]
    )
    assert 'they are dropped; 1 sample counts in no optimizer step' in lines[0]
    assert 'given back' not in log
    checkpoint = read_checkpoint(str(saved))
    del checkpoint[PENDING_KEY]
    torch.save(checkpoint, tmp_path / 'blind.pth')
    blind, _ = resume('blind', str(tmp_path / 'blind.pth'))
    assert torch.equal(dropped, blind)


def test_a_checkpoint_at_a_step_holds_no_gradients_and_weights_only_start_anew(tmp_path) -> None:
    hooks = [dict(type='PendingGradsHook')]
    full = toy_runner(tmp_path / 'full', VALUES, hooks=hooks, accumulate=3, checkpoint_interval=3)
    full.train()
    assert PENDING_KEY not in read_checkpoint(str(tmp_path / 'full' / 'iter_3.pth'))
    with_grads = toy_runner(tmp_path / 'mid', VALUES, hooks=hooks, accumulate=3, checkpoint_interval=4)
    with_grads.train()
    fresh = toy_runner(tmp_path / 'fresh', VALUES, hooks=hooks, accumulate=3)
    fresh.load_checkpoint(str(tmp_path / 'mid' / 'iter_4.pth'))  # load_from: weights, iteration 0
    hook = next(h for h in fresh.hooks if isinstance(h, PendingGradsHook))
    hook.before_train(fresh)
    assert getattr(fresh.model, 'module', fresh.model).w.grad is None


def test_a_checkpoint_written_during_validation_keeps_the_training_random_state(tmp_path) -> None:
    """mmengine's CheckpointHook writes the checkpoint again after a validation with ``save_best``:
    the state saved is the one validation puts back when it ends, not the one it left."""
    runner = toy_runner(tmp_path, VALUES)
    hook = next(h for h in runner.hooks if isinstance(h, RNGStateHook))
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    hook.before_val(runner)
    training = torch.get_rng_state()
    torch.rand(5), random.random(), np.random.rand()  # what validation draws
    checkpoint: dict = {}
    hook.before_save_checkpoint(runner, checkpoint)
    assert torch.equal(checkpoint['rng_state']['state']['torch'], training)
    hook.after_val(runner)
    later: dict = {}
    hook.before_save_checkpoint(runner, later)  # outside validation: the state as it is
    assert torch.equal(later['rng_state']['state']['torch'], torch.get_rng_state())


def _rank(rank: int, port: int, out: str) -> None:
    """One of two gloo ranks (DDP; each rank its own share of the pending gradients): the run
    never stopped, then a run resumed from its checkpoint 1 pass into a step; rank 0 records the
    weights of each."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE='2')
    os.environ.update(LOCAL_RANK=str(rank), OMP_NUM_THREADS='1')
    import torch.distributed as dist

    import dna_mm  # noqa: F401

    dist.init_process_group('gloo')
    try:
        values = VALUES * 2  # DefaultSampler: rank r takes samples r, r + 2, ...: 9 iterations each
        hooks = [dict(type='PendingGradsHook')]
        full = toy_runner(
            f'{out}/full', values, hooks=hooks, accumulate=3, checkpoint_interval=4, launcher='pytorch'
        )
        full.train()
        dist.barrier()
        if rank == 0:
            os.makedirs(f'{out}/resumed')
            shutil.copy(f'{out}/full/iter_4.pth', f'{out}/resumed/iter_4.pth')
            Path(f'{out}/resumed/last_checkpoint').write_text(f'{out}/resumed/iter_4.pth')
        dist.barrier()
        resumed = toy_runner(
            f'{out}/resumed', values, hooks=hooks, accumulate=3, resume=True, launcher='pytorch'
        )
        resumed.train()
        if rank == 0:
            torch.save(dict(full=weights(full), resumed=weights(resumed)), f'{out}/weights.pth')
    finally:
        dist.barrier()
        dist.destroy_process_group()


@pytest.mark.slow  # two processes importing the stack: ~15 s on 2 idle cores
def test_two_ranks_resumed_between_two_steps_end_with_the_uninterrupted_weights(tmp_path) -> None:
    torch.multiprocessing.spawn(_rank, args=(free_port(), str(tmp_path)), nprocs=2)
    assert PENDING_KEY in read_checkpoint(str(tmp_path / 'full' / 'iter_4.pth'))
    seen = torch.load(tmp_path / 'weights.pth', weights_only=True)
    assert torch.equal(seen['resumed'], seen['full']), seen
