"""mmengine's train loops, resumable exactly: a run killed after any checkpoint and resumed logs
the same losses as the run that was not interrupted. Two things differ from mmengine 0.10.7's:

* **The random state comes back** (:mod:`dna_mm.engine.rng_state`) right before the first new
  batch is fetched, after the batches already trained are skipped: fetched, not just counted, so
  the data loader's freshly seeded workers make the same draws as in the saved run.
* **An epoch-based run resumes mid-epoch**: a checkpoint saved by iteration
  (``CheckpointHook(by_epoch=False)``) continues its epoch after the
  ``iter - epoch * len(dataloader)`` batches already trained (mmengine restarts the epoch).

Validation draws nothing from the training streams (``RNGStateHook`` puts them back after it).
Exactness across an epoch boundary needs ``persistent_workers=False``
(persistent workers carry their random state from epoch to epoch, which a resume cannot replay;
a warning says so). A config names them (``train_cfg = dict(type='ResumableEpochBasedTrainLoop',
...)``, ``configs/_base_/schedules/``), with ``RNGStateHook`` in ``custom_hooks``
(``configs/_base_/default_runtime*.py``).

Both run mmengine's ``run``: the iteration-based loop hands it an iterator that restores the
state after the batches it skips; the epoch-based one re-implements ``run_epoch`` (mmengine's
restarts the epoch, and has no hook point between the batches a resumed run skips and the first
new fetch). They and :mod:`.test_loop` use two private names of mmengine, pinned in
:data:`MMENGINE_PRIVATE_NAMES` (``requirements/runtime.txt``: mmengine 0.10;
``tests/engine/test_exact_resume.py`` checks that they are there).
"""

from __future__ import annotations

import time
from datetime import timedelta
from functools import partial
from typing import Any, Optional

from mmengine.registry import LOOPS
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop, _InfiniteDataloaderIterator

from ..errors import ConfigError
from .loader_workers import drop_persistent_workers
from .rng_state import rank_state, restore_rng_state

#: the private names of mmengine 0.10 that dna_mm's loops use (where → names)
MMENGINE_PRIVATE_NAMES = {'mmengine.runner.loops': ('_InfiniteDataloaderIterator', '_parse_losses')}


def restore_data_seed(dataloader: Any, seed: Optional[int]) -> bool:
    """Give the sampler and mmengine's worker seeding the saved run's ``seed`` (when this run drew
    another one: no ``randomness.seed`` in the config). Returns whether anything changed."""
    if seed is None:
        return False
    changed = False
    sampler = getattr(dataloader, 'sampler', None)  # DefaultSampler holds the shuffling seed
    if not hasattr(sampler, 'seed'):  # under a batch sampler
        sampler = getattr(getattr(dataloader, 'batch_sampler', None), 'sampler', None)
    if sampler is not None and getattr(sampler, 'seed', seed) != seed:
        sampler.seed, changed = seed, True
    init_fn = getattr(dataloader, 'worker_init_fn', None)
    if isinstance(init_fn, partial) and init_fn.keywords.get('seed', seed) != seed:
        dataloader.worker_init_fn = partial(init_fn, seed=seed)  # the saved seed replaces this run's
        changed = True
    return changed


def fresh_iterator(dataloader: Any) -> _InfiniteDataloaderIterator:
    """An iteration-based loop's endless iterator on workers started now, with the loader's
    ``worker_init_fn`` as it is now, persistent ones too
    (:func:`~dna_mm.engine.loader_workers.drop_persistent_workers`)."""
    drop_persistent_workers(dataloader)
    return _InfiniteDataloaderIterator(dataloader)


def where_in_run(runner: Any) -> str:
    """The iteration that just ran, as a log line names it: ``'iteration 12 (epoch 2)'`` in an
    epoch-based run, ``'iteration 12 of 184375'`` in an iteration-based one (no epochs there)."""
    loop = runner.train_loop
    if isinstance(loop, IterBasedTrainLoop):
        return f'iteration {runner.iter + 1} of {loop.max_iters}'
    return f'iteration {runner.iter + 1} (epoch {runner.epoch + 1})'


class SkipProgress:
    """Log lines while a resumed run fetches and drops the batches it already trained (every one
    since the start for an iteration-based run, as mmengine's loop does: at a late iteration of a
    COCO schedule, hours of data loading that would otherwise show nothing): one every
    ``every_s`` seconds with the rate and the time left, and one when all are fetched."""

    def __init__(self, logger: Any, total: int, every_s: float) -> None:
        self.logger, self.total, self.every_s = logger, total, every_s
        self.done = 0
        self.start = self.last = time.monotonic()

    def step(self) -> None:
        """One batch fetched and dropped."""
        self.done += 1
        now = time.monotonic()
        took = now - self.start
        if self.done == self.total:
            self.logger.info(
                f'resume: the {self.total} batches already trained fetched and dropped in {_clock(took)}'
            )
        elif now - self.last >= self.every_s:
            rate = self.done / max(took, 1e-9)
            self.logger.info(
                f'resume: {self.done} of the {self.total} batches already trained fetched and dropped '
                f'({rate:.1f} batches/s, about {_clock((self.total - self.done) / rate)} left)'
            )
            self.last = now


def _clock(seconds: float) -> str:
    """``'0:02:05'``."""
    return str(timedelta(seconds=round(seconds)))


class ResumableLoopMixin:
    """What both loops share: the saved state given by ``RNGStateHook``, and the progress lines
    of the batches a resumed run fetches and drops (``skip_log_interval``: seconds between two,
    a loop argument: ``train_cfg=dict(type=..., skip_log_interval=60)``)."""

    resume_rng_state: Optional[dict] = None

    def __init__(self, *args: Any, skip_log_interval: float = 60.0, **kwargs: Any) -> None:
        number = isinstance(skip_log_interval, (int, float)) and not isinstance(skip_log_interval, bool)
        if not number or skip_log_interval < 0:
            raise ConfigError(
                f'train_cfg.skip_log_interval must be a number of seconds >= 0, got {skip_log_interval!r}'
            )
        super().__init__(*args, **kwargs)
        self.skip_log_interval = float(skip_log_interval)

    def _pop_rng_state(self) -> Optional[dict]:
        """The saved state, once; ``None`` when the run was not resumed (a ``load_from``
        checkpoint's state is not this run's)."""
        saved, self.resume_rng_state = self.resume_rng_state, None
        return saved if self._iter > 0 else None


@LOOPS.register_module()
class ResumableEpochBasedTrainLoop(ResumableLoopMixin, EpochBasedTrainLoop):
    """``EpochBasedTrainLoop`` that resumes mid-epoch and restores the random state (module
    docstring). Same arguments as mmengine's; its ``run`` is mmengine's."""

    def run_epoch(self) -> None:
        """One epoch; a resumed one skips (fetches and drops) the batches already trained."""
        saved = self._pop_rng_state()
        state = rank_state(saved) if saved is not None else None
        if saved is not None:
            restore_data_seed(self.dataloader, saved.get('seed'))
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        length = len(self.dataloader)
        done = self._iter - self._epoch * length
        if not 0 <= done <= length:
            self.runner.logger.warning(
                f'resume: iteration {self._iter} is not in epoch {self._epoch + 1} of {length} '
                f'iterations (epochs of different lengths?); the epoch starts from its first batch'
            )
            done = 0
        if saved is not None and self._epoch > 0 and getattr(self.dataloader, 'persistent_workers', False):
            self.runner.logger.warning(
                'resume: train_dataloader.persistent_workers=True: the workers restart with '
                'fresh random states, not those of the interrupted run (set it to False for an '
                'exact resume)'
            )
        if state is not None and done == 0:  # saved at the end of the previous epoch
            restore_rng_state(state)
        batches = iter(self.dataloader)
        if done:
            self.runner.logger.info(
                f'resume: epoch {self._epoch + 1} continues at batch {done + 1} of {length} '
                f'(the first {done} are fetched and dropped)'
            )
            progress = SkipProgress(self.runner.logger, done, self.skip_log_interval)
            for _ in range(done):
                next(batches)
                progress.step()
            if state is not None:
                restore_rng_state(state)
        for idx, data_batch in enumerate(batches, start=done):
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1


class _ResumedIterator:
    """A resumed iteration-based run's data iterator: its first call makes the loop's iterator
    anew when the saved seed was given back to the sampler (after the loop's before-train
    hooks, where mmengine makes it), and the saved random state comes back right before the
    first batch not trained yet (after the ``skip`` that mmengine's ``run`` fetches and drops)."""

    def __init__(self, loop: IterBasedTrainLoop, renew: bool, skip: int, state: Optional[dict]) -> None:
        self.loop, self.renew, self.skip, self.state = loop, renew, skip, state
        self.iterator = loop.dataloader_iterator
        self.fetched = 0
        self.progress: Optional[SkipProgress] = None  # from the first fetch

    def __iter__(self) -> '_ResumedIterator':
        return self

    def __next__(self) -> Any:
        if self.renew:
            self.iterator, self.renew = fresh_iterator(self.loop.dataloader), False
        if self.fetched == self.skip and self.state is not None:
            restore_rng_state(self.state)
            self.state = None
        if self.progress is None:
            self.progress = SkipProgress(self.loop.runner.logger, self.skip, self.loop.skip_log_interval)
        batch = next(self.iterator)
        self.fetched += 1
        if self.fetched <= self.skip:
            self.progress.step()
        return batch


@LOOPS.register_module()
class ResumableIterBasedTrainLoop(ResumableLoopMixin, IterBasedTrainLoop):
    """``IterBasedTrainLoop`` that restores the random state on resume (module docstring). Same
    arguments as mmengine's."""

    def run(self) -> Any:
        """mmengine's, on an iterator that gives the saved seed and random state back where the
        saved run stood (:class:`_ResumedIterator`)."""
        saved = self._pop_rng_state()
        if saved is not None:
            renew = restore_data_seed(self.dataloader, saved.get('seed'))
            self.dataloader_iterator = _ResumedIterator(self, renew, self._iter, rank_state(saved))
        return super().run()
