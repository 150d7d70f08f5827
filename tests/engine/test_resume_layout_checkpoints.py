"""The checkpoints of a run resumed in another layout (another number of ranks, or batch per rank:
an iteration is another number of samples), and a checkpoint that records no layout.

* ``max_keep_ckpts`` keeps the newest checkpoints of the run across the resume, and a checkpoint
  saved before it is never overwritten by one of the same name that holds another point of
  training: it is moved aside first (``iter_8.pth`` -> ``iter_8_earlier_layout.pth``).
* A checkpoint without ``meta['batch_layout']`` (dna_mm before it recorded the layout) saved by
  another number of processes cannot be converted: its resume is refused before anything trains,
  with one line saying what to do.

Real single-process ``DnARunner`` runs (:mod:`toy_runner`); another layout is a run of another
batch per iteration (1 sample an iteration, then 2), which converts as another number of ranks
does (``W · b`` samples an iteration)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Optional

import pytest
import torch
from mmengine.hooks import Hook
from test_preemption import SignalAt
from toy_runner import toy_runner

from dna_mm.checkpoint import read_checkpoint
from dna_mm.engine import Preempted
from dna_mm.engine.checkpoint_hook import resume_candidates
from dna_mm.engine.global_batch import LAYOUT_KEY
from dna_mm.errors import UserError

VALUES = [1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]


class SavedFiles(Hook):
    """The checkpoint files of the work dir after each save, and which iteration and batch each
    of them holds (``name -> (meta['iter'], batch_size)``)."""

    priority = 'LOWEST'  # after the checkpoint hook's save (VERY_LOW)

    def __init__(self) -> None:
        self.seen: list[dict[str, tuple[int, int]]] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.seen.append(_held(Path(runner.work_dir)))


def _held(work_dir: Path) -> dict[str, tuple[int, int]]:
    """Each ``*.pth`` of ``work_dir``: the iteration it was saved at and the batch per iteration."""
    held = {}
    for path in sorted(work_dir.glob('*.pth')):
        meta = read_checkpoint(str(path))['meta']
        held[path.name] = (meta['iter'], meta[LAYOUT_KEY]['batch_size'])
    return held


def _run(work_dir: Path, batch: int, max_iters: int, interval: int, resume: bool = False, hooks=None):
    """A run of ``batch`` samples an iteration, a checkpoint every ``interval`` iterations, the 3
    newest kept."""
    runner = toy_runner(
        work_dir,
        VALUES,
        max_iters=max_iters,
        resume=resume,
        hooks=hooks,
        default_hooks=dict(
            checkpoint=dict(type='CheckpointHook', interval=interval, by_epoch=False, max_keep_ckpts=3)
        ),
    )
    runner._train_dataloader['batch_size'] = batch  # (built when training starts)
    runner.train()
    return runner


def _log(runner) -> str:
    return (Path(runner.log_dir) / f'{runner.timestamp}.log').read_text()


def test_a_run_resumed_in_another_layout_keeps_its_newest_checkpoints_and_overwrites_none(tmp_path) -> None:
    """Saved at iterations 4, 8, 12 of 1 sample; resumed on 2 samples an iteration (12 -> 6) with
    the interval of the same samples (2), it saves at 8, 10, 12: its iter_8.pth and iter_12.pth
    are other points than the saved run's. It ends with its own iter_8/10/12 (a run never stopped
    keeps them), and the saved run's iter_8.pth is moved aside before this run writes its own."""
    work = tmp_path / 'run'
    _run(work, batch=1, max_iters=12, interval=4)
    assert _held(work) == {'iter_4.pth': (4, 1), 'iter_8.pth': (8, 1), 'iter_12.pth': (12, 1)}
    files = SavedFiles()
    resumed = _run(work, batch=2, max_iters=12, interval=2, resume=True, hooks=[files])
    assert 'iteration 12 is iteration 6 here' in _log(resumed)
    assert _held(work) == {'iter_8.pth': (8, 2), 'iter_10.pth': (10, 2), 'iter_12.pth': (12, 2)}
    after_8 = files.seen[1]  # after iteration 8 (the loop went on at 6)
    assert after_8 == {
        'iter_8_earlier_layout.pth': (8, 1),  # the saved run's, kept (one of the 3 newest)
        'iter_12.pth': (12, 1),
        'iter_8.pth': (8, 2),
    }
    lines = [line.split(' - ', 2)[-1] for line in _log(resumed).splitlines() if 'moved to' in line]
    assert lines == [
        f'INFO - checkpoint: {name}.pth was saved before the resume in another layout (another point '
        f"of training than this run's iteration {step}): moved to {name}_earlier_layout.pth, not overwritten"
        for name, step in (('iter_8', 8), ('iter_12', 12))
    ]


def _strip_layout(src: Path, dst: Path, world_size=None) -> Path:
    """``src`` as dna_mm wrote it before it recorded the layout: no ``meta['batch_layout']``; its
    ``rng_state`` saying ``world_size`` processes (``None``: no ``rng_state`` at all)."""
    checkpoint = torch.load(src, map_location='cpu', weights_only=False)
    del checkpoint['meta'][LAYOUT_KEY]
    if world_size is None:
        del checkpoint['rng_state']
    else:
        checkpoint['rng_state']['world_size'] = world_size
    dst.mkdir(parents=True)
    torch.save(checkpoint, dst / src.name)
    (dst / 'last_checkpoint').write_text(str(dst / src.name))
    return dst / src.name


def test_a_checkpoint_without_its_layout_saved_by_other_processes_is_refused(tmp_path) -> None:
    _run(tmp_path / 'saved', batch=1, max_iters=4, interval=2)
    path = _strip_layout(tmp_path / 'saved' / 'iter_2.pth', tmp_path / 'old', world_size=2)
    with pytest.raises(UserError) as raised:
        _run(tmp_path / 'old', batch=1, max_iters=4, interval=2, resume=True)
    message = str(raised.value)
    assert '\n' not in message
    for part in (
        str(path),
        'saved by 2 processes',
        'resumed by 1 process',
        'tools/dist_train.sh CONFIG 2 --resume',
        f'load_from={path}',
    ):
        assert part in message, message
    assert sorted(p.name for p in (tmp_path / 'old').glob('*.pth')) == ['iter_2.pth']  # nothing trained


def test_a_checkpoint_without_layout_or_world_size_resumes_as_saved(tmp_path) -> None:
    _run(tmp_path / 'saved', batch=1, max_iters=4, interval=2)
    _strip_layout(tmp_path / 'saved' / 'iter_2.pth', tmp_path / 'old', world_size=None)
    resumed = _run(tmp_path / 'old', batch=1, max_iters=4, interval=2, resume=True)
    assert resumed.iter == 4


def _preempted(
    work_dir: Path, batch: int, at: int, load_from: Optional[Path] = None, interval: int = 4
) -> str:
    """A run of ``batch`` samples an iteration, a checkpoint every ``interval`` (resumed from
    ``load_from``, else from the work dir's last checkpoint when it has one) stopped by
    ``SIGTERM`` at iteration ``at``; its log."""
    runner = toy_runner(
        work_dir,
        VALUES * 2,
        max_iters=16,
        resume=(work_dir / 'last_checkpoint').exists(),
        load_from=None if load_from is None else str(load_from),
        hooks=[SignalAt(at, signal.SIGTERM)],
        checkpoint_interval=interval,
    )
    runner._train_dataloader['batch_size'] = batch
    with pytest.raises(Preempted):
        runner.train()
    return _log(runner)


def test_a_preemption_after_a_resume_in_another_layout_overwrites_no_earlier_point(tmp_path) -> None:
    """Stopped at iteration 6 of 1 sample (``preempted_iter_6.pth``) after ``iter_4.pth``; resumed
    from ``iter_4.pth`` on 2 samples (4 -> 2) and stopped at its iteration 6 (12 samples): the
    earlier ``preempted_iter_6.pth`` is moved aside, not overwritten, and ``--resume`` takes this
    run's. The one a run went on from is its own next checkpoint's to replace: overwritten."""
    work = tmp_path / 'run'
    _preempted(work, batch=1, at=6)
    assert _held(work) == {'iter_4.pth': (4, 1), 'preempted_iter_6.pth': (6, 1)}
    log = _preempted(work, batch=2, at=6, load_from=work / 'iter_4.pth')
    assert 'iteration 4 is iteration 2 here' in log
    assert _held(work) == {
        'iter_4.pth': (4, 2),
        'iter_4_earlier_layout.pth': (4, 1),
        'preempted_iter_6.pth': (6, 2),
        'preempted_iter_6_earlier_layout.pth': (6, 1),
    }
    assert (
        "checkpoint: preempted_iter_6.pth was saved before the resume in another layout (another point "
        "of training than this run's iteration 6): moved to preempted_iter_6_earlier_layout.pth, not "
        'overwritten'
    ) in log, log
    assert resume_candidates(str(work))[0] == str(work / 'preempted_iter_6.pth')

    went_on = tmp_path / 'went_on'  # resumed from the preempted file itself (last_checkpoint)
    _preempted(went_on, batch=1, at=6)
    log = _preempted(went_on, batch=2, at=6, interval=100)  # no checkpoint before the stop: 3 -> 6
    assert 'iteration 6 is iteration 3 here' in log and 'moved to' not in log
    assert _held(went_on) == {'iter_4.pth': (4, 1), 'preempted_iter_6.pth': (6, 2)}
