"""Training samples skipped as unreadable, counted across the loader workers and ranks.

A dataset that skips an unreadable training sample (:class:`~.video_dataset.RobustVideoDataset`:
a video; :class:`~.coco_dataset.CheckedCocoDataset`: an image) names it in a warning and adds one
to its :class:`SharedCounter`; :class:`SkippedSamplesHook` logs the total, summed over every
worker and rank: after each epoch of an epoch-based run, every ``interval`` iterations (and at
the end) of an iteration-based one; silent while nothing was skipped.
"""

from __future__ import annotations

import multiprocessing
import warnings
from typing import Any, Iterator

import torch
from mmengine.dist import all_reduce, get_rank
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop

from ..errors import ConfigError


class SharedCounter:
    """A count shared by a process and the dataloader workers it starts (a ``multiprocessing.Value``
    they inherit or receive while being spawned) and by copies of the owning dataset
    (``copy.deepcopy``, mmengine's ``get_subset``).

    Args:
        noun: What is counted, for the log (``'video'``, ``'image'``).
    """

    def __init__(self, noun: str = 'sample') -> None:
        self.noun = noun
        self._value = multiprocessing.Value('q', 0)

    def add(self, n: int = 1) -> int:
        with self._value.get_lock():
            self._value.value += n
            return self._value.value

    @property
    def value(self) -> int:
        return self._value.value

    def __deepcopy__(self, memo: dict) -> 'SharedCounter':
        return self


def skip_counters(dataset: Any) -> dict[int, SharedCounter]:
    """The skip counters (by id: copies share one) of ``dataset`` and of the datasets it wraps
    (Concat / Repeat / ...)."""
    counters = (getattr(each, 'skipped', None) for each in within(dataset))
    return {id(c): c for c in counters if isinstance(c, SharedCounter)}


def within(dataset: Any) -> Iterator[Any]:
    """``dataset`` and every dataset it wraps (mmengine's ``ConcatDataset``'s ``datasets``,
    ``RepeatDataset`` / ``ClassBalancedDataset``'s ``dataset``), depth first."""
    yield dataset
    for inner in [*(getattr(dataset, 'datasets', None) or []), getattr(dataset, 'dataset', None)]:
        if inner is not None:
            yield from within(inner)


@HOOKS.register_module()
class SkippedSamplesHook(Hook):
    """Log how many training samples were skipped as unreadable, summed over the dataloader
    workers of every rank: after each training epoch of an epoch-based loop; every ``interval``
    iterations and after the last of an iteration-based one. Silent when none was.

    Args:
        interval: Iterations between two counts of an iteration-based loop (each count is one
            all-reduce of one integer).
    """

    priority = 'LOW'

    def __init__(self, interval: int = 500) -> None:
        if not isinstance(interval, int) or interval < 1:
            raise ConfigError(
                f'custom_hooks: SkippedSamplesHook: interval must be an int >= 1, got {interval!r}'
            )
        self.interval = interval
        self._reported = 0  # the total logged so far (this process's counters start at 0)
        self._since = 1  # the first iteration of the next report (iteration-based loops)

    def before_train(self, runner) -> None:
        self._since = runner.iter + 1  # a resumed run reports from its first new iteration

    def after_train_iter(self, runner, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        if not isinstance(runner.train_loop, EpochBasedTrainLoop) and self.every_n_train_iters(
            runner, self.interval
        ):
            self._report(runner, f'iterations {self._since}-{runner.iter + 1}')
            self._since = runner.iter + 2

    def after_train_epoch(self, runner) -> None:
        if isinstance(runner.train_loop, EpochBasedTrainLoop):
            self._report(runner, f'epoch {runner.epoch + 1}')
        elif runner.iter >= self._since:  # the iterations after the last report
            self._report(runner, f'iterations {self._since}-{runner.iter}')

    def _report(self, runner, span: str) -> None:
        counters = skip_counters(runner.train_dataloader.dataset)
        if not counters:
            return
        total = torch.tensor([sum(c.value for c in counters.values())], dtype=torch.int64)
        all_reduce(total, op='sum')
        total = int(total.item())
        new, self._reported = total - self._reported, total
        if new and get_rank() == 0:
            nouns = sorted({c.noun for c in counters.values()})
            what = f'{nouns[0]}(s)' if len(nouns) == 1 else f'sample(s) ({"/".join(nouns)})'
            runner.logger.warning(
                f'{span}: {new} unreadable training {what} skipped, summed over all dataloader workers '
                f'and ranks ({total} so far in this run); their paths are in the warnings above'
            )


@HOOKS.register_module()
class SkippedVideosHook(SkippedSamplesHook):
    """:class:`SkippedSamplesHook`'s earlier name, kept for one release (a ``FutureWarning``)."""

    def __init__(self, interval: int = 500) -> None:
        warnings.warn(
            "SkippedVideosHook is now SkippedSamplesHook (it counts images too); the old name goes in "
            "the next release: custom_hooks = [dict(type='SkippedSamplesHook'), ...]",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(interval)
