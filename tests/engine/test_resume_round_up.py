"""``DefaultSampler(round_up=False)`` pads nothing: rank ``r`` of ``W`` gets ``ceil((N - r) / W)``
of ``N`` samples, so 11 samples on 2 ranks of 1 make passes of 6 iterations on rank 0 and 5 on
rank 1. An iteration-based run goes on with each rank in its own passes (rank 1 a sample further
ahead at each pass): no iteration of another layout holds the samples it has seen.

* Resumed in the same layout, each rank goes on where it stood, as a run never stopped does (each
  rank converted its iteration by its own pass length before: rank 1 went on at iteration 5, rank
  0 at 6, and the run hung at its end).
* Resumed in another layout with such passes on either side, it is refused in one line before
  anything trains (before: 2 ranks resumed on 1 trained a sample again unreported, 1 rank resumed
  on 2 skipped one on rank 1 and hung).
* An epoch-based run with such epochs is refused when its loop is built (before: it hung at its
  first collective call after rank 1's epoch ended).
* Where every rank's pass is as long (11 samples on 2 ranks of 2: 3 iterations each, rank 1's
  last batch of 1), a resume in another layout converts exactly, as with padding.

Real ``DnARunner`` runs (:mod:`toy_runner`): 2 gloo ranks spawned, and 1 process."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from conftest import free_port
from mmengine.dataset import DefaultSampler
from mmengine.hooks import Hook
from toy_runner import toy_runner

from dna_mm.checkpoint import read_checkpoint
from dna_mm.engine.global_batch import LAYOUT_KEY, uneven_passes
from dna_mm.errors import UserError

VALUES = [round(1.0 + 0.1 * i, 1) for i in range(11)]  # shuffle=False: a pass is 1.0 ... 2.0
EPOCHS = dict(type='ResumableEpochBasedTrainLoop', max_epochs=2)


class Trained(Hook):
    """The values of each batch a run trains."""

    def __init__(self) -> None:
        self.batches: list[list[float]] = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.batches.append([round(float(x), 1) for x in data_batch['inputs'][:, 0]])


def _run(
    work_dir, batch: int, max_iters: int = 0, launcher: str = 'none', resume_from=None, interval: int = 100
):
    """A toy run over :data:`VALUES` on ``DefaultSampler(shuffle=False, round_up=False)``, ``batch``
    samples a rank, ``max_iters`` iterations (0: :data:`EPOCHS`), a checkpoint every ``interval``
    iterations; resumed from ``resume_from`` when given. The runner and what it trained."""
    trained = Trained()
    runner = toy_runner(
        work_dir,
        VALUES,
        max_iters=max_iters or None,
        hooks=[trained],
        checkpoint_interval=interval,
        launcher=launcher,
        train_cfg=None if max_iters else EPOCHS,
        resume=resume_from is not None,
        load_from=None if resume_from is None else str(resume_from),
    )
    runner._train_dataloader['batch_size'] = batch  # (built when training starts)
    runner._train_dataloader['sampler'] = dict(type='DefaultSampler', shuffle=False, round_up=False)
    runner.train()
    return runner, trained.batches


def _refused(work_dir, batch: int, resume_from, launcher: str = 'none', max_iters: int = 12) -> str:
    """The one line of a resume refused (:class:`~dna_mm.errors.UserError`), nothing trained."""
    try:
        _, trained = _run(work_dir, batch, max_iters, launcher, resume_from)
    except UserError as err:
        assert '\n' not in str(err), err
        assert not list(Path(work_dir).glob('*.pth'))  # nothing trained, nothing saved
        return f'{type(err).__name__}: {err}'
    raise AssertionError(f'resumed and trained {trained}')


def _rank(rank: int, port: int, out: str) -> None:
    """Rank ``rank`` of 2 (gloo; a collective out of step fails after 60 s, not never): the runs
    of the module docstring; each rank writes what it saw to ``rank<r>.json``."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE='2')
    os.environ.update(LOCAL_RANK=str(rank), OMP_NUM_THREADS='1')
    import torch.distributed as dist

    import dna_mm  # noqa: F401

    dist.init_process_group('gloo', timeout=timedelta(seconds=60))
    seen: dict = {}
    try:
        _, seen['never_stopped'] = _run(f'{out}/two', 1, 12, 'pytorch', interval=6)
        runner, seen['resumed'] = _run(f'{out}/two_again', 1, 12, 'pytorch', f'{out}/two/iter_6.pth')
        seen['resumed_iter'] = runner.iter
        seen['one_on_two'] = _refused(f'{out}/one_on_two', 1, f'{out}/one/iter_11.pth', 'pytorch')
        try:
            _run(f'{out}/epochs', 1, launcher='pytorch')
        except UserError as err:
            seen['epochs'] = f'{type(err).__name__}: {err}'
        _, seen['even'] = _run(f'{out}/even', 2, launcher='pytorch', interval=4)  # 3 iterations an epoch
        (Path(out) / f'rank{rank}.json').write_text(json.dumps(seen))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope='module')
def ranks(tmp_path_factory) -> dict:
    """A 1-process run's ``iter_11.pth`` (a pass whole), then the 2-rank runs of :func:`_rank`:
    the output folder and what each rank saw."""
    out = tmp_path_factory.mktemp('round_up')
    _run(out / 'one', 1, 11, interval=11)
    torch.multiprocessing.spawn(_rank, args=(free_port(), str(out)), nprocs=2)
    return dict(out=out, seen=[json.loads((out / f'rank{r}.json').read_text()) for r in (0, 1)])


@pytest.mark.slow  # two processes importing the stack, five short runs: ~20 s on 2 idle cores
def test_a_two_rank_run_with_passes_of_unequal_length_resumes_in_its_layout(ranks) -> None:
    zero, one = ranks['seen']
    assert zero['never_stopped'][:7] == [[v] for v in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 1.0)]
    assert one['never_stopped'][:7] == [[v] for v in (1.1, 1.3, 1.5, 1.7, 1.9, 1.1, 1.3)]  # 5 a pass
    for rank in (zero, one):  # each rank where it stood: what the run never stopped trained
        assert rank['resumed'] == rank['never_stopped'][6:] and rank['resumed_iter'] == 12


@pytest.mark.slow
def test_a_resume_into_ranks_with_passes_of_unequal_length_is_refused(ranks) -> None:
    out = ranks['out']
    for rank in ranks['seen']:  # on every rank, the same line
        assert rank['one_on_two'] == (
            f'CheckpointMismatchError: cannot resume {out}/one/iter_11.pth on 2 processes x 1 clip x 1 '
            'accumulation step: it was saved on 1 process x 1 clip x 1 accumulation step and '
            'train_dataloader.sampler.round_up=False makes the passes over the 11 samples of unequal '
            "length on this run's ranks (6 iterations on rank 0, 5 on rank 1): they drift apart, so no "
            'iteration of one layout holds the samples seen in the other; resume it on 1 process with '
            'train_dataloader.batch_size=1 (as saved), or set train_dataloader.sampler.round_up=True '
            '(the default: every pass padded to one length)'
        )


@pytest.mark.slow
def test_a_resume_from_ranks_with_passes_of_unequal_length_is_refused(ranks, tmp_path) -> None:
    saved = ranks['out'] / 'two' / 'iter_6.pth'
    line = _refused(tmp_path / 'two_on_one', 1, saved)
    assert line.startswith(f'CheckpointMismatchError: cannot resume {saved} on 1 process x 1 clip'), line
    assert "unequal length on the saved run's ranks (6 iterations on rank 0, 5 on rank 1)" in line, line
    assert line.endswith(
        'resume it on 2 processes with train_dataloader.batch_size=1 (as saved), or start from its '
        f'weights with load_from={saved}'
    ), line


@pytest.mark.slow
def test_an_epoch_based_run_with_epochs_of_unequal_length_is_refused(ranks) -> None:
    for rank in ranks['seen']:
        assert rank['epochs'] == (
            'ConfigError: train_dataloader.sampler.round_up=False gives the 2 ranks epochs of unequal '
            'length over the 11 samples (6 iterations on rank 0, 5 on rank 1): their collective calls '
            'fall out of step and the run hangs; set round_up=True (the default: each epoch padded to '
            'one length)'
        )


@pytest.mark.slow
def test_passes_as_long_on_every_rank_convert_exactly(ranks, tmp_path) -> None:
    """2 ranks of 2 (rank 1's last batch: 1 sample) saved at iteration 4, epoch 2's first batch
    done (1.0-1.3), go on on 1 process of 1 at iteration 15 (11 + 4) with 1.4."""
    zero, one = ranks['seen']
    assert zero['even'][3] == [1.0, 1.2] and one['even'][3] == [1.1, 1.3]
    saved = ranks['out'] / 'even' / 'iter_4.pth'
    assert read_checkpoint(str(saved))['meta'][LAYOUT_KEY]['iters_per_epoch'] == 3
    runner, trained = _run(tmp_path / 'even_on_one', 1, resume_from=saved)
    log = (Path(runner.log_dir) / f'{runner.timestamp}.log').read_text()
    assert 'iteration 4 is iteration 15 here (epoch 2)' in log, log
    assert trained == [[v] for v in VALUES[4:]] and runner.iter == 22


def _loader(samples: int, round_up: bool, drop_last: bool = False) -> torch.utils.data.DataLoader:
    """A loader of ``samples`` on ``DefaultSampler`` (this process: 1 rank)."""
    sampler = DefaultSampler(list(range(samples)), shuffle=False, round_up=round_up)
    data = list(range(samples))
    return torch.utils.data.DataLoader(data, batch_size=1, sampler=sampler, drop_last=drop_last)


def test_unequal_passes_are_those_of_a_sampler_that_pads_none() -> None:
    """The passes of rank 0 and of the last rank, where they differ (``None``: every rank's is as
    long): 11 samples on 2 ranks of 1 -> 6 and 5; of 2 -> 3 and 3 (``None``); 12 samples, 1 rank,
    or a sampler that pads: ``None``; 11 on 3 ranks of 2, whole batches only -> 2 and 1."""
    assert uneven_passes(_loader(11, round_up=False), 2, 1) == (6, 5)
    assert uneven_passes(_loader(11, round_up=False), 2, 2) is None
    assert uneven_passes(_loader(12, round_up=False), 2, 1) is None
    assert uneven_passes(_loader(11, round_up=False), 1, 1) is None
    assert uneven_passes(_loader(11, round_up=True), 2, 1) is None
    assert uneven_passes(_loader(11, round_up=False, drop_last=True), 3, 2) == (2, 1)
