"""A stopped test goes on where it stood (``dna_mm.engine.test_progress``), in process: a real
``DnARunner`` testing a toy model with the shipped test loop and a metric that collects NumPy
arrays and keeps a count of its own. The same through ``tools/test.py``, stopped by ``SIGTERM``
to its process group: ``test_run_ends.py::test_testing_ends_on_an_exception_a_killed_worker_and_a_signal``."""

from __future__ import annotations

import itertools
import logging
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.evaluator import BaseMetric
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.registry import DATASETS, HOOKS, METRICS
from torch.utils.data import Dataset

from dna_mm.engine import DnARunner
from dna_mm.engine.test_progress import NotStorable, from_storable, to_storable

_RUNS = itertools.count()


def progress_files(work_dir: Path | str) -> list[Path]:
    """The progress files under ``work_dir`` (one folder per test)."""
    return sorted((Path(work_dir) / 'test_progress').glob('*/rank*_of_*.pth'))


def progress_file(work_dir: Path | str) -> Path:
    """The one progress file under ``work_dir``."""
    (path,) = progress_files(work_dir)
    return path


@DATASETS.register_module(force=True)
class TwelveValues(Dataset):
    """Sample ``i``: ``dict(inputs=[i, i², i³] / 7, index=i)``, 12 of them."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> dict:
        return dict(inputs=torch.tensor([i, i**2, i**3], dtype=torch.float64) / 7, index=i)


class Scale(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64))

    def forward(self, inputs, index=None, mode='predict'):
        return [dict(score=(x * self.w).numpy(), index=int(i)) for x, i in zip(inputs, index, strict=True)]


@METRICS.register_module(force=True)
class CollectScores(BaseMetric):
    """Collects each sample's scores (an array) and index; counts the batches it saw."""

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def process(self, data_batch, data_samples) -> None:
        self.batches += 1
        self.results += [dict(score=s['score'], index=np.int64(s['index'])) for s in data_samples]

    def compute_metrics(self, results: list) -> dict:
        return dict(
            indices=[int(r['index']) for r in results],
            sum=float(np.sum([r['score'] for r in results], dtype=np.float64)),
            batches=self.batches,
        )


@METRICS.register_module(force=True)
class CollectPaths(CollectScores):
    """Collects what a progress file cannot hold (a ``Path``)."""

    def process(self, data_batch, data_samples) -> None:
        super().process(data_batch, data_samples)
        self.results[-1]['where'] = Path('/videos')


@METRICS.register_module(force=True)
class FailsOnce(CollectScores):
    """Its first computation raises (a test stopped while its metrics are computed)."""

    failed = False

    def compute_metrics(self, results: list) -> dict:
        if not FailsOnce.failed:
            FailsOnce.failed = True
            raise RuntimeError('stopped while computing the metrics')
        return super().compute_metrics(results)


@HOOKS.register_module(force=True)
class SignalAtTestBatch(Hook):
    """``signum`` to this process after test batch ``at`` (1-based)."""

    def __init__(self, at: int, signum: int = signal.SIGUSR1) -> None:
        self.at, self.signum = at, signum

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if batch_idx + 1 == self.at:
            os.kill(os.getpid(), self.signum)


def make_runner(
    work_dir: Path, batch_size: int = 2, stop_at: int = 0, every_s: float = 300, metric: str = 'CollectScores'
) -> DnARunner:
    hooks = [dict(type='SignalAtTestBatch', at=stop_at)] if stop_at else []
    return DnARunner(
        model=Scale(),
        work_dir=str(work_dir),
        test_dataloader=dict(
            dataset=dict(type='TwelveValues'),
            sampler=dict(type='DefaultSampler', shuffle=False),
            batch_size=batch_size,
            num_workers=0,
        ),
        test_cfg=dict(type='UnreadableVideosTestLoop', progress_every_s=every_s),
        test_evaluator=dict(type=metric),
        custom_hooks=hooks,
        default_hooks=dict(logger=dict(type='LoggerHook', interval=1)),
        cfg=dict(test_dataloader=dict(batch_size=batch_size)),  # what the progress key reads
        default_scope='mmengine',
        experiment_name=f'test_progress_{next(_RUNS)}',
    )


class Lines(logging.Handler):
    """The messages a runner's logger gives."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return '\n'.join(self.lines)


def run_test(runner: DnARunner, lines: Lines) -> dict:
    """``runner.test()``, its logger's messages to ``lines``."""
    runner.logger.addHandler(lines)
    try:
        return runner.test()
    finally:
        runner.logger.removeHandler(lines)


WHOLE = dict(indices=list(range(12)), batches=6)


def test_results_are_stored_as_torch_reads_them_back_safely(tmp_path) -> None:
    value = dict(
        f32=np.linspace(0, 1, 5, dtype=np.float32),
        i64=np.arange(3, dtype=np.int64).reshape(3, 1),
        flags=np.array([True, False]),
        scalar=np.float64(0.25),
        rle=dict(size=[4, 4], counts=b'\x01\x02'),
        pair=(1, 'a', None),
        tensor=torch.ones(2),
    )
    torch.save(to_storable(value), tmp_path / 'v.pth')
    back = from_storable(torch.load(tmp_path / 'v.pth', weights_only=True))
    for key in ('f32', 'i64', 'flags'):
        assert back[key].dtype == value[key].dtype and np.array_equal(back[key], value[key])
    assert back['scalar'] == 0.25 and type(back['scalar']) is float
    assert back['rle'] == value['rle'] and back['pair'] == (1, 'a', None)
    assert torch.equal(back['tensor'], value['tensor'])
    with pytest.raises(NotStorable, match='dtype object'):
        to_storable(np.array(['a', 1], dtype=object))
    with pytest.raises(NotStorable, match='a PosixPath'):
        to_storable([Path('x')])


def test_a_signalled_test_saves_and_the_same_test_goes_on_to_the_same_metrics(tmp_path) -> None:
    whole = make_runner(tmp_path / 'whole').test()
    assert {k: whole[k] for k in WHOLE} == WHOLE

    work, lines = tmp_path / 'stopped', Lines()
    with pytest.raises(SystemExit) as stop:
        run_test(make_runner(work, stop_at=2), lines)
    assert stop.value.code == 128 + signal.SIGUSR1
    assert f'stopped by SIGUSR1: saved its progress (batch 2 of 6) to {progress_file(work)}' in lines.text
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # handlers put back

    again = run_test(make_runner(work), lines)
    assert again == whole  # every index once, in order; the same sum; the metric's own count
    assert 'test: continuing at batch 3 of 6 (rank 0)' in lines.text
    assert not (work / 'test_progress').exists()  # the file, and its folders


def test_two_tests_into_one_work_dir_keep_their_own_progress_and_a_broken_one_is_named(tmp_path) -> None:
    whole = make_runner(tmp_path / 'whole').test()
    work, lines = tmp_path / 'stopped', Lines()
    with pytest.raises(SystemExit):
        make_runner(work, stop_at=2).test()
    first = progress_file(work)
    with pytest.raises(SystemExit):  # another test (batch size 3) into the same work dir, stopped too
        run_test(make_runner(work, batch_size=3, stop_at=1), lines)
    assert f'test progress not used, kept as it is: {first} (other tests: another checkpoint' in lines.text
    (second,) = set(progress_files(work)) - {first}
    assert first.parent != second.parent and first.name == second.name == 'rank0_of_1.pth'

    # each goes on from its own file; the one that ends first leaves the other's
    other = run_test(make_runner(work, batch_size=3), lines)
    assert 'test: continuing at batch 2 of 4 (rank 0)' in lines.text
    assert other['indices'] == WHOLE['indices'] and other['batches'] == 4
    assert progress_files(work) == [first]
    assert run_test(make_runner(work), lines) == whole
    assert 'test: continuing at batch 3 of 6 (rank 0)' in lines.text
    assert not (work / 'test_progress').exists()

    # the same test's progress on another number of ranks: named, kept, not used
    with pytest.raises(SystemExit):
        make_runner(work, stop_at=2).test()
    on_two = progress_file(work).with_name('rank0_of_2.pth')
    progress_file(work).rename(on_two)
    lines.lines.clear()
    assert run_test(make_runner(work), lines) == whole
    assert f'kept as it is: {on_two} (this test on 2 ranks, now on 1)' in lines.text
    assert progress_files(work) == [on_two]
    on_two.unlink()

    with pytest.raises(SystemExit):
        make_runner(work, stop_at=2).test()
    cut = progress_file(work)
    cut.write_bytes(cut.read_bytes()[:100])  # cut short
    assert run_test(make_runner(work), lines) == whole
    assert f'test progress {cut} unreadable' in lines.text


def test_progress_every_s_writes_as_the_test_goes_and_0_writes_none(tmp_path) -> None:
    saved: list[int] = []

    @HOOKS.register_module(force=True)
    class ReadProgress(Hook):
        def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
            for path in progress_files(runner.work_dir):
                saved.append(torch.load(path, weights_only=True)['batches'])

    for every_s, written in ((1e-9, [1, 2, 3, 4, 5]), (0, [])):
        saved.clear()
        runner = make_runner(tmp_path / f'every_{every_s}', every_s=every_s)
        runner.register_custom_hooks([dict(type='ReadProgress')])
        assert runner.test()['indices'] == WHOLE['indices']
        assert saved == written  # after each batch (read before the next one's write), or never


def test_results_that_cannot_be_stored_turn_the_progress_off_and_a_signal_still_stops(tmp_path) -> None:
    lines = Lines()
    with pytest.raises(SystemExit) as stop:
        run_test(make_runner(tmp_path / 'paths', stop_at=1, metric='CollectPaths'), lines)
    assert stop.value.code == 128 + signal.SIGUSR1
    assert 'test progress off: the test collected a PosixPath, which cannot be stored' in lines.text
    assert 'stopped by SIGUSR1: nothing saved; exit status 138 (128 + SIGUSR1)' in lines.text
    assert not progress_files(tmp_path / 'paths')
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_a_test_stopped_while_its_metrics_are_computed_goes_on_to_computing_them(tmp_path) -> None:
    whole = make_runner(tmp_path / 'whole').test()
    work, lines = tmp_path / 'computing', Lines()
    with pytest.raises(RuntimeError, match='stopped while computing the metrics'):
        make_runner(work, metric='FailsOnce').test()
    assert torch.load(progress_file(work), weights_only=True)['batches'] == 6
    assert run_test(make_runner(work, metric='FailsOnce'), lines) == whole
    assert 'test: all 6 batches (rank 0) were tested before it stopped: computing the metrics' in lines.text
