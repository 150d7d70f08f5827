"""A stopped test goes on where it stood: each rank's progress through its share of the test set.

Testing a large set takes long enough to be preempted (Kinetics-400's 19,877 validation videos,
3 views each; COCO's 5,000 images at 1024²), and a scheduler that requeues the job runs the same
command again. So the test loop keeps, for each rank, how many batches of its share it has tested
and what the evaluator's metrics collected from them (``results`` and any other plain attribute,
such as a count of classes), in ``<work_dir>/test_progress/<test>/rank<r>_of_<w>.pth``, where
``<test>`` is the checkpoint's name and a hash of what makes two tests the same (below), so that
two tests into one work dir (two checkpoints at once) each keep their own:

* written every ``progress_every_s`` seconds (``test_cfg``; default :data:`EVERY_S`, ``0``
  turns the files off), whole or not at all;
* and, on ``SIGTERM`` / ``SIGUSR1`` / ``SIGINT``, at the end of the batch in progress; the run
  then exits ``128 + N``, as a training run does (:mod:`dna_mm.engine.preemption`; the loader
  workers ignore those signals, so the batch in progress ends);
* and once all of a rank's batches are tested, before the metrics are computed;
* read back by the same command run again: the batches already tested are skipped by their
  indices (nothing loaded), the metrics take their collected state back, and the test ends with
  the metrics of a run that was never stopped;
* used only by the same test: the same checkpoint file (path, size, modification time), the same
  model, test data, evaluator and batch size, the same number of ranks. A test that finds none
  of its own but those of other tests (another checkpoint or config, or its own on another number
  of ranks) names them in one line and starts from its first batch, leaving them as they are;
* removed when the test has ended (with its metrics, or with the list of unreadable videos), its
  folder too once empty.

The files are read by dna_mm's weights-only reader (:func:`dna_mm.checkpoint.read_checkpoint`):
NumPy arrays are stored as tensors and given back as arrays; a metric whose collected results
hold anything else than tensors, arrays, numbers, strings, bytes and containers of them keeps no
progress (one line says which).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import os.path as osp
import re
import signal
import time
from typing import Any, Iterator

import numpy as np
import torch
from mmengine.dist import get_dist_info
from torch.utils.data import Sampler

from ..checkpoint import read_checkpoint
from ..utils.files import atomic_path
from .loader_workers import workers_die_with_parent
from .preemption import Preempted, StopSignals

#: seconds between two writes of a rank's progress
EVERY_S = 300.0
#: the folder below the work dir
FOLDER = 'test_progress'
#: config keys that decide the test's batches and results (with the checkpoint and the ranks)
SAME_TEST_KEYS = ('model', 'test_dataloader', 'test_evaluator')
_ARRAY = '__ndarray__'
#: the number of ranks in a progress file's name
_WORLD = re.compile(r'_of_(\d+)\.pth$')


class NotStorable(TypeError):
    """A collected result that a weights-only load could not read back."""


def to_storable(value: Any) -> Any:
    """``value`` with NumPy arrays as ``{'__ndarray__': tensor}`` and NumPy scalars as Python
    numbers; :class:`NotStorable` for an object of another kind."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in 'biuf':
            raise NotStorable(f'a NumPy array of dtype {value.dtype}')
        return {_ARRAY: torch.from_numpy(np.ascontiguousarray(value))}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor) or value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, dict):
        return {k: to_storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [to_storable(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    raise NotStorable(f'a {type(value).__name__}')


def from_storable(value: Any) -> Any:
    """The inverse of :func:`to_storable`."""
    if isinstance(value, dict):
        if set(value) == {_ARRAY}:
            return value[_ARRAY].numpy()
        return {k: from_storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_storable(v) for v in value]
    if isinstance(value, tuple):
        return tuple(from_storable(v) for v in value)
    return value


def metric_state(metric: Any) -> dict:
    """What ``metric`` collected: ``results`` (:class:`NotStorable` if it cannot be stored) and
    every other attribute that can, in storable form."""
    state = {'results': to_storable(metric.results)}
    for name, value in vars(metric).items():
        if name != 'results':
            try:
                state[name] = to_storable(value)
            except NotStorable:
                continue  # built with the metric (a COCO index, a file client): not collected
    return state


class _SkipFirst(Sampler):
    """A batch sampler that drops the first ``skip`` batches of ``batch_sampler`` by their indices
    (nothing loaded); its length stays the whole pass's, as the loop counts its batches."""

    def __init__(self, batch_sampler: Any, skip: int) -> None:
        self.batch_sampler, self.skip = batch_sampler, skip

    def __iter__(self) -> Iterator[list[int]]:
        batches = iter(self.batch_sampler)
        for _ in range(self.skip):
            next(batches, None)
        yield from batches

    def __len__(self) -> int:
        return len(self.batch_sampler)


def same_test_key(runner: Any) -> dict:
    """What makes two tests the same (module docstring), kept in the file and checked on reading."""
    cfg = runner.cfg
    same = json.dumps({k: cfg.get(k) for k in SAME_TEST_KEYS}, sort_keys=True, default=repr)
    checkpoint = getattr(runner, '_load_from', None)
    stat = os.stat(checkpoint) if checkpoint and osp.isfile(checkpoint) else None
    return {
        'checkpoint': osp.abspath(checkpoint) if checkpoint else None,
        'checkpoint_file': [stat.st_size, stat.st_mtime_ns] if stat else None,
        'config': hashlib.sha256(same.encode()).hexdigest()[:16],
    }


def progress_folder(key: dict) -> str:
    """The folder of one test's progress files: ``<checkpoint name>-<12 hex digits of key>``
    (``no_checkpoint-…`` for a test of the model as built)."""
    checkpoint = key.get('checkpoint')
    stem = osp.splitext(osp.basename(checkpoint))[0] if checkpoint else 'no_checkpoint'
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return f'{stem}-{digest}'


class RankProgress:
    """One rank's progress file and its signals (module docstring)."""

    def __init__(self, loop: Any, every_s: float = EVERY_S) -> None:
        self.loop, self.every_s = loop, float(every_s)
        self.rank, self.world = get_dist_info()
        self.key = same_test_key(loop.runner)
        self.root = osp.join(loop.runner.work_dir, FOLDER)
        self.path = osp.join(self.root, progress_folder(self.key), f'rank{self.rank}_of_{self.world}.pth')
        self.stop = StopSignals()
        self.saved_at = time.monotonic()
        self.off = self.every_s <= 0

    @property
    def _logger(self) -> Any:
        return self.loop.runner.logger

    def restore(self) -> tuple[int, dict]:
        """``(batches, kept)`` of a saved progress of this same test (``kept``: what the loop
        itself gathered), the metrics' state given back; ``(0, {})`` when there is none to use
        (one line says why a file is not)."""
        if self.off:
            return 0, {}
        if not osp.isfile(self.path):
            self._name_others()
            return 0, {}
        try:
            saved = read_checkpoint(self.path)
        except Exception as err:  # a file cut short or not ours: start over, say so
            self._logger.warning(f'test progress {self.path} unreadable ({err}); testing from batch 1')
            return 0, {}
        metrics = self.loop.evaluator.metrics
        length = len(self.loop.dataloader)
        why = ''
        if not isinstance(saved, dict) or not {'key', 'batches', 'metrics'} <= set(saved):
            why = 'it is not a test progress file'
        elif saved.get('key') != self.key:  # another test whose name hashes alike
            why = f'it is for another checkpoint or config ({saved.get("key")}, now {self.key})'
        elif len(saved.get('metrics', [])) != len(metrics):
            why = f'it is for {len(saved.get("metrics", []))} metrics, not {len(metrics)}'
        elif not 0 <= saved.get('batches', -1) <= length:
            why = f'it has {saved.get("batches")} batches of {length}'
        if why:
            self._logger.warning(f'test progress {self.path} not used: {why}; testing from batch 1')
            return 0, {}
        for metric, state in zip(metrics, saved['metrics'], strict=True):
            for name, value in from_storable(state).items():
                setattr(metric, name, value)
        batches = int(saved['batches'])
        self._logger.info(
            f'test: continuing at batch {batches + 1} of {length} (rank {self.rank}); the first '
            f'{batches} were tested before it stopped: skipped, nothing loaded ({self.path})'
            if batches < length
            else f'test: all {length} batches (rank {self.rank}) were tested before it stopped: '
            f'computing the metrics ({self.path})'
        )
        return batches, from_storable(saved.get('kept', {}))

    def _name_others(self) -> None:
        """One line naming this rank's progress files of other tests in the work dir, if any."""
        others = sorted(glob.glob(osp.join(self.root, '*', f'rank{self.rank}_of_*.pth')))
        if not others:
            return
        own = [int(_WORLD.search(f)[1]) for f in others if osp.dirname(f) == osp.dirname(self.path)]
        why = (
            f'this test on {own[0]} ranks, now on {self.world}'
            if own
            else 'other tests: another checkpoint, model, test data, evaluator or batch size'
        )
        self._logger.warning(
            f'test progress not used, kept as it is: {", ".join(others)} ({why}); testing from batch 1 '
            f'(this test keeps its own in {self.path})'
        )

    def skip(self, batches: int) -> None:
        """The loop's loader starts after its first ``batches`` batches (this pass only: :meth:`end`)."""
        if batches:
            object.__setattr__(
                self.loop.dataloader, 'batch_sampler', _SkipFirst(self.loop.dataloader.batch_sampler, batches)
            )

    def start(self) -> None:
        """Catch the stopping signals; the loader's workers ignore them (so the batch in progress
        ends) and die with this process."""
        if self.off:
            return
        if not self.stop.install():
            self._logger.warning('test outside the main thread: a signal stops it unsaved')
        loader = self.loop.dataloader
        if getattr(loader, 'num_workers', 0):
            workers_die_with_parent(loader, ignore=self.stop.signals)

    def after_batch(self, batches: int, kept: dict) -> None:
        """``batches`` of this rank's share are tested (``kept``: what the loop itself gathered
        from them): save when due; on a signal save and stop
        (:class:`~dna_mm.engine.preemption.Preempted`, exit ``128 + N``)."""
        if self.off:
            return
        signum = self.stop.received
        if not signum and time.monotonic() - self.saved_at < self.every_s:
            return
        saved = self._save(batches, kept)
        if not signum:
            return
        self.stop.release()
        name, length = signal.Signals(signum).name, len(self.loop.dataloader)
        where = (
            f'saved its progress (batch {batches} of {length}) to {self.path}; exit status {128 + signum} '
            f'(128 + {name}); the same command continues from there'
            if saved
            else f'nothing saved; exit status {128 + signum} (128 + {name})'
        )
        self._logger.warning(f'stopped by {name}: {where}')
        raise Preempted(signum, self.path)

    def tested(self, batches: int, kept: dict) -> None:
        """Every batch of this rank's share is tested: saved, so that a test stopped while its
        metrics are computed (COCO's evaluation takes minutes) goes on to computing them."""
        if not self.off:
            self._save(batches, kept)

    def _save(self, batches: int, kept: dict) -> bool:
        self.saved_at = time.monotonic()
        try:
            metrics = [metric_state(m) for m in self.loop.evaluator.metrics]
            kept = to_storable(kept)
        except NotStorable as err:
            self._logger.warning(
                f'test progress off: the test collected {err}, which cannot be stored; a signal now '
                'stops the test unsaved'
            )
            self.off = True
            self.stop.release()
            return False
        record = dict(key=self.key, batches=batches, metrics=metrics, kept=kept)
        with atomic_path(self.path) as tmp:
            torch.save(record, tmp)
        return True

    def end(self, batch_sampler: Any) -> None:
        """The loop has ended, however it ended: the signals' handlers and the loader's own
        ``batch_sampler`` go back."""
        self.stop.release()
        object.__setattr__(self.loop.dataloader, 'batch_sampler', batch_sampler)

    def remove(self) -> None:
        """The test's results are final: no progress to go on from (the test's folder, then
        ``test_progress``, go too once empty: the last rank's file gone, no other test's left)."""
        if osp.isfile(self.path):
            os.remove(self.path)
        for folder in (osp.dirname(self.path), self.root):
            with contextlib.suppress(OSError):  # another rank's or test's file still there, or none
                os.rmdir(folder)
