"""A resumed run goes on with its config's optimizer options and schedule, not with those saved
in its checkpoint (mmengine's resume loads them over the config's without a word): the lr of each
iteration after the resume is what a run of the new config from the start has there, the weight
decay is the config's, and one log line names each change. A resume with the run's own config
changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def _run(work_dir, lr: float, milestones: list[int], decay: float, max_iters: int, resume: bool = False):
    log = LrLog()
    runner = toy_runner(
        work_dir,
        VALUES,
        max_iters=max_iters,
        hooks=[log],
        resume=resume,
        checkpoint_interval=4,
        optimizer=dict(type='SGD', lr=lr, momentum=0.9, weight_decay=decay),
        param_scheduler=[
            dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
            dict(type='MultiStepLR', milestones=milestones, gamma=0.5, by_epoch=False, begin=0, end=8),
        ],
    )
    runner.train()
    return log.seen, (Path(runner.log_dir) / f'{runner.timestamp}.log').read_text()


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
