"""A run resumed in another layout goes on where it stopped in samples seen when ``DefaultSampler``
pads each pass over the data (``N`` samples to ``W · ceil(N / W)``, so that every rank gets as
many): whole passes convert to whole passes and only the samples of the current one by samples
(:func:`dna_mm.engine.global_batch.layout_iteration`), in an iteration-based run too; none is
skipped and ``again`` counts exactly those trained twice. And the log lines of a resume at an
epoch's end, and of the global batch on ranks other than 0.

Fast: arithmetic, mmengine's ``DefaultSampler`` dealt by hand to the ranks of a layout, and
1-process toy runs (:mod:`toy_runner`) whose layouts differ by the batch of an iteration (it
converts as another number of ranks does: ``s = W · b``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.dataset import DefaultSampler
from mmengine.hooks import Hook
from toy_runner import toy_runner

from dna_mm.engine import global_batch
from dna_mm.engine.global_batch import BatchLayout, apply_global_batch, layout_iteration

VALUES = [round(1.0 + 0.1 * i, 1) for i in range(11)]  # 11 samples: 2 ranks pad a pass to 12


def _layout(world: int, batch: int, samples: int = 11) -> BatchLayout:
    """A layout on ``DefaultSampler``: ``ceil(ceil(N / W) / b)`` iterations a pass."""
    per_rank = -(-samples // world)
    return BatchLayout(world, batch, 1, -(-per_rank // batch))


def test_an_iteration_based_run_converts_whole_passes_padded_to_whole_passes() -> None:
    """The auditor's two resumes (11 samples, batch 1): 2 ranks stopped at iteration 8 (pass 1:
    6 iterations, 12 padded = 11 samples; then 4 samples of pass 2) go on at 1 rank's 15, not 16;
    1 rank stopped at 13 (pass 2: 2 samples) at 2 ranks' 7, nothing trained again."""
    one, two = _layout(1, 1), _layout(2, 1)
    assert (one.iters_per_epoch, two.iters_per_epoch) == (11, 6)
    assert layout_iteration(two, one, 8, by_epoch=False) == (15, 0)
    assert layout_iteration(one, two, 13, by_epoch=False) == (7, 0)
    assert layout_iteration(one, two, 14, by_epoch=False) == (7, 1)  # pass 2's third sample: again
    assert layout_iteration(two, one, 6 * 3 + 2, by_epoch=False) == (11 * 3 + 4, 0)  # the error grew
    # one endless stream (InfiniteSampler: no padding), or a layout with no pass length: samples
    assert layout_iteration(two, one, 8, by_epoch=False, passes=False) == (16, 0)
    assert layout_iteration(BatchLayout(2, 1, 1, 0), one, 8, by_epoch=False) == (16, 0)


def _dealt(layout: BatchLayout, samples: int, passes: int) -> list[list[tuple[int, int, int]]]:
    """Each iteration's ``(pass, place, sample)`` over the ranks of ``layout``, as
    ``DefaultSampler`` (shuffled, padded) deals them (rank ``r``'s ``k``-th at the pass's place
    ``r + k · W``) and a loader of ``batch_size`` batches them (the last short)."""
    ranks = []
    for rank in range(layout.world_size):
        sampler = DefaultSampler(list(range(samples)), shuffle=True, seed=3)
        sampler.rank, sampler.world_size = rank, layout.world_size  # as get_dist_info would give
        sampler.num_samples = -(-samples // layout.world_size)
        sampler.total_size = sampler.num_samples * layout.world_size
        ranks.append(sampler)
    out = []
    for p in range(passes):
        for sampler in ranks:
            sampler.set_epoch(p)
        order = [list(sampler) for sampler in ranks]
        b, w = layout.batch_size, layout.world_size
        for j in range(layout.iters_per_epoch):
            out.append(
                [(p, r + k * w, i) for r, rank in enumerate(order) for k, i in enumerate(rank) if k // b == j]
            )
    return out


@pytest.mark.parametrize('samples', [5, 10, 11, 13])
def test_no_sample_is_skipped_and_again_counts_those_trained_twice(samples: int) -> None:
    """Every stop of every pair of layouts (1-4 ranks x batch 1-3) on ``DefaultSampler``'s real
    order: the samples of the pass it stopped in that the saved run trained and those the resumed
    run trains in it make the pass whole, and ``again`` of them are both (the padding, which a run
    in that layout never stopped repeats as well, apart: the places from ``N`` on)."""
    layouts = [_layout(w, b, samples) for w in (1, 2, 3, 4) for b in (1, 2, 3)]
    dealt = {(p, q, i) for layout in layouts for batch in _dealt(layout, samples, 2) for p, q, i in batch}
    assert len(dealt) == len({(p, q) for p, q, _ in dealt})  # a pass's order: the same in every layout
    for saved in layouts:
        there = _dealt(saved, samples, 2)
        for now in layouts:
            here = _dealt(now, samples, 3)
            for stop in range(1, 2 * saved.iters_per_epoch):
                it, again = layout_iteration(saved, now, stop, by_epoch=False)
                pass_ = stop // saved.iters_per_epoch
                before = {i for batch in there[pass_ * saved.iters_per_epoch : stop] for _, q, i in batch}
                end = (pass_ + 1) * now.iters_per_epoch
                after = {i for batch in here[it:end] for p, q, i in batch if p == pass_ and q < samples}
                case = f'{samples} samples, {saved} at {stop} -> {now} at {it}'
                assert it // now.iters_per_epoch == pass_ or (it == end and len(before) == samples), case
                assert before | after == set(range(samples)), case  # none skipped
                assert len(before & after) == again, case


class Trained(Hook):
    """The values of each batch a run trains."""

    def __init__(self) -> None:
        self.batches: list[list[float]] = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.batches.append([round(float(x), 1) for x in data_batch['inputs'][:, 0]])


def _run(work_dir: Path, batch: int, max_iters: int, resume_from: Path | None = None, interval: int = 100):
    """A toy run over :data:`VALUES` (in order, every pass) of ``batch`` samples an iteration,
    resumed from ``resume_from`` when given; the runner and what it trained."""
    trained = Trained()
    runner = toy_runner(
        work_dir,
        VALUES,
        max_iters=max_iters,
        hooks=[trained],
        checkpoint_interval=interval,
        resume=resume_from is not None,
        load_from=None if resume_from is None else str(resume_from),
    )
    runner._train_dataloader['batch_size'] = batch  # built in train(): another layout, one process
    runner.train()
    log = '\n'.join(p.read_text() for p in Path(runner.work_dir).glob('*/*.log'))
    return runner, trained.batches, log


def test_a_resumed_iteration_based_run_skips_and_repeats_no_padded_sample(tmp_path) -> None:
    """Batch 2 stopped at iteration 8 (pass 1 whole; 1.0-1.3 of pass 2) goes on at batch 1's
    iteration 15 with 1.4; batch 1 stopped at 13 (1.0, 1.1 of pass 2) at batch 2's 7 with
    [1.2, 1.3], no warning of samples trained again."""
    _, trained, _ = _run(tmp_path / 'two', 2, 8, interval=8)
    assert trained[6:] == [[1.0, 1.1], [1.2, 1.3]]
    runner, trained, log = _run(tmp_path / 'two_one', 1, 17, tmp_path / 'two' / 'iter_8.pth')
    # the passes' lengths in the line: they say why 8 iterations of 2 samples are 15 of 1, not 16
    assert (
        'resume: saved on 1 process x 2 clips x 1 accumulation step (6 iterations a pass over the data), '
        'going on on 1 process x 1 clip x 1 accumulation step (11 iterations a pass over the data): '
        'iteration 8 is iteration 15 here;'
    ) in log, log
    assert 'iteration 16 is batch 5 of pass 2' in log, log
    assert trained == [[1.4], [1.5]] and runner.iter == 17

    _, trained, _ = _run(tmp_path / 'one', 1, 13, interval=13)
    assert trained[11:] == [[1.0], [1.1]]
    runner, trained, log = _run(tmp_path / 'one_two', 2, 8, tmp_path / 'one' / 'iter_13.pth')
    assert 'iteration 13 is iteration 7 here' in log, log
    assert 'trained again' not in log, log
    assert trained == [[1.2, 1.3]] and runner.iter == 8


def test_an_epoch_resumed_at_its_last_batch_trains_nothing_again(tmp_path) -> None:
    """A checkpoint saved by iteration at an epoch's last batch (before the epoch's end): the line
    says the next epoch starts, which it does at its first batch, nothing skipped or repeated."""
    epochs = dict(type='ResumableEpochBasedTrainLoop', max_epochs=2)
    by_epoch = [dict(type='MultiStepLR', milestones=[1], gamma=0.5, by_epoch=True)]
    trained = Trained()
    toy_runner(
        tmp_path / 'a',
        VALUES[:6],
        hooks=[trained],
        checkpoint_interval=6,
        train_cfg=epochs,
        param_scheduler=by_epoch,
    ).train()
    assert len(trained.batches) == 12
    again = Trained()
    runner = toy_runner(
        tmp_path / 'b',
        VALUES[:6],
        hooks=[again],
        train_cfg=epochs,
        param_scheduler=by_epoch,
        resume=True,
        load_from=str(tmp_path / 'a' / 'iter_6.pth'),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        runner.train()
    # the epoch's schedule step comes before the resumed process's first optimizer step, as it should
    assert not [w for w in caught if 'before `optimizer.step()`' in str(w.message)]
    log = '\n'.join(p.read_text() for p in Path(runner.work_dir).glob('*/*.log'))
    assert 'batch 7 of 6' not in log, log
    assert 'resume: epoch 1 had trained all its 6 batches' in log, log
    assert 'goes on at the first batch of epoch 2' in log, log
    assert again.batches == trained.batches[6:] and runner.iter == 12 and runner.epoch == 2


def test_the_global_batch_is_logged_on_rank_0_only(monkeypatch) -> None:
    """``apply_global_batch`` runs on every rank before the runner (whose logger is rank 0's):
    each returns its lines, rank 0 alone logs them."""
    cfg = dict(
        global_batch_size=8,
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        train_dataloader=dict(batch_size=2),
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=10),
    )
    logged: list[str] = []
    monkeypatch.setattr(global_batch, 'print_log', lambda line, **kwargs: logged.append(line))
    monkeypatch.setenv('WORLD_SIZE', '2')
    for rank, times in (('1', 0), ('0', 1)):
        monkeypatch.setenv('RANK', rank)
        logged.clear()
        lines = apply_global_batch(Config(cfg), 'pytorch')
        assert lines[0].startswith('global batch 8 = 2 processes x 2 clips x 2 accumulation steps')
        assert lines[1].startswith('iteration-based schedule x2') and len(lines) == 2
        assert logged == lines * times, rank
