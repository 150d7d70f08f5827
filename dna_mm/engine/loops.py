"""mmengine's train loops, resumable exactly: a run killed after any checkpoint and resumed logs
the same losses as the run that was not interrupted. Three things differ from mmengine 0.10.7's:

* **Each training sample draws from streams of its own**, seeded by its place in the run
  (:mod:`dna_mm.engine.sample_seeds`), whatever the workers, persistent or not, drew before.
* **A resumed run loads nothing twice**: the batches already trained are skipped by their indices
  (mmengine fetches every one again: since the start of an iteration-based run), and the random
  state (:mod:`dna_mm.engine.rng_state`) comes back right before the first new batch.
* **An epoch-based run resumes mid-epoch**: a checkpoint saved by iteration
  (``CheckpointHook(by_epoch=False)``) continues its epoch after the
  ``iter - epoch * len(dataloader)`` batches already trained (mmengine restarts the epoch). A
  checkpoint saved on another number of processes (or per-process batch) has its iteration
  converted to this run's first (by the samples trained:
  :func:`dna_mm.engine.global_batch.layout_iteration`, in ``DnARunner.resume``).

Validation draws nothing from the training streams (``RNGStateHook`` puts them back after it).
A config names the loops (``train_cfg = dict(type='ResumableEpochBasedTrainLoop', ...)``,
``configs/_base_/schedules/``), with ``RNGStateHook`` in ``custom_hooks``
(``configs/_base_/default_runtime*.py``).

Both run mmengine's ``run``: the iteration-based loop hands it an iterator that skips and restores
the state at its first batch; the epoch-based one re-implements ``run_epoch`` (mmengine's restarts
the epoch). They and :mod:`.test_loop` use two private names of mmengine, pinned in
:data:`MMENGINE_PRIVATE_NAMES` (``requirements/runtime.txt``: mmengine 0.10;
``tests/engine/test_exact_resume.py`` checks that they are there).
"""

from __future__ import annotations

import time
import warnings
from datetime import timedelta
from functools import partial
from typing import Any, Optional

from mmengine.registry import LOOPS
from mmengine.runner.base_loop import BaseLoop
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop, _InfiniteDataloaderIterator

from ..errors import ConfigError
from .accumulated_schedule import EARLY_STEP_WARNING
from .global_batch import loader_batch_size, makes_passes, uneven_passes
from .loader_workers import drop_persistent_workers
from .rng_state import restore_rng_state, saved_record
from .sample_seeds import KeyedBatchSampler, key_samples

#: the private names of mmengine 0.10 that dna_mm's loops use (where → names); and the count of
#: passes that an ``_InfiniteDataloaderIterator`` keeps in ``_epoch``
MMENGINE_PRIVATE_NAMES = {'mmengine.runner.loops': ('_InfiniteDataloaderIterator', '_parse_losses')}


def restore_data_seed(dataloader: Any, seed: Optional[int], data_seed: Optional[int] = None) -> None:
    """Give the samples' keys and mmengine's worker seeding the saved rank's ``seed``, and the
    sampler its ``data_seed`` (its shuffling seed; ``seed`` when not saved), when this run drew
    others (no ``randomness.seed`` in the config; ``diff_rank_seed``'s shared sampler seed)."""
    if seed is None:
        return
    keyed = getattr(dataloader, 'batch_sampler', None)
    if isinstance(keyed, KeyedBatchSampler):
        keyed.seed = seed
    sampler = getattr(dataloader, 'sampler', None)  # DefaultSampler holds the shuffling seed
    if not hasattr(sampler, 'seed'):  # under a batch sampler
        sampler = getattr(getattr(dataloader, 'batch_sampler', None), 'sampler', None)
    if sampler is not None and hasattr(sampler, 'seed'):
        sampler.seed = seed if data_seed is None else data_seed
    init_fn = getattr(dataloader, 'worker_init_fn', None)
    if isinstance(init_fn, partial) and init_fn.keywords.get('seed', seed) != seed:
        dataloader.worker_init_fn = partial(init_fn, seed=seed)  # the saved seed replaces this run's


def fresh_iterator(dataloader: Any) -> _InfiniteDataloaderIterator:
    """An iteration-based loop's endless iterator on workers started now, with the loader's
    ``worker_init_fn`` as it is now, persistent ones too
    (:func:`~dna_mm.engine.loader_workers.drop_persistent_workers`)."""
    drop_persistent_workers(dataloader)
    return _InfiniteDataloaderIterator(dataloader)


def refuse_uneven_epochs(loop: Any, world_size: int) -> None:
    """A :class:`~dna_mm.errors.ConfigError` for an epoch-based ``loop`` on ``world_size`` ranks
    whose epochs differ in length from rank to rank (``DefaultSampler(round_up=False)``:
    :func:`~dna_mm.engine.global_batch.uneven_passes`). A rank with an iteration more per epoch
    meets the others' next collective call with its last one (DDP's gradient all-reduce against
    a checkpoint's gather, or the next epoch's first iteration): the run hangs, or its ranks train
    out of step until it hangs at its end. An iteration-based loop runs (each rank goes on in its
    own passes)."""
    if not isinstance(loop, EpochBasedTrainLoop):
        return
    loader = loop.dataloader
    uneven = uneven_passes(loader, world_size, loader_batch_size(loader))
    if uneven is None:
        return
    raise ConfigError(
        f'train_dataloader.sampler.round_up=False gives the {world_size} ranks epochs of unequal length '
        f'over the {len(loader.dataset)} samples ({uneven[0]} iterations on rank 0, {uneven[1]} on rank '
        f'{world_size - 1}): their collective calls fall out of step and the run hangs; set round_up=True '
        f'(the default: each epoch padded to one length)'
    )


def where_in_run(runner: Any) -> str:
    """The iteration that just ran, as a log line names it: ``'iteration 12 (epoch 2)'`` in an
    epoch-based run, ``'iteration 12 of 184375'`` in an iteration-based one (no epochs there)."""
    loop = runner.train_loop
    if isinstance(loop, IterBasedTrainLoop):
        return f'iteration {runner.iter + 1} of {loop.max_iters}'
    return f'iteration {runner.iter + 1} (epoch {runner.epoch + 1})'


class SkipProgress:
    """Log lines while a resumed run skips the batches it already trained, by their indices (every
    one since the start for an iteration-based run; a batch sampler that reads each sample's size,
    as MMDetection's ``AspectRatioBatchSampler`` does, takes seconds for a late iteration of a COCO
    schedule): one every ``every_s`` seconds with the rate and the time left, and one when done."""

    def __init__(self, logger: Any, total: int, every_s: float) -> None:
        self.logger, self.total, self.every_s = logger, total, every_s
        self.done = 0
        self.start = self.last = time.monotonic()

    def step(self) -> None:
        """One batch skipped."""
        self.done += 1
        now = time.monotonic()
        took = now - self.start
        if self.done == self.total:
            self.logger.info(f'resume: the {self.total} batches already trained skipped in {_clock(took)}')
        elif now - self.last >= self.every_s:
            rate = self.done / max(took, 1e-9)
            self.logger.info(
                f'resume: {self.done} of the {self.total} batches already trained skipped '
                f'({rate:.1f} batches/s, about {_clock((self.total - self.done) / rate)} left)'
            )
            self.last = now


def _clock(seconds: float) -> str:
    """``'0:02:05'``."""
    return str(timedelta(seconds=round(seconds)))


class ResumableLoopMixin:
    """What both loops share: a loader with keyed samples (built as mmengine's loops build it),
    the saved state given by ``RNGStateHook``, and the progress lines of the batches a resumed run
    skips (``skip_log_interval``: seconds between two, a loop argument:
    ``train_cfg=dict(type=..., skip_log_interval=60)``)."""

    resume_rng_state: Optional[dict] = None
    dataloader: Any

    def __init__(
        self, runner: Any, dataloader: Any, *args: Any, skip_log_interval: float = 60.0, **kwargs: Any
    ) -> None:
        number = isinstance(skip_log_interval, (int, float)) and not isinstance(skip_log_interval, bool)
        if not number or skip_log_interval < 0:
            raise ConfigError(
                f'train_cfg.skip_log_interval must be a number of seconds >= 0, got {skip_log_interval!r}'
            )
        BaseLoop.__init__(self, runner, dataloader)  # type: ignore[arg-type]  (builds a config's loader)
        key_samples(self.dataloader, runner.seed)  # before mmengine's iteration-based loop starts workers
        super().__init__(runner, self.dataloader, *args, **kwargs)
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
        """One epoch; a resumed one skips (fetches and drops) the batches already trained. One
        resumed from a checkpoint saved by iteration at its last batch (``done = length``, before
        the epoch's end: its validation, epoch checkpoint and by-epoch schedule step) trains
        nothing and runs its end; the next epoch starts at its first batch."""
        saved = self._pop_rng_state()
        record = saved_record(saved) if saved is not None else None
        state = record['state'] if record is not None else None
        if record is not None:
            restore_data_seed(self.dataloader, record['seed'], record.get('data_seed'))
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
        if state is not None:  # making the iterator draws nothing from it (a generator of its own)
            restore_rng_state(state)
        self.dataloader.batch_sampler.passes = self._epoch  # the keys' epoch, for a sampler without one
        trained = 0 < done == length  # saved by iteration at the epoch's last batch, before its end
        if trained:
            after = self._epoch + 2 <= self._max_epochs
            self.runner.logger.info(
                f'resume: epoch {self._epoch + 1} had trained all its {length} batches (saved at its '
                f'last iteration, before its end): nothing is trained again, its end runs now'
                + (f' and the run goes on at the first batch of epoch {self._epoch + 2}' if after else '')
            )
        elif done:
            self.runner.logger.info(
                f'resume: epoch {self._epoch + 1} continues at batch {done + 1} of {length} '
                f'(the first {done} are skipped, nothing loaded)'
            )
            progress = SkipProgress(self.runner.logger, done, self.skip_log_interval)
            self.dataloader.batch_sampler.skip_next(done, progress)
        if not trained:  # an epoch trained whole before the stop loads nothing
            for idx, data_batch in enumerate(iter(self.dataloader), start=done):
                self.run_iter(idx, data_batch)
        with warnings.catch_warnings():
            if trained:  # its schedule steps before this process's first optimizer step, as it should
                warnings.filterwarnings('ignore', message=EARLY_STEP_WARNING)
            self.runner.call_hook('after_train_epoch')
        self._epoch += 1


class _ResumedIterator:
    """A resumed iteration-based run's data iterator. mmengine's ``run`` calls it ``skip`` times
    and drops what it gets: those calls load nothing. The next one makes the loop's iterator anew
    (after the loop's before-train hooks, on workers started now, with the saved seed given back),
    its batch sampler skipping the ``skip`` batches by their indices, and gives the saved random
    state back right before the first batch not trained yet."""

    renew = True  # PreemptionHook: it starts its workers itself, at its first batch

    def __init__(self, loop: 'ResumableIterBasedTrainLoop', skip: int, state: Optional[dict]) -> None:
        self.loop, self.skip, self.state = loop, skip, state
        self.dropped = 0
        self.iterator: Optional[_InfiniteDataloaderIterator] = None

    def __iter__(self) -> '_ResumedIterator':
        return self

    def __next__(self) -> Any:
        if self.iterator is None:
            if self.dropped < self.skip:
                self.dropped += 1
                return None
            self.iterator = self._start()
        return next(self.iterator)

    def _start(self) -> _InfiniteDataloaderIterator:
        """The iterator where the saved run stood. A sampler with epochs (``DefaultSampler``, as
        the COCO configs name) is set to the pass the run had reached, as mmengine's iterator does
        at the end of each (its count of passes too); ``InfiniteSampler`` makes one pass."""
        loader, logger = self.loop.dataloader, self.loop.runner.logger
        per_pass = len(loader)
        sampler = loader.batch_sampler.sampler
        passes, rest = divmod(self.skip, per_pass) if makes_passes(loader) and per_pass else (0, self.skip)
        logger.info(
            f'resume: iteration {self.skip + 1} is batch {rest + 1} of pass {passes + 1} over the '
            f'training data; the {self.skip} batches already trained are skipped, nothing loaded'
        )
        if passes:
            sampler.set_epoch(passes)
        loader.batch_sampler.skip_next(rest, SkipProgress(logger, rest, self.loop.skip_log_interval))
        iterator = fresh_iterator(loader)
        iterator._epoch = passes  # mmengine's count, which it gives the sampler at the end of a pass
        if self.state is not None:
            restore_rng_state(self.state)
        return iterator


@LOOPS.register_module()
class ResumableIterBasedTrainLoop(ResumableLoopMixin, IterBasedTrainLoop):
    """``IterBasedTrainLoop`` that restores the random state on resume (module docstring). Same
    arguments as mmengine's."""

    def run(self) -> Any:
        """mmengine's, on an iterator that gives the saved seed and random state back where the
        saved run stood (:class:`_ResumedIterator`)."""
        saved = self._pop_rng_state()
        if saved is not None:
            record = saved_record(saved)
            restore_data_seed(self.dataloader, record['seed'], record.get('data_seed'))
            self.dataloader_iterator = _ResumedIterator(self, self._iter, record['state'])
        return super().run()


#: mmengine's train loops → the name of their resumable twin here
RESUMABLE_TWINS: dict[type, str] = {
    EpochBasedTrainLoop: ResumableEpochBasedTrainLoop.__name__,
    IterBasedTrainLoop: ResumableIterBasedTrainLoop.__name__,
}
