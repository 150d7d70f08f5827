"""Non-finite losses: a real NaN (a learning rate that blows the weights up, a log of a negative
value) stops the run with one line naming the iteration and the value before the step is
applied, or (a setting) skips such steps, counts them and stops after N in a row; no checkpoint
with non-finite weights is written; the AMP loss scaler's own skips are not failures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, run_main, tiny_run_options
from toy_runner import toy_runner, weights

from dna_mm.checkpoint import read_checkpoint

#: the demo whose learning rate jumps by 1e15 after the first epoch (AdamW: 5e-4 -> 5e11)
BLOW_UP = """_base_ = [{demo!r}]
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, milestones=[1], gamma=1e15)]
default_hooks = dict(checkpoint=dict(interval=1))
"""


def _blow_up_run(tmp_path, tiny_video_set, *extra: str):
    config = tmp_path / 'blow_up.py'
    config.write_text(BLOW_UP.format(demo=DEMO_CONFIG))
    opts = [o for o in tiny_run_options(tiny_video_set, epochs=3) if not o.startswith('param_scheduler')]
    work = tmp_path / 'work'
    args = ['tools/train.py', str(config), '--seed', '0', '--work-dir', str(work)]
    return work, run_main([*args, '--cfg-options', *opts, *extra], check=False)


@pytest.mark.integration
def test_a_loss_gone_nan_stops_the_run_with_one_line_and_finite_checkpoints(tiny_video_set, tmp_path) -> None:
    work, proc = _blow_up_run(tmp_path, tiny_video_set)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py: error:')]
    assert len(errors) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    found = re.search(
        r'training stopped at iteration (\d+) \(epoch (\d)\): the (loss|gradient norm) is (nan|-?inf)\b',
        errors[0],
    )
    assert found, errors
    at, epoch, value = int(found[1]), int(found[2]), found[4]
    assert 'or skip such steps: --cfg-options default_hooks.non_finite.max_skips_in_a_row=N' in errors[0]
    print(f'\n{errors[0]}')
    assert at > 4 and epoch >= 2, (at, epoch, value)  # after epoch 1, at lr 5e11
    written = sorted(work.glob('*.pth'))
    assert written and (work / 'epoch_1.pth') in written
    for path in written:  # every checkpoint holds finite weights; the last one is named
        state = read_checkpoint(str(path))['state_dict']
        assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point()), path
    assert (work / 'last_checkpoint').read_text() == str(written[-1])


@pytest.mark.integration
def test_skipped_steps_are_counted_and_the_run_stops_after_n_in_a_row(tiny_video_set, tmp_path) -> None:
    work, proc = _blow_up_run(tmp_path, tiny_video_set, 'default_hooks.non_finite.max_skips_in_a_row=2')
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    skips = [ln for ln in proc.stdout.splitlines() if 'step skipped' in ln]
    assert len(skips) == 2, proc.stdout[-3000:]
    assert '(1 in a row of at most 2, 1 in this run)' in skips[0]
    assert '(2 in a row of at most 2, 2 in this run)' in skips[1]
    assert 'after 2 skipped in a row' in proc.stderr
    # skipping is on: the advice is not to turn it on
    assert 'max_skips_in_a_row=2 skipped as many as it allows' in proc.stderr, proc.stderr[-3000:]
    assert 'skip such steps' not in proc.stderr


def test_a_nan_step_is_skipped_counted_and_the_run_goes_on(tmp_path) -> None:
    """log(-1): a real NaN loss at iterations 2 and 5, each skipped; two in a row stop the run."""
    from dna_mm.engine import NonFiniteLossError, NonFiniteLossHook

    skip_one = dict(non_finite=dict(type='NonFiniteLossHook', max_skips_in_a_row=1))
    runner = toy_runner(tmp_path / 'skip', [2.0, -1.0, 3.0, 4.0, -1.0, 2.5], default_hooks=skip_one)
    runner.train()
    hook = next(h for h in runner.hooks if isinstance(h, NonFiniteLossHook))
    assert (hook.skipped, hook.in_a_row, hook.scaler_skips) == (2, 0, 0)
    assert torch.isfinite(weights(runner)).all()
    log = '\n'.join(p.read_text() for p in (tmp_path / 'skip').glob('*/*.log'))
    assert 'iteration 2 of 6: the loss is nan; step skipped (1 in a row of at most 1, 1 in this run)' in log
    assert 'iteration 5 of 6: the loss is nan; step skipped (1 in a row of at most 1, 2 in this run)' in log

    stop = toy_runner(tmp_path / 'stop', [2.0, -1.0, -1.0, 3.0], default_hooks=skip_one)
    with pytest.raises(NonFiniteLossError, match=r'iteration 3 of 4: the loss is nan after 1 skipped'):
        stop.train()


def test_a_skipped_step_changes_no_weight(tmp_path) -> None:
    from mmengine.hooks import Hook

    seen = []

    class Record(Hook):
        def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
            seen.append(weights(runner))

        def after_train(self, runner) -> None:
            seen.append(weights(runner))

    skip = dict(non_finite=dict(type='NonFiniteLossHook', max_skips_in_a_row=5))
    runner = toy_runner(tmp_path, [2.0, -1.0, 3.0], default_hooks=skip, hooks=[Record()])
    runner.train()
    assert not torch.equal(seen[0], seen[1])  # a finite step moved them
    assert torch.equal(seen[1], seen[2])  # the NaN step did not
    assert not torch.equal(seen[2], seen[3])  # and the next finite one did (momentum kept)


def test_no_checkpoint_with_non_finite_weights_is_written(tmp_path) -> None:
    """A NaN batch through BatchNorm makes its running statistics NaN even though the step is
    skipped; the next checkpoint is refused, naming the buffer, and the one before stays."""
    from dna_mm.engine import NonFiniteLossError

    runner = toy_runner(
        tmp_path,
        [2.0, 3.0, -1.0, 4.0],
        norm=True,
        checkpoint_interval=2,
        default_hooks=dict(non_finite=dict(type='NonFiniteLossHook', max_skips_in_a_row=3)),
    )
    with pytest.raises(
        NonFiniteLossError, match=r'checkpoint not written at iteration 4: the weight norm\.running_mean'
    ):
        runner.train()
    assert sorted(p.name for p in tmp_path.glob('*.pth*')) == ['iter_2.pth']
    assert (tmp_path / 'last_checkpoint').read_text() == str(tmp_path / 'iter_2.pth')


@pytest.mark.cuda
def test_the_amp_loss_scalers_own_skips_are_not_failures(tmp_path) -> None:
    """fp16 with a dynamic GradScaler starting at 2**40: the first steps overflow in fp16 and the
    scaler skips them (lowering its scale); the run goes on, nothing counted as a failure."""
    from mmengine.optim import AmpOptimWrapper

    from dna_mm.engine import NonFiniteLossHook

    runner = toy_runner(tmp_path, [2.0, 3.0, 0.5, 4.0] * 8, linear=True)  # mmengine puts it on the GPU
    runner.optim_wrapper = dict(
        type='AmpOptimWrapper',
        dtype='float16',
        loss_scale=dict(init_scale=2.0**40),
        optimizer=dict(type='SGD', lr=0.01),
    )
    runner.train()
    assert isinstance(runner.optim_wrapper, AmpOptimWrapper)
    hook = next(h for h in runner.hooks if isinstance(h, NonFiniteLossHook))
    assert hook.scaler_skips > 0 and hook.skipped == 0, (hook.scaler_skips, hook.skipped)
    assert runner.optim_wrapper.loss_scaler.get_scale() < 2.0**40
    assert torch.isfinite(weights(runner)).all()


def test_a_resume_from_a_checkpoint_whose_optimizer_state_is_not_finite_names_it(tmp_path) -> None:
    """A flipped byte in a checkpoint's optimizer state (weights intact) would resume and blame the
    next NaN loss on the learning rate. ``--resume FILE`` names the state and the weight instead;
    a resume that searches the work dir skips the file for the one before, and the run ends as
    an uninterrupted one."""
    from dna_mm.checkpoint import CorruptCheckpointError, read_checkpoint

    values = [1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    toy_runner(tmp_path / 'run', values, max_iters=4, checkpoint_interval=2).train()
    damaged = tmp_path / 'run' / 'iter_4.pth'
    checkpoint = read_checkpoint(str(damaged))
    checkpoint['optimizer']['state'][0]['momentum_buffer'][2] = float('nan')
    torch.save(checkpoint, damaged)

    explicit = toy_runner(tmp_path / 'run', values, max_iters=6, resume=True, load_from=str(damaged))
    with pytest.raises(CorruptCheckpointError) as refused:
        explicit.train()
    assert str(refused.value) == (
        f'cannot resume from {damaged}: the optimizer state momentum_buffer of the weight w holds NaN '
        f'or inf values (a damaged file); resume from an earlier checkpoint, or start from its weights '
        f'with a fresh optimizer: load_from={damaged}'
    )
    searched = toy_runner(tmp_path / 'run', values, max_iters=6, checkpoint_interval=2, resume=True)
    searched.train()
    log = (Path(searched.log_dir) / f'{searched.timestamp}.log').read_text()
    assert f'resume: skipping {damaged}, which does not load' in log
    assert f'resume: continuing from {tmp_path / "run" / "iter_2.pth"}' in log
    straight = toy_runner(tmp_path / 'straight', values, max_iters=6)
    straight.train()
    assert torch.equal(weights(searched), weights(straight))
