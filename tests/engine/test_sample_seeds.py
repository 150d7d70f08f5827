"""Keyed samples (``dna_mm.engine.sample_seeds``): a batch depends on its place in the run only, a
resumed run skips batches by their indices, and the main process's streams are left alone.

The loaders are mmengine's (``Runner.build_dataloader``: its samplers, worker seeding, collate),
over a dataset whose samples draw from the three global streams, as augmentations do."""

from __future__ import annotations

import pickle
import random
from typing import Any

import numpy as np
import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import DataLoader, Dataset

from dna_mm.datasets.skipped_samples import SharedCounter
from dna_mm.engine.sample_seeds import KeyedBatchSampler, SampleKey, SeededSamples, key_samples
from dna_mm.errors import ConfigError


class Drawing(Dataset):
    """``n`` samples, each its index and one draw from ``random``, numpy and torch; counts its
    loads (shared with the workers) and gives each one a width / height for MMDetection's
    ``AspectRatioBatchSampler`` (portrait for every third)."""

    metainfo = dict(classes=('a', 'b'))

    def __init__(self, n: int, counted: bool = True) -> None:
        self.n = n
        self.loads = SharedCounter() if counted else None  # one count whatever mmengine's build copies

    def __len__(self) -> int:
        return self.n

    def get_data_info(self, idx: int) -> dict:
        return dict(width=10, height=20 if idx % 3 == 0 else 5)

    def __getitem__(self, idx: int) -> dict:
        assert type(idx) is int, type(idx)  # the key stays above the dataset
        if self.loads is not None:
            self.loads.add()
        draws = [random.random(), float(np.random.rand()), float(torch.rand((), dtype=torch.float64))]
        return dict(index=idx, draws=torch.tensor(draws, dtype=torch.float64))


def rows(batch: dict) -> list[tuple]:
    """(index, draws) of each sample of a batch as mmengine's ``pseudo_collate`` gives it."""
    return [(i, tuple(d.tolist())) for i, d in zip(batch['index'], batch['draws'], strict=True)]


def loader(
    dataset: Dataset,
    *,
    workers: int = 0,
    persistent: bool = False,
    sampler: str = 'DefaultSampler',
    **more: Any,
) -> DataLoader:
    cfg = dict(
        dataset=dataset,
        batch_size=2,
        num_workers=workers,
        persistent_workers=persistent,
        sampler=dict(type=sampler, shuffle=True),
        **more,
    )
    return Runner.build_dataloader(cfg, seed=7)


def epochs(built: DataLoader, count: int) -> list[list[tuple]]:
    """Each epoch's samples as (index, draws), with the epoch set as mmengine's hook sets it."""
    seen = []
    for epoch in range(count):
        built.batch_sampler.sampler.set_epoch(epoch)
        seen.append([row for batch in built for row in rows(batch)])
    return seen


@pytest.mark.parametrize(
    'workers, persistent', [(1, False), (2, False), (2, True)], ids=['1 worker', '2 workers', '2 persistent']
)
def test_a_batch_is_the_same_whatever_the_workers(workers: int, persistent: bool) -> None:
    main = epochs(key_samples(loader(Drawing(10)), seed=7), 2)
    other = epochs(key_samples(loader(Drawing(10), workers=workers, persistent=persistent), seed=7), 2)
    assert other == main
    assert sorted(i for i, _ in main[0]) == list(range(10))
    assert main[0] != main[1]  # another epoch: another order and other draws
    assert len({draws for _, draws in main[0] + main[1]}) == 20  # every sample its own draws
    # without keys the draws depend on the workers: the comparison above can fail
    assert epochs(loader(Drawing(10)), 1) != epochs(loader(Drawing(10), workers=workers), 1)


@pytest.mark.parametrize('batching', ['BatchSampler', 'AspectRatioBatchSampler'])
def test_a_skip_loads_nothing_and_lands_on_the_batches_of_the_run(batching: str) -> None:
    more = {}
    if batching == 'AspectRatioBatchSampler':
        pytest.importorskip('mmdet.datasets')
        import mmdet.datasets  # noqa: F401  (registers it)

        more = dict(batch_sampler=dict(type='mmdet.AspectRatioBatchSampler'))
    full_run = key_samples(loader(Drawing(12), sampler='InfiniteSampler', **more), seed=7)
    batches = iter(full_run)
    full = [rows(next(batches)) for _ in range(9)]

    dataset = Drawing(12)
    resumed = key_samples(loader(dataset, sampler='InfiniteSampler', **more), seed=7)

    class Count:
        steps = 0

        def step(self) -> None:
            self.steps += 1

    count = Count()
    resumed.batch_sampler.skip_next(6, count)
    batches = iter(resumed)
    assert [rows(next(batches)) for _ in range(3)] == full[6:]
    assert dataset.loads.value == 6  # the 3 batches taken, none of the 6 skipped
    assert count.steps == 6


def test_a_skip_longer_than_a_pass_goes_on_in_the_next() -> None:
    full = loader(Drawing(6))  # 3 batches a pass
    keyed = KeyedBatchSampler(full.batch_sampler, seed=7, rank=0)
    passes = []
    for epoch in range(2):
        full.batch_sampler.sampler.set_epoch(epoch)
        passes.append([[(int(k), k.entropy) for k in batch] for batch in keyed])
    keyed.skip_next(4)
    full.batch_sampler.sampler.set_epoch(0)
    assert list(keyed) == []
    full.batch_sampler.sampler.set_epoch(1)
    assert [[(int(k), k.entropy) for k in batch] for batch in keyed] == passes[1][1:]
    assert passes[1][1][0][1] == (7, 0, 1, 1, 0)  # (seed, rank, epoch, batch, slot)


def test_a_sampler_without_epochs_gets_other_draws_each_pass_and_resumes_exactly() -> None:
    """torch's ``SequentialSampler`` has no ``epoch``: each pass that ended counts as one, so a
    sample drawn at the same place in the next pass draws anew; an epoch-based loop sets the
    count (a resume mid-epoch), and a skip that ends a pass counts it."""
    from torch.utils.data import SequentialSampler

    def keyed() -> DataLoader:
        dataset = Drawing(6)
        return key_samples(DataLoader(dataset, batch_size=2, sampler=SequentialSampler(dataset)), seed=7)

    run = keyed()
    passes = [[row for batch in run for row in rows(batch)] for _ in range(3)]
    assert [i for i, _ in passes[0]] == [i for i, _ in passes[1]] == list(range(6))
    assert passes[0] != passes[1] != passes[2]  # the same samples at the same places, other draws
    assert run.batch_sampler.passes == 3
    resumed = keyed()
    resumed.batch_sampler.passes = 1  # what the epoch-based loop sets, resumed in its second epoch
    resumed.batch_sampler.skip_next(1)
    assert [row for batch in resumed for row in rows(batch)] == passes[1][2:]
    crossed = keyed()  # an iteration-based resume at batch 5: one pass and one batch skipped
    crossed.batch_sampler.skip_next(4)
    assert list(crossed) == [] and crossed.batch_sampler.passes == 1
    assert [row for batch in crossed for row in rows(batch)] == passes[1][2:]


def test_the_main_process_streams_are_left_as_they_were() -> None:
    def seed() -> None:
        random.seed(3), np.random.seed(3), torch.manual_seed(3)

    def draw() -> tuple:
        return random.random(), float(np.random.rand()), torch.rand(2).tolist()

    seed()
    expected = draw()
    built = key_samples(loader(Drawing(6)), seed=7)
    seed()
    for _ in iter(built):  # making the iterator and loading in this process draw nothing from them
        pass
    assert draw() == expected


def test_keys_and_seeded_samples_travel_to_spawned_workers() -> None:
    key = pickle.loads(pickle.dumps(SampleKey(5, (7, 0, 1, 2, 3))))
    assert (type(key), int(key), key.entropy) == (SampleKey, 5, (7, 0, 1, 2, 3))
    samples = pickle.loads(pickle.dumps(SeededSamples(Drawing(6, counted=False))))
    assert samples.metainfo == Drawing.metainfo and len(samples) == 6
    draws = samples[key]['draws'].tolist()
    assert draws == SeededSamples(Drawing(6))[key]['draws'].tolist()  # the key alone decides
    assert samples[SampleKey(1, (7, 0, 1, 2, 3))]['draws'].tolist() == draws
    assert samples[SampleKey(1, (7, 0, 1, 2, 4))]['draws'].tolist() != draws


def test_a_loader_that_cannot_be_keyed_is_named() -> None:
    with pytest.raises(ConfigError, match=r'train_dataloader: .* in batches .*batch_size=None'):
        key_samples(DataLoader(Drawing(4), batch_size=None), seed=0)


@pytest.mark.cuda
def test_a_sample_leaves_the_cuda_streams_alone() -> None:
    """A sample loaded in the main process of a run on a GPU reseeds no CUDA generator (dropout,
    drop path and the RPN sampler draw from it)."""
    torch.cuda.manual_seed_all(3)
    expected = torch.rand(4, device='cuda').tolist()
    torch.cuda.manual_seed_all(3)
    for _ in iter(key_samples(loader(Drawing(6)), seed=7)):
        pass
    assert torch.rand(4, device='cuda').tolist() == expected


def test_what_hooks_set_on_the_loader_reaches_what_it_wraps() -> None:
    """MMDetection's ``PipelineSwitchHook`` sets ``train_dataloader.dataset.pipeline``."""
    built = loader(Drawing(4))
    inner_dataset, inner_batches = built.dataset, built.batch_sampler
    key_samples(built, seed=7)
    built.dataset.pipeline = 'switched'
    built.batch_sampler.drop_last = True
    assert inner_dataset.pipeline == 'switched' and built.dataset.pipeline == 'switched'
    assert inner_batches.drop_last is True and built.batch_sampler.seed == 7


class Tagged(Dataset):
    """Four samples whose ``pipeline`` makes them: ``dict(inputs=...)``."""

    def __init__(self) -> None:
        self.pipeline = Tag(1.0)

    def __len__(self) -> int:
        return 4

    def __getitem__(self, idx: int) -> dict:
        return self.pipeline(dict())


class Tag:
    """A pipeline that marks what it makes with ``value``."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, results: dict) -> dict:
        return dict(results, inputs=torch.full((2,), self.value))


class Seen(BaseModel):
    """Keeps the values of each training batch; ``loss = w · mean(inputs)``."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.seen: list[float] = []

    def forward(self, inputs, data_samples=None, mode='loss'):
        self.seen += inputs[:, 0].tolist()
        return dict(loss=self.w * inputs.mean())


@pytest.mark.parametrize('persistent', [False, True], ids=['workers', 'persistent workers'])
def test_mmdetections_pipeline_switch_reaches_the_keyed_loaders_workers(tmp_path, persistent: bool) -> None:
    """MMDetection's own ``PipelineSwitchHook`` (RTMDet's last epochs) in a run of dna_mm's loop:
    the epochs after the switch load through the new pipeline, in workers persistent or not."""
    from mmdet.engine.hooks import PipelineSwitchHook

    from dna_mm.engine import DnARunner

    model = Seen()
    runner = DnARunner(
        model=model,
        work_dir=str(tmp_path),
        train_dataloader=dict(
            dataset=Tagged(),
            sampler=dict(type='DefaultSampler', shuffle=True),
            collate_fn=dict(type='default_collate'),
            batch_size=2,
            num_workers=2,
            persistent_workers=persistent,
        ),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        train_cfg=dict(type='ResumableEpochBasedTrainLoop', max_epochs=3),
        default_hooks=dict(checkpoint=None, logger=dict(type='LoggerHook', interval=1)),
        custom_hooks=[PipelineSwitchHook(switch_epoch=1, switch_pipeline=[Tag(2.0)])],
        default_scope='mmengine',
        experiment_name=f'switch_{persistent}_{tmp_path.name}',
        randomness=dict(seed=0),
    )
    runner.train()
    assert model.seen == [1.0] * 4 + [2.0] * 8  # epoch 1 before the switch, epochs 2 and 3 after
