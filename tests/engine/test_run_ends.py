"""Every run ends, at once, with the status that says how: 0 (done), 1 (a crash: the traceback; a
lost data-loader worker: one line), 128 + N (stopped by signal N, its iteration saved).

Real runs of ``tools/train.py`` / ``test.py`` / ``infer.py`` on the tiny demo, each in its own
session (its process group: the data-loader workers with it), with loader workers as configs ship
them (non-persistent and persistent; the COCO schedules' loop shape: iteration-based, 4 persistent
workers). Faults are real exceptions (``faults.py``, imported by the run), real signals to the
process group (SLURM's ``scancel`` and a terminal's Ctrl-C reach every process of it) and a real
``kill -9`` of one worker. Each test bounds its wait, measures the time from the event to the
exit, and checks that no process of the run is left.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
from conftest import DEMO_CONFIG, REPO, free_port
from processes import Session, children, ignored, steps, wait_for

#: seconds a run may take to end after the event that ends it (the issue's bound)
END_WITHIN_S = 30

pytestmark = pytest.mark.integration


def write_config(
    path: Path,
    root: Path,
    *,
    iters: int = 0,
    epochs: int = 2,
    workers: int = 2,
    persistent: bool = False,
    fault: Optional[dict] = None,
    transform_fault: int = 0,
    test_batches: int = 2,
) -> Path:
    """A tiny demo config: ``iters`` > 0 an iteration-based loop (checkpoints every 2
    iterations), else ``epochs`` epochs (a checkpoint each); ``fault`` a :class:`faults.FaultHook`
    config, ``transform_fault`` > 0 a :class:`faults.FaultTransform` raising at that call;
    ``test_batches``: 2 (the test list, batches of 2) or 8 (the train list, one clip a batch, one
    prefetched a worker: a worker killed after the first batch is needed again)."""
    if iters:
        loop = f"dict(_delete_=True, type='ResumableIterBasedTrainLoop', max_iters={iters}, "
        loop += f'val_interval={iters})'
        checkpoint, by_epoch = 'dict(interval=2, by_epoch=False)', False
    else:
        loop = f'dict(max_epochs={epochs}, val_interval={epochs})'
        checkpoint, by_epoch = 'dict(interval=1)', True
    faulty = f"dict(type='FaultTransform', at={transform_fault}), " if transform_fault else ''
    test_list, test_loader = (
        ('test', '') if test_batches == 2 else ('train', 'batch_size=1, prefetch_factor=1')
    )
    hooks = "[dict(type='SkippedSamplesHook'), dict(type='RNGStateHook')"
    hooks += f', {fault!r}]' if fault else ']'
    path.write_text(
        f"""_base_ = [{DEMO_CONFIG!r}]
custom_imports = dict(imports=['dna_mm', 'faults'], allow_failed_imports=False)
model = dict(
    backbone=dict(embed_dims=32, num_heads=2, num_transformer_layers=1),
    cls_head=dict(in_channels=32),
)
pipeline = [
    dict(type='DecordInit', io_backend='disk'), {faulty}
    dict(type='SampleFrames', clip_len=8, frame_interval=2, num_clips=1, test_mode=True),
    dict(type='DecordDecode'),
    dict(type='Resize', scale=(32, 32), keep_ratio=False),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
loader = dict(batch_size=2, num_workers={workers}, persistent_workers={persistent})
data = dict(data_prefix=dict(video='{root}/videos'), pipeline=pipeline)
train_dataloader = dict(**loader, dataset=dict(**data, ann_file='{root}/train.txt'))
val_dataloader = dict(**loader, dataset=dict(**data, ann_file='{root}/test.txt'))
test_dataloader = dict(loader, dataset=dict(**data, ann_file='{root}/{test_list}.txt'), {test_loader})
label_map = '{root}/classes.txt'
train_cfg = {loop}
param_scheduler = []
default_hooks = dict(logger=dict(interval=1), checkpoint={checkpoint})
log_processor = dict(by_epoch={by_epoch}, window_size=1)
custom_hooks = {hooks}
"""
    )
    return path


class Run(Session):
    """A tool run (``python ARGS``) in its own session, the stamp file of its fault beside it."""

    def __init__(self, tmp_path: Path, args: list[str], name: str = 'run') -> None:
        self.stamp = tmp_path / f'{name}.fault'
        env = {
            **os.environ,
            'PYTHONPATH': os.pathsep.join([str(REPO / 'tests' / 'engine'), os.environ.get('PYTHONPATH', '')]),
            'DNA_MM_FAULT_STAMP': str(self.stamp),
            'OMP_NUM_THREADS': '1',
        }
        super().__init__(tmp_path, name, [sys.executable, *args], env)

    def wait_for(self, ready, what: str) -> None:
        wait_for(ready, [self], what)

    def fault_time(self) -> float:
        assert self.stamp.is_file(), f'the fault did not fire:\n{self.text()[-3000:]}'
        return float(self.stamp.read_text())


def train(tmp_path: Path, config: Path, *extra: str, name: str = 'run') -> tuple[Run, Path]:
    work = tmp_path / f'{name}_work'
    return Run(tmp_path, ['tools/train.py', str(config), '--work-dir', str(work), *extra], name), work


# ---------------------------------------------------------------------------------------------
# an exception anywhere: status 1, the traceback, ended within 30 s


@pytest.mark.parametrize(
    'fault, shape',
    [
        (dict(type='FaultHook', where='member', at=3), dict(iters=6, workers=2, persistent=True)),
        (dict(type='FaultHook', where='hook', at=3), dict(epochs=2, workers=2)),
        (None, dict(iters=6, workers=2, transform_fault=3)),
        (dict(type='FaultHook', where='val'), dict(epochs=1, workers=2, persistent=True)),
        (dict(type='FaultHook', where='checkpoint'), dict(iters=6, workers=4, persistent=True)),
    ],
    ids=[
        'member-iter-persistent',
        'hook-epoch',
        'transform-iter',
        'validation-persistent',
        'checkpoint-iter-4',
    ],
)
def test_an_exception_anywhere_ends_the_run_with_its_traceback_and_status_1(
    tiny_video_set, tmp_path, fault, shape
) -> None:
    run, _ = train(tmp_path, write_config(tmp_path / 'cfg.py', tiny_video_set, fault=fault, **shape))
    code = run.end()
    text = run.text()
    assert code == 1, text[-3000:]
    assert 'Traceback' in text and 'InjectedFault: injected fault' in text, text[-3000:]
    took = run.ended_at - run.fault_time()
    print(f'\n{fault or "transform"} {shape}: exit 1, {took:.1f} s after the fault')
    assert took < END_WITHIN_S, text[-3000:]
    run.assert_nothing_left()


# ---------------------------------------------------------------------------------------------
# the normal end: status 0 at once


@pytest.mark.parametrize(
    'shape',
    [
        dict(iters=4, workers=4, persistent=True),
        dict(iters=4, workers=2),
        dict(epochs=1, workers=2, persistent=True),
    ],
    ids=['iter-4-persistent (COCO loop shape)', 'iter-2', 'epoch-2-persistent'],
)
def test_a_run_that_reaches_its_end_exits_0_at_once(tiny_video_set, tmp_path, shape) -> None:
    run, work = train(tmp_path, write_config(tmp_path / 'cfg.py', tiny_video_set, **shape))
    code = run.end()
    assert code == 0, run.text()[-3000:]
    last_write = max(p.stat().st_mtime for p in work.rglob('*') if p.is_file())
    took = run.ended_at - last_write
    print(f'\n{shape}: exit 0, {took:.1f} s after its last file was written')
    assert took < END_WITHIN_S
    run.assert_nothing_left()


# ---------------------------------------------------------------------------------------------
# signals: 128 + N, the iteration saved


@pytest.mark.parametrize(
    'signum, shape',
    [
        (signal.SIGTERM, dict(iters=400, workers=2)),
        (signal.SIGUSR1, dict(epochs=100, workers=2, persistent=True)),
        (signal.SIGINT, dict(iters=400, workers=4, persistent=True)),
    ],
    ids=['SIGTERM-iter', 'SIGUSR1-epoch-persistent', 'SIGINT-iter-4-persistent'],
)
def test_a_signal_saves_the_iteration_and_exits_128_plus_n(tiny_video_set, tmp_path, signum, shape) -> None:
    run, work = train(tmp_path, write_config(tmp_path / 'cfg.py', tiny_video_set, **shape))
    run.wait_for(lambda: steps(work) >= 3, 'training')
    # every worker ignores what a scheduler or a terminal sends the whole group (a worker that died
    # of it would fail the iteration to save; the workers an iteration-based loop starts when it is
    # built, persistent ones too, are started again)
    preemption = {signal.SIGTERM, signal.SIGUSR1, signal.SIGINT}
    workers = children(run.proc.pid)
    assert len(workers) == shape['workers'], workers
    assert all(preemption <= ignored(pid) for pid in workers), {pid: ignored(pid) for pid in workers}
    sent = run.signal(signum)
    code = run.end()
    text = run.text()
    name = signal.Signals(signum).name
    assert code == 128 + signum, text[-3000:]
    took = run.ended_at - sent
    print(f'\n{name} {shape}: exit {code}, {took:.1f} s after the signal')
    assert took < END_WITHIN_S
    assert 'Traceback' not in text, text[-3000:]
    lines = [ln for ln in text.splitlines() if f'preempted by {name}: saved iteration' in ln]
    assert len(lines) == 1, text[-3000:]
    assert ('(epoch ' in lines[0]) == ('epochs' in shape), lines[0]  # no epoch in an iteration-based run
    if 'iters' in shape:
        assert re.search(r'saved iteration \d+ of 400 ', lines[0]), lines[0]
    pointer = (work / 'last_checkpoint').read_text().strip()
    assert Path(pointer).name.startswith('preempted_iter_') and Path(pointer).is_file()
    run.assert_nothing_left()


def test_a_second_ctrl_c_stops_at_once_unsaved(tiny_video_set, tmp_path) -> None:
    """The first Ctrl-C is for the end of the iteration; one pressed more than a second later
    does not wait for it (a hook sleeps 60 s in iteration 3)."""
    fault = dict(type='FaultHook', where='sleep', at=3)
    run, work = train(tmp_path, write_config(tmp_path / 'cfg.py', tiny_video_set, iters=400, fault=fault))
    run.wait_for(run.stamp.is_file, 'in the sleeping hook')
    run.signal(signal.SIGINT)
    time.sleep(1.5)
    sent = run.signal(signal.SIGINT)
    code = run.end()
    text = run.text()
    assert code == 128 + signal.SIGINT, text[-3000:]
    assert run.ended_at - sent < END_WITHIN_S
    assert 'SIGINT: saving at the end of this iteration' in text, text[-3000:]
    assert not list(work.glob('preempted_iter_*.pth')), text[-3000:]
    run.assert_nothing_left()


# ---------------------------------------------------------------------------------------------
# a killed loader worker: one line, status 1, --resume goes on from the last checkpoint


def test_a_killed_loader_worker_is_one_line_and_resume_goes_on(tiny_video_set, tmp_path) -> None:
    config = write_config(tmp_path / 'cfg.py', tiny_video_set, iters=400, workers=4, persistent=True)
    run, work = train(tmp_path, config)
    run.wait_for(lambda: (work / 'last_checkpoint').is_file() and steps(work) >= 3, 'a checkpoint')
    workers = children(run.proc.pid)
    assert len(workers) == 4, workers
    os.kill(workers[1], signal.SIGKILL)
    killed = time.time()
    code = run.end()
    text = run.text()
    assert code == 1, text[-3000:]
    assert run.ended_at - killed < END_WITHIN_S
    assert 'Traceback' not in text, text[-3000:]
    stopped = [ln for ln in text.splitlines() if ln.startswith('train.py: stopped:')]
    assert len(stopped) == 1, text[-3000:]
    assert f'data-loader worker 1 of 4 (pid {workers[1]}) was killed by SIGKILL' in stopped[0], stopped
    pointer = (work / 'last_checkpoint').read_text().strip()
    assert f'--resume continues from {pointer}' in stopped[0], stopped
    run.assert_nothing_left()

    shorter = write_config(
        tmp_path / 'cfg2.py', tiny_video_set, iters=steps(work) + 2, workers=4, persistent=True
    )
    every = ['--cfg-options', 'train_cfg.skip_log_interval=0']  # a progress line per batch skipped
    again, _ = train(tmp_path, shorter, '--resume', *every, name='run')
    assert again.end() == 0, again.text()[-3000:]
    # the batches already trained are skipped by their indices, nothing loaded (mmengine fetches
    # them all again): the whole passes over the data at once, the rest with progress lines
    at = int(re.search(r'_(\d+)\.pth$', pointer).group(1))
    where = re.search(
        rf'resume: iteration {at + 1} is batch (\d+) of pass (\d+) over the training data; '
        rf'the {at} batches already trained are skipped, nothing loaded',
        again.text(),
    )
    assert where, again.text()[-3000:]
    rest = int(where.group(1)) - 1  # the batches of the pass the run had reached
    progress = [ln for ln in again.text().splitlines() if 'batches already trained skipped' in ln]
    assert len(progress) == rest, again.text()[-3000:]
    if rest:
        assert f'resume: 1 of the {rest} batches' in progress[0] and 'batches/s, about' in progress[0]
        assert f'resume: the {rest} batches already trained skipped in 0:00:' in progress[-1], progress
    assert f'resume: continuing from {pointer}' in again.text()
    again.assert_nothing_left()


# ---------------------------------------------------------------------------------------------
# testing and inference end the same way


@pytest.fixture(scope='module')
def tiny_checkpoint(tiny_video_set, tmp_path_factory) -> Path:
    """A checkpoint of the tiny model (one epoch, no workers)."""
    tmp = tmp_path_factory.mktemp('checkpoint')
    run, work = train(tmp, write_config(tmp / 'cfg.py', tiny_video_set, epochs=1, workers=0))
    assert run.end() == 0, run.text()[-3000:]
    return work / 'epoch_1.pth'


def test_testing_ends_on_an_exception_a_killed_worker_and_a_signal(
    tiny_video_set, tiny_checkpoint, tmp_path
) -> None:
    def test_run(where: str, name: str, work: str = '', suffix: str = '') -> Run:
        fault = dict(type='FaultHook', where=where, seconds=5)  # time to kill a worker or signal
        config = write_config(
            tmp_path / f'{name}.py', tiny_video_set, workers=2, persistent=True, fault=fault, test_batches=8
        )
        args = ['--work-dir', str(tmp_path / (work or name)), '--dump', str(tmp_path / f'{name}.csv')]
        return Run(tmp_path, ['tools/test.py', str(config), str(tiny_checkpoint), *args], name + suffix)

    raised = test_run('test_member', 'raised')
    assert raised.end() == 1, raised.text()[-3000:]
    assert 'InjectedFault: injected fault: a member raised in testing' in raised.text()
    assert raised.ended_at - raised.fault_time() < END_WITHIN_S
    raised.assert_nothing_left()

    killed = test_run('test_sleep', 'killed')
    killed.wait_for(killed.stamp.is_file, 'testing')
    workers = children(killed.proc.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    at = time.time()
    assert killed.end() == 1, killed.text()[-3000:]
    assert killed.ended_at - at < END_WITHIN_S
    stopped = [ln for ln in killed.text().splitlines() if ln.startswith('test.py: stopped:')]
    assert len(stopped) == 1 and 'Traceback' not in killed.text(), killed.text()[-3000:]
    assert f'data-loader worker 0 of 2 (pid {workers[0]}) was killed by SIGKILL' in stopped[0]
    assert 'run it again' in stopped[0]
    killed.assert_nothing_left()

    stopped = test_run('test_sleep', 'signalled')
    stopped.wait_for(stopped.stamp.is_file, 'testing')
    sent = stopped.signal(signal.SIGTERM)  # to the process group: the workers get it too
    assert stopped.end() == 128 + signal.SIGTERM, stopped.text()[-3000:]
    assert stopped.ended_at - sent < END_WITHIN_S
    saved = f'stopped by SIGTERM: saved its progress (batch 1 of 8) to {tmp_path}/signalled/test_progress/'
    assert saved in stopped.text() and 'Traceback' not in stopped.text(), stopped.text()[-3000:]
    stopped.assert_nothing_left()

    # the same command again goes on from batch 2 and ends as a test never stopped
    again = test_run('test_sleep', 'signalled', suffix='_again')
    assert again.end() == 0, again.text()[-3000:]
    assert 'test: continuing at batch 2 of 8 (rank 0)' in again.text(), again.text()[-3000:]
    assert not (tmp_path / 'signalled' / 'test_progress').exists()  # the files and their folders
    whole = test_run('none', 'whole')
    assert whole.end() == 0, whole.text()[-3000:]
    results = [[ln for ln in r.text().splitlines() if ln.startswith('Test results:')] for r in (again, whole)]
    assert results[0] == results[1] and len(results[0]) == 1, results
    assert (tmp_path / 'signalled.csv').read_text() == (tmp_path / 'whole.csv').read_text()


@pytest.mark.slow
def test_a_stopped_two_rank_test_goes_on_to_the_results_of_one_never_stopped(
    tiny_video_set, tiny_checkpoint, tmp_path
) -> None:
    """``tools/dist_test.sh`` (torchrun, 2 ranks of 4 batches, 2 workers each) stopped by
    ``SIGTERM`` after each rank's first batch: both save, exit 143; the same command goes on at
    batch 2 on both ranks and gives the metrics and ``--dump`` CSV of one process never stopped."""
    fault = dict(type='FaultHook', where='test_sleep', seconds=10)  # the other rank's start may lag
    config = write_config(tmp_path / 'cfg.py', tiny_video_set, workers=2, fault=fault, test_batches=8)
    args = [str(config), str(tiny_checkpoint), '--work-dir', str(tmp_path / 'dist')]
    args += ['--dump', str(tmp_path / 'dist.csv')]
    env = {
        **os.environ,
        'PYTHONPATH': os.pathsep.join([str(REPO / 'tests' / 'engine'), os.environ.get('PYTHONPATH', '')]),
        'PYTHON': sys.executable,
        'PORT': str(free_port()),
        'OMP_NUM_THREADS': '1',
        'GLOO_SOCKET_IFNAME': 'lo',
        'DNA_MM_FAULT_STAMP': str(tmp_path / 'asleep'),  # each rank sleeps after its first batch
    }
    progress = tmp_path / 'dist' / 'test_progress'

    def dist_test(name: str) -> Session:
        return Session(tmp_path, name, ['bash', 'tools/dist_test.sh', *args[:2], '2', *args[2:]], env)

    stopped = dist_test('stopped')
    try:
        asleep = [tmp_path / f'asleep.rank{r}' for r in (0, 1)]
        wait_for(lambda: all(p.is_file() for p in asleep), [stopped], 'both ranks testing')
        sent = stopped.signal(signal.SIGTERM)
        assert stopped.end(END_WITHIN_S + 60) == 128 + signal.SIGTERM, stopped.text()[-3000:]
        assert stopped.ended_at - sent < END_WITHIN_S
    finally:
        stopped.kill_all()
    assert 'stopped by SIGTERM: saved its progress (batch 1 of 4)' in stopped.text(), stopped.text()[-3000:]
    assert sorted(p.name for p in progress.glob('*/*.pth')) == ['rank0_of_2.pth', 'rank1_of_2.pth']

    again = dist_test('again')
    try:
        assert again.end() == 0, again.text()[-3000:]
    finally:
        again.kill_all()
    assert 'test: continuing at batch 2 of 4 (rank 0)' in again.text(), again.text()[-3000:]
    assert not progress.exists()
    whole = Run(
        tmp_path,
        ['tools/test.py', str(config), str(tiny_checkpoint), '--work-dir', str(tmp_path / 'one')]
        + ['--dump', str(tmp_path / 'one.csv')],
        'one',
    )
    assert whole.end() == 0, whole.text()[-3000:]
    results = [[ln for ln in r.text().splitlines() if ln.startswith('Test results:')] for r in (again, whole)]
    assert results[0] == results[1] and len(results[0]) == 1, results
    assert (tmp_path / 'dist.csv').read_text() == (tmp_path / 'one.csv').read_text()


def test_inference_ends_on_an_exception(tiny_video_set, tiny_checkpoint, tmp_path) -> None:
    config = write_config(tmp_path / 'cfg.py', tiny_video_set, workers=2, transform_fault=1)
    video = sorted((tiny_video_set / 'videos').rglob('*.mp4'))[0]
    run = Run(tmp_path, ['tools/infer.py', str(config), str(tiny_checkpoint), str(video)])  # writes nothing
    code = run.end()
    assert code == 1, run.text()[-3000:]
    assert 'injected fault' in run.text(), run.text()[-3000:]
    assert run.ended_at - run.fault_time() < END_WITHIN_S
    run.assert_nothing_left()


# ---------------------------------------------------------------------------------------------
# what the above rests on


def test_the_private_names_of_torch_that_ending_workers_uses_are_there() -> None:
    import importlib

    from dna_mm.engine.loader_workers import TORCH_PRIVATE_NAMES

    for where, names in TORCH_PRIVATE_NAMES.items():
        module, _, cls = where.partition(':')
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        missing = [n for n in names if not hasattr(owner, n)]
        assert not missing, f'{where}: {missing}'


def _pid(worker_id: int) -> int:
    return os.getpid()


def test_a_loader_s_persistent_workers_are_started_again_with_its_new_init_fn() -> None:
    """``iter(loader)`` hands back a persistent loader's workers (forked with the ``worker_init_fn``
    of their time) until :func:`drop_persistent_workers` ends them; then new ones start."""
    import torch
    from torch.utils.data import DataLoader

    from dna_mm.engine.loader_workers import drop_persistent_workers

    class Pids(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> int:
            return os.getpid()

    loader = DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True)
    first = {int(p) for batch in loader for p in batch}
    assert {int(p) for batch in loader for p in batch} == first  # kept
    old = loader._iterator._workers
    loader.worker_init_fn = _pid
    drop_persistent_workers(loader)
    assert loader._iterator is None and not any(w.is_alive() for w in old)
    second = {int(p) for batch in loader for p in batch}
    assert len(second) == 2 and not second & first
    drop_persistent_workers(loader)


def test_torch_s_messages_for_a_dead_worker_are_one_line_each() -> None:
    """The three texts torch 2.x gives for a worker that died (C++ ``SIGCHLD`` check: killed or
    an exit code; the loader's own check where it waits for data: gone)."""
    from dna_mm.engine import loader_workers as lw

    killed = RuntimeError('DataLoader worker (pid 4242) is killed by signal: Killed. ')
    assert lw.describe_lost_worker(killed) == (
        "a data-loader worker (pid 4242) was killed by SIGKILL (kill -9, or the kernel's "
        'out-of-memory killer: `dmesg` says which)'
    )
    segv = RuntimeError('DataLoader worker (pid 7) is killed by signal: Segmentation fault. ')
    assert lw.describe_lost_worker(segv) == 'a data-loader worker (pid 7) was killed by SIGSEGV'
    code = RuntimeError(
        'DataLoader worker (pid 9) exited unexpectedly with exit code 3. Details are lost due to '
        'multiprocessing. Rerunning with num_workers=0 may give better error trace.'
    )
    assert lw.describe_lost_worker(code) == 'a data-loader worker (pid 9) ended with exit code 3'
    lw.DEATHS[11] = 'DataLoader worker (pid 11) is killed by signal: Terminated. '
    gone = RuntimeError('DataLoader worker (pid(s) 11, 12) exited unexpectedly')
    assert lw.describe_lost_worker(gone) == 'a data-loader worker (pid 11) was killed by SIGTERM'
    assert lw.describe_lost_worker(RuntimeError('DataLoader worker (pid(s) 13) exited unexpectedly')) == (
        'a data-loader worker (pid 13) ended unexpectedly'
    )
    assert (
        lw.describe_lost_worker(ValueError('DataLoader worker (pid 4242) is killed by signal: Killed.'))
        is None
    )
    assert lw.describe_lost_worker(RuntimeError('CUDA out of memory')) is None


#: processes whose two loader workers are busy loading a sample that takes a minute: a loader built
#: as DnARunner builds every loop's, and tools/extract_features.py's; each prints the pids of its
#: workers to the file it is given (the runner's loader at once, each extraction worker when it
#: starts its sample) and waits
BUSY_WORKERS = {
    'runner': """
import sys, time, torch
from dna_mm.engine import DnARunner

class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        time.sleep(60)
        return i

loader = DnARunner.build_dataloader(dict(
    dataset=Slow(), batch_size=1, num_workers=2, sampler=dict(type='DefaultSampler', shuffle=False)))
batches = iter(loader)
with open(sys.argv[1], 'w') as f:
    f.write(' '.join(str(w.pid) for w in batches._workers))
time.sleep(120)
""",
    'extract_features': """
import os, sys, time
from dna_mm.apis.features import FeatureStore, run_extraction

def slow(results):
    with open(sys.argv[1], 'a') as f:
        f.write(f' {os.getpid()}')
    time.sleep(60)
    return results

out = sys.argv[1] + '.out'
videos = [f'{out}/{i}.mp4' for i in range(8)]
store = FeatureStore(out, out, videos, dict(config='busy'))
run_extraction(None, [slow], videos, store, workers=2)
""",
}


def _alive(pid: int) -> bool:
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except OSError:
        return False
    return state not in 'ZX'


@pytest.mark.parametrize('loader', sorted(BUSY_WORKERS))
def test_a_killed_process_s_loader_workers_die_with_it_at_once(tmp_path, loader) -> None:
    """``kill -9`` of a process (a rank): its loader workers, in the middle of a sample, end with
    it, and so do the copies of its sockets that they hold (a distributed run's other ranks then
    see its connections close). Left alone they would load on for a minute."""
    pids = tmp_path / 'workers'
    pids.touch()
    script = [sys.executable, '-c', BUSY_WORKERS[loader], str(pids)]
    proc = Session(tmp_path, 'busy', script, dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        wait_for(lambda: len(pids.read_text().split()) == 2, [proc], 'the workers started')
        workers = [int(p) for p in pids.read_text().split()]
        time.sleep(1.0)  # in the sample now
        assert len(workers) == 2 and all(_alive(w) for w in workers)
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.time()
        assert proc.end(10) == -signal.SIGKILL
        while any(_alive(w) for w in workers) and time.time() - killed_at < 5:
            time.sleep(0.05)
        took = time.time() - killed_at
        assert not any(_alive(w) for w in workers), (
            f'workers alive {took:.1f} s after their process was killed'
        )
        print(f'\nworkers gone {took:.2f} s after the kill')
    finally:
        proc.kill_all()
