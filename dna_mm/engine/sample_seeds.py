"""Each training sample draws from random streams of its own, seeded by where it stands in the run.

A sample's augmentation (random crops, flips, frame offsets, a replacement for an unreadable
video) draws from Python's ``random``, numpy's and torch's global generators. In a data-loader
worker those streams run on from sample to sample, so what a sample draws depends on every sample
that worker loaded before it, on the number of workers and, across epochs, on
``persistent_workers``. A resumed run could only get there by loading again every batch already
trained. Here a sample is loaded under generators seeded with

    ``SeedSequence((seed, rank, epoch, batch, slot))``

(the run's ``seed``, the process's rank, the sampler's epoch, the batch's place in the pass over
the batch sampler, the sample's place in its batch), so a batch is a function of its place alone.
A sampler without an ``epoch`` (mmengine's and its libraries' finite samplers all have one) counts
as its epoch the passes over it that ended (:attr:`KeyedBatchSampler.passes`); an endless one
makes one pass. So:

* the same whatever ``num_workers`` and ``persistent_workers`` are (and the same in the main
  process, whose own streams, which dropout and the RPN sampler draw from, a sample there leaves
  as it found them);
* a resumed run starts the batch sampler where the saved run stood by its indices only
  (:meth:`KeyedBatchSampler.skip_next`): nothing is loaded twice.

The loader gets a ``generator`` of its own too (unless it has one), for the base seed torch draws
each time it makes an iterator: the main process's streams no longer depend on when, or whether
(``persistent_workers``), that happens.

:func:`key_samples` sets this up on a built loader (:mod:`dna_mm.engine.loops` does, for the
loops a config names). The indices carry their keys: a :class:`SampleKey` is the ``int`` the
batch sampler gave, the dataset under :class:`SeededSamples` gets it back as a plain ``int``.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from itertools import islice
from typing import Any, Iterator, Optional, Protocol

import numpy as np
import torch
from mmengine.dist import get_dist_info
from torch.utils.data import DataLoader, Dataset, IterableDataset, Sampler, get_worker_info

from ..errors import ConfigError


class SkipCounter(Protocol):
    """What follows a skip (``dna_mm.engine.loops.SkipProgress``): called once a batch skipped."""

    def step(self) -> None: ...


class SampleKey(int):
    """A dataset index with the entropy its sample's streams are seeded from
    (``(seed, rank, epoch, batch, slot)``)."""

    entropy: tuple[int, ...]

    def __new__(cls, index: int, entropy: tuple[int, ...]) -> 'SampleKey':
        key = super().__new__(cls, index)
        key.entropy = entropy
        return key

    def __reduce__(self) -> tuple:  # to the workers, with its entropy
        return SampleKey, (int(self), self.entropy)


def seed_streams(entropy: tuple[int, ...]) -> None:
    """Seed Python's ``random``, numpy's global generator and torch's CPU generator from
    ``entropy`` (non-negative ints; each stream gets its own words of the seed sequence)."""
    words = np.random.SeedSequence([e & 0xFFFFFFFFFFFFFFFF for e in entropy]).generate_state(8)
    random.seed(int.from_bytes(words[:2].tobytes(), 'little'))
    np.random.seed(words[2:6])
    torch.default_generator.manual_seed(int.from_bytes(words[6:].tobytes(), 'little'))  # not CUDA's


@contextmanager
def own_streams(entropy: tuple[int, ...]) -> Iterator[None]:
    """Streams seeded from ``entropy`` inside; in the main process, the streams as they were
    afterwards (a worker's streams serve its samples only)."""
    main = get_worker_info() is None
    if main:
        saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    seed_streams(entropy)
    try:
        yield
    finally:
        if main:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.set_rng_state(saved[2])


class SeededSamples(Dataset):
    """``dataset`` whose samples, asked for by a :class:`SampleKey`, are loaded under their own
    streams (:func:`own_streams`); a plain index loads as ``dataset`` does. Every other attribute is
    ``dataset``'s, read or set (``metainfo``, the skip counters; MMDetection's
    ``PipelineSwitchHook`` sets ``pipeline``)."""

    def __init__(self, dataset: Dataset) -> None:
        object.__setattr__(self, 'dataset', dataset)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: int) -> Any:
        if not isinstance(idx, SampleKey):
            return self.dataset[idx]
        with own_streams(idx.entropy):
            return self.dataset[int(idx)]

    def __getattr__(self, name: str) -> Any:
        if name.startswith('__') or name == 'dataset':  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.dataset, name, value)


class KeyedBatchSampler(Sampler):
    """``batch_sampler``'s batches, each index a :class:`SampleKey`. ``sampler`` and every other
    attribute are ``batch_sampler``'s, read or set (mmengine sets the epoch through
    ``batch_sampler.sampler``).

    Args:
        batch_sampler: The loader's batch sampler (torch's ``BatchSampler``, MMDetection's
            ``AspectRatioBatchSampler``, ...).
        seed: The run's seed (``runner.seed``; a resumed run gives the saved one back).
        rank: This process's rank.

    Attributes:
        passes: The passes over the batch sampler that ended: the keys' epoch when the sampler has
            no ``epoch`` (an epoch-based loop sets it to its epoch).
    """

    _own = ('batch_sampler', 'seed', 'rank', 'passes', '_skip', '_progress')  # others: batch_sampler's

    def __init__(self, batch_sampler: Any, seed: int, rank: int) -> None:
        self.batch_sampler, self.seed, self.rank = batch_sampler, seed, rank
        self.passes = 0
        self._skip = 0
        self._progress: Optional[SkipCounter] = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._own:
            object.__setattr__(self, name, value)
        else:
            setattr(self.batch_sampler, name, value)

    @property
    def sampler(self) -> Any:
        return self.batch_sampler.sampler

    def __getattr__(self, name: str) -> Any:
        if name.startswith('__') or name == 'batch_sampler':  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.batch_sampler, name)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def skip_next(self, batches: int, progress: Optional[SkipCounter] = None) -> None:
        """Make the next pass start after its first ``batches`` batches, drawn from the batch
        sampler and dropped without loading anything; what an epoch shorter than that leaves is
        skipped at the start of the next pass. ``progress.step()`` after each batch skipped."""
        if batches < 0:
            raise ValueError(f'skip_next: batches must be >= 0, got {batches}')
        self._skip, self._progress = batches, progress

    def __iter__(self) -> Iterator[list[SampleKey]]:
        epoch = int(getattr(self.sampler, 'epoch', self.passes))  # DefaultSampler's; else passes
        batches = iter(self.batch_sampler)
        skip, progress, self._skip = self._skip, self._progress, 0
        skipped = 0
        for _ in islice(batches, skip):
            skipped += 1
            if progress is not None:
                progress.step()
        self._skip = skip - skipped  # left by a pass shorter than the skip
        for batch, indices in enumerate(batches, start=skipped):
            yield [SampleKey(i, (self.seed, self.rank, epoch, batch, slot)) for slot, i in enumerate(indices)]
        self.passes += 1  # the pass ended (an endless sampler's never does)


def key_samples(loader: DataLoader, seed: int) -> DataLoader:
    """Give ``loader`` keyed batches and seeded samples (module docstring), before it makes an
    iterator; ``loader`` itself, for a chain. Keyed already: left as it is.

    Raises:
        ConfigError: ``loader`` has no batch sampler (``batch_size=None``) or an iterable dataset.
    """
    if isinstance(loader.batch_sampler, KeyedBatchSampler):
        return loader
    if loader.batch_sampler is None or isinstance(loader.dataset, IterableDataset):
        raise ConfigError(
            "train_dataloader: dna_mm's training loops load a map-style dataset in batches "
            f'(a batch_size); got dataset {type(loader.dataset).__name__} with batch_size={loader.batch_size}'
        )
    rank, _ = get_dist_info()
    if loader.generator is None:  # the base seed of each iterator: not from torch's global stream
        loader.generator = torch.Generator().manual_seed(int(seed) + rank)
    # the DataLoader refuses these two once built (an iterator would hold the old ones); none exists yet
    object.__setattr__(loader, 'batch_sampler', KeyedBatchSampler(loader.batch_sampler, int(seed), rank))
    object.__setattr__(loader, 'dataset', SeededSamples(loader.dataset))
    return loader
