"""With gradient accumulation each optimizer step takes the schedule's values at its window's first
iteration (dna_mm.engine.accumulated_schedule): the values a run on the global batch takes, step
by step, also across a resume inside a window.

Real ``DnARunner`` runs (:mod:`toy_runner`: SGD with momentum, the resumable iteration loop) in
this process; a torch step pre-hook records the values each ``optimizer.step()`` finds."""

from __future__ import annotations

import shutil
import warnings

import pytest
import torch
from conftest import DEMO_CONFIG
from mmengine.config import Config
from mmengine.hooks import Hook
from toy_runner import toy_runner

from dna_mm.checkpoint import read_checkpoint
from dna_mm.engine.accumulated_schedule import WINDOW_KEY
from dna_mm.engine.global_batch import scale_iteration_schedule

VALUES = [1.5, 2.0, 0.5, 3.0, 1.2, 0.8, 2.5, 1.1, 0.9, 1.7, 2.2, 0.6]
#: the schedules' values are products of a few float64 factors: equal to a few ulps
REL = 1e-12


class StepValues(Hook):
    """The lr and momentum of the first parameter group at each ``optimizer.step()``."""

    priority = 'LOWEST'

    def __init__(self) -> None:
        self.steps: list[float] = []  # lr, momentum, lr, momentum, ...

    def before_train(self, runner) -> None:
        def record(optimizer, args, kwargs) -> None:
            group = optimizer.param_groups[0]
            self.steps += [group['lr'], group['momentum']]

        runner.optim_wrapper.optimizer.register_step_pre_hook(record)


#: schedules over the 4 optimizer steps of a run on the global batch, each changing every step
SCHEDULES = {
    'linear warm-up of lr and momentum': [
        dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=4),
        dict(type='LinearMomentum', start_factor=0.5, by_epoch=False, begin=0, end=4),
    ],
    'polynomial': [dict(type='PolyLR', power=2.0, eta_min=0.01, by_epoch=False, begin=0, end=4)],
    'exponential': [dict(type='ExponentialLR', gamma=0.7, by_epoch=False, begin=0, end=4)],
    'step': [dict(type='StepLR', step_size=1, gamma=0.5, by_epoch=False)],
    'cosine': [dict(type='CosineAnnealingLR', T_max=3, eta_min=0.01, by_epoch=False, begin=0, end=4)],
}


def _schedule(name: str, k: int) -> list[dict]:
    """The schedule ``name`` scaled to ``k`` data iterations a step, as ``--global-batch`` does."""
    cfg = Config(dict(param_scheduler=SCHEDULES[name]))
    scale_iteration_schedule(cfg, k)
    return cfg.param_scheduler


def _run(work_dir, k: int, values=VALUES, schedule: str = 'linear warm-up of lr and momentum', **kwargs):
    seen = StepValues()
    runner = toy_runner(
        work_dir, values, hooks=[seen], accumulate=k, param_scheduler=_schedule(schedule, k), **kwargs
    )
    runner.train()
    return seen, runner


@pytest.mark.parametrize(
    'k, schedule', [(2, 'linear warm-up of lr and momentum'), *((3, name) for name in SCHEDULES)]
)
def test_each_accumulated_step_takes_the_values_of_the_run_on_the_global_batch(
    tmp_path, k: int, schedule: str
) -> None:
    whole, _ = _run(tmp_path / 'whole', 1, values=VALUES[: len(VALUES) // k], schedule=schedule)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        accumulated, runner = _run(tmp_path / 'accumulated', k, schedule=schedule)
    assert len(accumulated.steps) == len(whole.steps) == 2 * (len(VALUES) // k)
    assert accumulated.steps == pytest.approx(whole.steps, rel=REL)
    lrs = whole.steps[::2]
    assert len(set(lrs[:4])) == 4  # a new lr every step of the 4: the test can fail
    # the logged lr is the step's, over each window
    logged = runner.message_hub.get_scalar('train/lr').data[0]
    assert logged == pytest.approx([lr for lr in lrs for _ in range(k)], rel=REL)
    # PyTorch's "scheduler.step() before optimizer.step()" is not printed: accumulation does so by design
    assert not [w for w in caught if 'before `optimizer.step()`' in str(w.message)]


def test_a_schedule_by_epoch_converted_to_iterations_takes_the_global_batch_s_values(tmp_path) -> None:
    """The recipes' warm-up: one epoch of linear warm-up, then a cosine epoch, each counted in
    the epoch's iterations (``convert_to_iter_based``): 12 here, 4 on the global batch."""
    schedule = [
        dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
        dict(
            type='CosineAnnealingLR',
            T_max=1,
            eta_min=0.01,
            by_epoch=True,
            begin=1,
            end=2,
            convert_to_iter_based=True,
        ),
    ]
    loop = dict(type='ResumableEpochBasedTrainLoop', max_epochs=2)
    runs = {}
    for k, values in ((1, VALUES[:4]), (3, VALUES)):
        runs[k] = StepValues()
        toy_runner(
            tmp_path / str(k), values, hooks=[runs[k]], accumulate=k, param_scheduler=schedule, train_cfg=loop
        ).train()
    assert len(runs[3].steps) == len(runs[1].steps) == 2 * 8
    assert runs[3].steps == pytest.approx(runs[1].steps, rel=REL)


def test_a_run_resumed_inside_a_window_takes_the_window_s_first_values(tmp_path) -> None:
    full, _ = _run(tmp_path / 'full', 3, checkpoint_interval=4)  # steps after iterations 3, 6, 9, 12
    saved = tmp_path / 'full' / 'iter_4.pth'  # 1 pass into the second step's window (iterations 4-6)
    checkpoint = read_checkpoint(str(saved))
    assert checkpoint['meta'][WINDOW_KEY]['']['start'] == 3

    def resume(name: str, checkpoint_file) -> list[float]:
        work = tmp_path / name
        work.mkdir()
        shutil.copy(checkpoint_file, work / 'iter_4.pth')
        (work / 'last_checkpoint').write_text(str(work / 'iter_4.pth'))
        seen, _ = _run(work, 3, resume=True)
        return seen.steps

    assert resume('resumed', saved) == pytest.approx(full.steps[2:], rel=REL)
    del checkpoint['meta'][WINDOW_KEY]  # without the record the window's step takes its last value
    blind = tmp_path / 'blind.pth'
    torch.save(checkpoint, blind)
    steps = resume('blind', blind)
    assert steps[0] != pytest.approx(full.steps[2], rel=REL) and steps[2:] == pytest.approx(full.steps[4:])


def test_auto_scale_lr_scales_by_the_batch_of_an_optimizer_step(tmp_path) -> None:
    """``auto_scale_lr`` with 2 accumulation steps of batch 1 and ``base_batch_size=2``: a step
    sees 2 samples, the lr made for them stays (mmengine's ratio, 1 / 2, halved it)."""
    seen = StepValues()
    runner = toy_runner(tmp_path, VALUES[:4], hooks=[seen], accumulate=2, param_scheduler=[])
    runner.auto_scale_lr = dict(enable=True, base_batch_size=2)
    runner.train()
    assert seen.steps[::2] == pytest.approx([0.1, 0.1], rel=REL)
    assert Config.fromfile(DEMO_CONFIG).auto_scale_lr.base_batch_size == 8  # the demo's lr: for its batch


def test_auto_scale_lr_scales_the_base_lr_of_several_parameter_groups(tmp_path) -> None:
    """With a group per parameter (``paramwise_cfg``) mmengine logs a ``base_lr`` beside ``lr``, and
    its schedulers move it with the groups: scaled with them (batch 1, ``base_batch_size=2``: half
    the config's 0.1, under the step schedule), where mmengine left it at the config's."""
    runner = toy_runner(tmp_path, VALUES[:4], linear=True)
    runner.optim_wrapper['paramwise_cfg'] = dict(custom_keys={'linear': dict(lr_mult=0.1)})
    runner.auto_scale_lr = dict(enable=True, base_batch_size=2)
    runner.train()
    wrapper = runner.optim_wrapper
    assert len(wrapper.optimizer.param_groups) == 3  # w, linear.weight, linear.bias
    assert wrapper.optimizer.param_groups[0]['lr'] == pytest.approx(0.1 / 2 * 0.5, rel=REL)  # one step of 3
    assert wrapper.get_lr()['base_lr'] == pytest.approx([0.1 / 2 * 0.5], rel=REL)
