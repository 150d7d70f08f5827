"""A resumed run goes on with its config's optimizer options and schedule, not with those saved
in its checkpoint (mmengine's resume loads them over the config's without a word): the lr of each
iteration after the resume is what a run of the new config from the start has there, the weight
decay is the config's, and one log line names each change. A resume with the run's own config
changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mmengine.hooks import Hook
from toy_runner import toy_runner

VALUES = [1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]


class LrLog(Hook):
    """The lr and weight decay of the first param group at each training iteration."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float, float]] = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        group = runner.optim_wrapper.param_groups[0]
        self.seen.append((runner.iter, group['lr'], group['weight_decay']))


def _logged_run(work_dir, max_iters: int, resume: bool = False, **kwargs):
    """A toy run over :data:`VALUES` with a checkpoint every 4 iterations: the (iteration, lr,
    weight decay) of each iteration, and the runner."""
    log = LrLog()
    runner = toy_runner(
        work_dir, VALUES, max_iters=max_iters, hooks=[log], resume=resume, checkpoint_interval=4, **kwargs
    )
    runner.train()
    return log.seen, runner


def _run(work_dir, lr: float, milestones: list[int], decay: float, max_iters: int, resume: bool = False):
    seen, runner = _logged_run(
        work_dir,
        max_iters,
        resume,
        optimizer=dict(type='SGD', lr=lr, momentum=0.9, weight_decay=decay),
        param_scheduler=[
            dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
            dict(type='MultiStepLR', milestones=milestones, gamma=0.5, by_epoch=False, begin=0, end=8),
        ],
    )
    return seen, (Path(runner.log_dir) / f'{runner.timestamp}.log').read_text()


@pytest.mark.parametrize('changed', [True, False], ids=['new-settings', 'own-config'])
def test_a_resumed_run_goes_on_with_its_configs_settings(changed: bool, tmp_path) -> None:
    old = dict(lr=0.1, milestones=[2, 3], decay=0.0)
    new = dict(lr=0.2, milestones=[5, 7], decay=1e-3) if changed else old
    _run(tmp_path / 'run', **old, max_iters=4)  # iter_4.pth
    resumed, log = _run(tmp_path / 'run', **new, max_iters=8, resume=True)
    fresh, _ = _run(tmp_path / 'fresh', **new, max_iters=8)
    assert [i for i, *_ in resumed] == [4, 5, 6, 7]
    assert resumed == fresh[4:]  # the config's lrs (new: from 0.2, halved at 5 and 7) and decay
    lines = [line for line in log.splitlines() if 'replace the checkpoint' in line]
    if not changed:
        assert lines == []
        return
    assert len(lines) == 1, lines
    for part in (
        'optimizer.param_groups[0].weight_decay 0 -> 0.001',
        'param_scheduler[1](MultiStepLR).milestones [2, 3] -> [5, 7]',
        'param_scheduler[0](LinearLR).base_values [0.1] -> [0.2]',
        "the config's schedule goes on where the run stopped (lr 0.2)",
    ):
        assert part in lines[0], lines[0]


def test_a_work_dir_saved_with_the_stock_loop_named_resumes_mid_epoch_as_it_was_saved(tmp_path) -> None:
    """A config saved by dna_mm 0.1.0 names mmengine's ``EpochBasedTrainLoop`` and no
    ``RNGStateHook`` (its runner put dna_mm's in itself); its mid-epoch checkpoint holds their
    state. Resumed with that config, the run goes on at the next batch, as it was saved, to the
    weights of the run never stopped (mmengine's loop would train the epoch again, 3 iterations
    past the end), with one warning naming what to add to the config."""
    import shutil

    from toy_runner import weights

    def run(work_dir, loop: str, rng_hook: bool, resume: bool = False):
        runner = toy_runner(
            work_dir,
            VALUES[:4],
            checkpoint_interval=3,
            resume=resume,
            rng_hook=rng_hook,
            train_cfg=dict(type=loop, max_epochs=2),
            default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=3, by_epoch=False)),
        )
        runner.train()
        return runner

    whole = run(tmp_path / 'whole', 'ResumableEpochBasedTrainLoop', rng_hook=True)
    saved = tmp_path / 'saved'
    saved.mkdir()
    shutil.copy(tmp_path / 'whole' / 'iter_3.pth', saved)  # epoch 1, batch 3 of 4
    (saved / 'last_checkpoint').write_text(str(saved / 'iter_3.pth'))
    resumed = run(saved, 'EpochBasedTrainLoop', rng_hook=False, resume=True)
    assert resumed.iter == whole.iter == 8 and resumed.epoch == 2
    assert torch.equal(weights(resumed), weights(whole))
    log = (Path(resumed.log_dir) / f'{resumed.timestamp}.log').read_text()
    assert (
        log.count('resume: the checkpoint was written by ResumableEpochBasedTrainLoop and RNGStateHook') == 1
    )


def test_a_checkpoint_without_optimizer_or_schedule_goes_on_at_the_configs_schedule(tmp_path) -> None:
    """A ``best_*.pth`` (mmengine's ``CheckpointHook`` saves it without the optimizer's and the
    schedulers' state) resumed: mmengine would start the schedule at step 0 again (the warm-up
    replayed at the end of the run); the config's schedule goes on where the run stopped (a
    scheduler by epoch and one by iteration), and one warning says what starts afresh."""

    def run(work_dir, max_epochs: int, resume: bool = False):
        log = LrLog()
        runner = toy_runner(
            work_dir,
            VALUES[:4],
            hooks=[log],
            resume=resume,
            train_cfg=dict(type='ResumableEpochBasedTrainLoop', max_epochs=max_epochs),
            param_scheduler=[
                dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
                dict(type='MultiStepLR', milestones=[1], gamma=0.5, by_epoch=True),
            ],
        )
        runner.train()
        return runner, log.seen

    first, _ = run(tmp_path / 'first', max_epochs=1)
    best = tmp_path / 'best'
    first.save_checkpoint(  # as mmengine's CheckpointHook._save_best_checkpoint after epoch 1
        str(best),
        'best_acc_epoch_1.pth',
        save_optimizer=False,
        save_param_scheduler=False,
        meta=dict(epoch=first.epoch, iter=first.iter),
        by_epoch=False,
    )
    (best / 'last_checkpoint').write_text(str(best / 'best_acc_epoch_1.pth'))
    resumed, seen = run(best, max_epochs=2, resume=True)
    _, fresh = run(tmp_path / 'fresh', max_epochs=2)
    assert [i for i, *_ in seen] == [4, 5, 6, 7]
    assert seen == fresh[4:] and {lr for _, lr, _ in seen} == {0.05}
    log = (Path(resumed.log_dir) / f'{resumed.timestamp}.log').read_text()
    lines = [line for line in log.splitlines() if 'holds no' in line]
    assert len(lines) == 1 and 'WARNING' in lines[0], lines
    for part in (
        f"resume: {best / 'best_acc_epoch_1.pth'} holds no optimizer and no scheduler state",
        "the config's schedule is replayed to where the run stopped (lr 0.05)",
        'the optimizer starts afresh',
    ):
        assert part in lines[0], lines[0]


def test_a_schedule_saved_in_another_layout_goes_on_at_the_converted_step() -> None:
    """A warm-up over epoch 1 and a step at epoch 2, converted to iterations: 5 an epoch on 2
    ranks, 10 on 1. The 2-rank schedulers' state after epoch 1, resumed by the 1-rank run's
    (``convert``: iteration ``i`` there is ``2 i`` here), go on at step 10 of the 1-rank schedule,
    the warm-up over, and name no change: the config is the run's. Without ``convert`` the
    config's schedulers would be replayed to step 5 (the warm-up half done again)."""
    from mmengine.optim import LinearLR, MultiStepLR, OptimWrapper

    from dna_mm.engine.resume_settings import apply_config_settings, config_settings

    def build(epoch_length: int, steps: int = 0) -> tuple[OptimWrapper, list]:
        wrapper = OptimWrapper(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1))
        schedulers = [
            LinearLR.build_iter_from_epoch(wrapper, start_factor=0.2, end=1, epoch_length=epoch_length),
            MultiStepLR.build_iter_from_epoch(wrapper, milestones=[2], gamma=0.1, epoch_length=epoch_length),
        ]
        for _ in range(steps):
            wrapper.step()
            for s in schedulers:
                s.step()
        return wrapper, schedulers

    saved_wrapper, saved = build(5, steps=5)  # 2 ranks, after epoch 1
    for convert, lr in ((lambda it: 2 * it, 0.1), (None, 0.1 * (0.2 + 0.8 * 5 / 9))):
        wrapper, schedulers = build(10)  # this run: 1 rank
        config = config_settings(wrapper, schedulers)
        wrapper.load_state_dict(saved_wrapper.state_dict())
        for s, state in zip(schedulers, saved, strict=True):
            s.load_state_dict(state.state_dict())
        changes = apply_config_settings(wrapper, schedulers, config, convert)
        assert wrapper.param_groups[0]['lr'] == pytest.approx(lr)
        if convert is not None:
            assert changes == []  # the iteration counts are the layout's, not a change of the user's
            assert [s.state_dict()['_global_step'] for s in schedulers] == [10, 10]
            assert wrapper.param_groups[0]['lr'] == build(10, steps=10)[0].param_groups[0]['lr']
        else:  # the defect: epoch 1's warm-up counted in the 1-rank run's iterations
            assert 'param_scheduler[0](LinearLR).end 5 -> 10' in changes


def test_a_one_cycle_run_resumes_and_its_checkpoint_loads_weights_only(tmp_path) -> None:
    """mmengine's OneCycleLR keeps its annealing function in its state, which a weights-only load
    refuses: the checkpoint leaves it out (the config's scheduler has its own), so the run resumes
    to the lrs of a run never stopped, and tools/test.py reads the file."""
    from dna_mm.checkpoint import read_checkpoint

    one_cycle = dict(type='OneCycleLR', eta_max=0.5, total_steps=8, by_epoch=False, anneal_strategy='linear')

    def run(work_dir, max_iters: int, resume: bool = False) -> list[tuple[int, float, float]]:
        return _logged_run(work_dir, max_iters, resume, param_scheduler=[one_cycle])[0]

    full = run(tmp_path / 'full', 8)
    run(tmp_path / 'cut', 4)  # iter_4.pth
    saved = read_checkpoint(str(tmp_path / 'cut' / 'iter_4.pth'))  # weights only: refused before
    assert (
        'anneal_func' not in saved['param_schedulers'][0] and saved['param_schedulers'][0]['total_steps'] == 8
    )
    assert run(tmp_path / 'cut', 8, resume=True) == full[4:]
