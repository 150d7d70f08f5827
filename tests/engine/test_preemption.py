"""Preemption: ``SIGTERM`` (SLURM's preemption, ``scancel``, a spot machine's notice) and
``SIGUSR1`` (SLURM's ``--signal`` ahead of the time limit) make a run finish its iteration, save it
and exit with ``128 + signal``; ``--resume`` then ends with the weights of a run never stopped.

Real signals throughout: to the process group of a ``tools/train.py`` run (its data-loader
workers included, as SLURM sends them), to this process from inside a toy run, and to one rank
of two (gloo) for a decision all ranks must share.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO, drawing_demo_config, free_port, run_tool, tiny_run_options
from mmengine.hooks import Hook
from processes import steps
from toy_runner import toy_runner, weights

from dna_mm.checkpoint import read_checkpoint


class SignalAt(Hook):
    """Send this process ``signum`` (a real signal) at the end of iteration ``at`` (1-based)."""

    priority = 'NORMAL'  # before PreemptionHook ('LOWEST'), which then sees it in the same iteration

    def __init__(self, at: int, signum: int) -> None:
        self.at, self.signum = at, signum

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == self.at:
            os.kill(os.getpid(), self.signum)


def log_text(work_dir: Path) -> str:
    return '\n'.join(p.read_text() for p in sorted(work_dir.glob('*/*.log')))


def test_sigusr1_saves_the_iteration_and_resume_repeats_the_run(tmp_path) -> None:
    from dna_mm.engine import Preempted

    values = [2.0, 3.0, 0.5, 4.0, 1.5, 2.5, 3.5, 1.2]
    full = toy_runner(tmp_path / 'full', values)
    full.train()
    handler = signal.getsignal(signal.SIGUSR1)

    cut = toy_runner(tmp_path / 'cut', values, hooks=[SignalAt(3, signal.SIGUSR1)])
    with pytest.raises(Preempted) as stop:
        cut.train()
    assert stop.value.code == 128 + signal.SIGUSR1 == 138
    saved_at = tmp_path / 'cut' / 'preempted_iter_3.pth'
    assert stop.value.checkpoint == str(saved_at)
    assert (tmp_path / 'cut' / 'last_checkpoint').read_text() == str(saved_at)
    saved = read_checkpoint(str(saved_at))
    assert saved['meta']['iter'] == 3
    assert {'state_dict', 'optimizer', 'param_schedulers', 'message_hub', 'rng_state'} <= set(saved)
    assert signal.getsignal(signal.SIGUSR1) is handler  # put back
    lines = [ln for ln in log_text(tmp_path / 'cut').splitlines() if 'preempted by' in ln]
    assert len(lines) == 1 and 'preempted by SIGUSR1: saved iteration 3' in lines[0], lines
    assert 'exit status 138' in lines[0]

    resumed = toy_runner(tmp_path / 'cut', values, resume=True)
    resumed.train()
    assert torch.equal(weights(resumed), weights(full)), (weights(resumed), weights(full))
    # the next scheduled checkpoint (the last iteration's) replaces the out-of-schedule one
    assert (tmp_path / 'cut' / 'last_checkpoint').read_text() == str(tmp_path / 'cut' / 'iter_8.pth')
    assert not saved_at.exists()
    toy_runner(tmp_path / 'cut', values, resume=True).train()  # from iter_8.pth: nothing left to train
    assert 'resumed key' not in log_text(tmp_path / 'cut')  # mmengine's warning of a key saved without value


def test_a_signal_saves_even_when_stderr_is_a_pipe_nobody_reads(tmp_path) -> None:
    """A run started by a tool that was killed (its output a pipe whose reader is gone): the
    signal's one line cannot be written, and the iteration is saved all the same."""
    from dna_mm.engine import Preempted

    read, write = os.pipe()
    os.close(read)
    kept = os.dup(2)
    os.dup2(write, 2)
    try:
        cut = toy_runner(tmp_path, [2.0, 3.0, 0.5, 4.0], hooks=[SignalAt(2, signal.SIGTERM)])
        with pytest.raises(Preempted) as stop:
            cut.train()
    finally:
        os.dup2(kept, 2)
        os.close(kept)
        os.close(write)
    assert stop.value.code == 128 + signal.SIGTERM
    assert read_checkpoint(stop.value.checkpoint)['meta']['iter'] == 2


def test_a_signal_name_that_does_not_exist_is_refused() -> None:
    from dna_mm.engine import PreemptionHook

    with pytest.raises(ValueError, match='SIGTREM'):
        PreemptionHook(signals=('SIGTREM',))


def _opts(root, epochs: int) -> list[str]:
    """The demo at tiny settings with its own schedule (warm-up by iteration, cosine by epoch),
    dropout, drop path and two data-loader workers (on :func:`conftest.drawing_demo_config`, whose
    frame offsets and flips they draw): state that an exact resume must bring back."""
    opts = [o for o in tiny_run_options(root, epochs=epochs) if not o.startswith('param_scheduler')]
    return [
        *opts,
        'train_dataloader.num_workers=2',
        'model.backbone.drop_path_rate=0.2',
        'model.cls_head.dropout_ratio=0.5',
        'log_processor.window_size=1',
        'val_dataloader=None',
        'val_cfg=None',
        'val_evaluator=None',
    ]


@pytest.mark.integration
def test_sigterm_to_a_training_run_saves_it_and_resume_ends_with_the_same_weights(
    tiny_video_set, tmp_path
) -> None:
    """3 epochs of 4 iterations; SIGTERM to the run's process group once it trains in epoch 2.
    Every run in a new process, as the interrupted one: a process's state (its thread count: a
    sum split over other threads rounds otherwise) must not differ between the runs compared
    bitwise."""
    print(f'\npytest process: {torch.get_num_threads()} threads')
    opts = _opts(tiny_video_set, epochs=3)
    train = ['tools/train.py', str(drawing_demo_config(tmp_path)), '--seed', '0']
    full, cut = tmp_path / 'full', tmp_path / 'cut'
    run_tool([*train, '--work-dir', str(full), '--cfg-options', *opts])

    out_file = tmp_path / 'cut.out'
    with open(out_file, 'w') as out:
        proc = subprocess.Popen(
            [sys.executable, *train, '--work-dir', str(cut), '--cfg-options', *opts],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the signal reaches its workers too
        )
        start = time.time()
        while steps(cut) < 5 and proc.poll() is None and time.time() - start < 300:
            time.sleep(0.02)
        alive = proc.poll() is None
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=300)
    text = out_file.read_text()
    assert alive, f'the run ended before the signal:\n{text[-3000:]}'
    assert code == 128 + signal.SIGTERM == 143, text[-3000:]
    assert 'Traceback' not in text and 'DataLoader worker' not in text, text[-3000:]
    lines = [ln for ln in text.splitlines() if 'preempted by SIGTERM' in ln]
    assert len(lines) == 1, text[-3000:]

    pointer = (cut / 'last_checkpoint').read_text().strip()
    saved = read_checkpoint(pointer)
    at = saved['meta']['iter']
    assert Path(pointer).name == f'preempted_iter_{at}.pth' and 5 <= at < 12
    assert f'saved iteration {at} ' in lines[0]
    assert {'optimizer', 'param_schedulers', 'message_hub', 'rng_state'} <= set(saved)

    out = run_tool([*train, '--work-dir', str(cut), '--resume', '--cfg-options', *opts]).stdout
    assert f'resume: continuing from {pointer}' in out
    reference = read_checkpoint(str(full / 'epoch_3.pth'))['state_dict']
    resumed = read_checkpoint(str(cut / 'epoch_3.pth'))['state_dict']
    assert reference.keys() == resumed.keys()
    differ = [k for k in reference if not torch.equal(reference[k], resumed[k])]
    print(f'\nSIGTERM after iteration {at} of 12, resumed: {len(differ)} of {len(reference)} tensors differ')
    assert not differ, differ
    assert not Path(pointer).exists()  # replaced by the scheduled epoch_3.pth


def _rank(rank: int, port: int, out: str) -> None:
    """One of two gloo ranks: SIGUSR1 reaches rank 1 alone (iteration 3); then rank 1 alone
    has a NaN loss (iteration 2). Each records where it stopped."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE='2')
    os.environ.update(LOCAL_RANK=str(rank), OMP_NUM_THREADS='1')
    import torch.distributed as dist

    import dna_mm  # noqa: F401
    from dna_mm.engine import NonFiniteLossError, Preempted

    dist.init_process_group('gloo')
    result = {}
    try:
        hooks = [SignalAt(3, signal.SIGUSR1)] if rank == 1 else []
        runner = toy_runner(f'{out}/signal', [2.0] * 16, hooks=hooks, launcher='pytorch')
        try:
            runner.train()
        except Preempted as stop:
            result['preempted'] = [runner.iter + 1, stop.code]
        # DefaultSampler: rank r takes samples r, r + 2, ...: sample 3 is rank 1's second
        runner = toy_runner(f'{out}/nan', [2.0, 2.0, 2.0, -1.0] + [2.0] * 12, launcher='pytorch')
        try:
            runner.train()
        except NonFiniteLossError as err:
            result['non_finite'] = [runner.iter + 1, str(err)]
        (Path(out) / f'rank{rank}.json').write_text(json.dumps(result))
    finally:
        dist.barrier()
        dist.destroy_process_group()


@pytest.mark.slow  # two processes importing the stack: ~10 s on 2 idle cores, more beside other tests
def test_two_ranks_stop_together_when_one_is_signalled_or_sees_a_nan(tmp_path) -> None:
    torch.multiprocessing.spawn(_rank, args=(free_port(), str(tmp_path)), nprocs=2)
    results = [json.loads((tmp_path / f'rank{r}.json').read_text()) for r in (0, 1)]
    assert [r['preempted'] for r in results] == [[3, 138], [3, 138]], results
    assert (tmp_path / 'signal' / 'preempted_iter_3.pth').is_file()  # written by rank 0
    assert [r['non_finite'][0] for r in results] == [2, 2], results
    assert 'the loss is nan' in results[1]['non_finite'][1]
