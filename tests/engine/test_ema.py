"""mmengine's ``EMAHook`` in dna_mm's runs: a checkpoint holds the average in ``state_dict`` and
the trained weights in ``ema_state_dict``; a resume without the hook goes on from the trained
weights (said in one warning), as the run with the hook trains them; with gradient accumulation
one warning says what the momentum means a step."""

from __future__ import annotations

from pathlib import Path

import torch
from conftest import DEMO_CONFIG, run_tool, tiny_run_options

from dna_mm.checkpoint import read_checkpoint


def ema_config(tmp_path: Path) -> Path:
    """The demo config with EMAHook added to its hooks (``[*_base_.custom_hooks, ...]``)."""
    child = tmp_path / 'ema_demo.py'
    child.write_text(
        f'_base_ = [{DEMO_CONFIG!r}]\n'
        "custom_hooks = [*_base_.custom_hooks, dict(type='EMAHook', momentum=0.5)]\n"
    )
    return child


def train(config, work_dir: Path, opts: list[str], *extra: str):
    return run_tool(
        ['tools/train.py', str(config), '--work-dir', str(work_dir), *extra, '--cfg-options', *opts]
    )


def test_a_resume_without_ema_goes_on_from_the_trained_weights(tiny_video_set, tmp_path) -> None:
    opts = [*tiny_run_options(tiny_video_set, epochs=2), 'default_hooks.checkpoint.interval=1']
    with_ema = tmp_path / 'with_ema'
    train(ema_config(tmp_path), with_ema, opts)
    saved = read_checkpoint(str(with_ema / 'epoch_2.pth'))
    trained = {k.removeprefix('module.'): v for k, v in saved['ema_state_dict'].items() if k != 'steps'}
    assert any(not torch.equal(saved['state_dict'][k], v) for k, v in trained.items())  # an average
    # the same run, resumed after epoch 1 by a config without the hook
    again = tmp_path / 'again'
    again.mkdir()
    (again / 'epoch_1.pth').write_bytes((with_ema / 'epoch_1.pth').read_bytes())
    (again / 'last_checkpoint').write_text(str(again / 'epoch_1.pth'))
    proc = train(DEMO_CONFIG, again, opts, '--resume')
    resumed = read_checkpoint(str(again / 'epoch_2.pth'))
    assert 'ema_state_dict' not in resumed
    for key, value in trained.items():  # the trained weights of the uninterrupted run, bit for bit
        assert torch.equal(resumed['state_dict'][key], value), key
    warning = (
        f'resume: {again / "epoch_1.pth"} was saved with EMAHook (its state_dict holds the moving '
        'average, ema_state_dict the trained weights) and this run has none: training goes on from the '
        'trained weights, without the average (custom_hooks with EMAHook keeps averaging)'
    )
    assert warning in proc.stdout + proc.stderr


def test_ema_with_gradient_accumulation_says_what_its_momentum_means(tiny_video_set, tmp_path) -> None:
    opts = [*tiny_run_options(tiny_video_set), 'optim_wrapper.accumulative_counts=4']
    proc = train(ema_config(tmp_path), tmp_path / 'work', opts)
    line = (
        'EMAHook averages after every iteration and an optimizer step takes 4 '
        "(optim_wrapper.accumulative_counts=4): each step's weights enter the average 4 times, its "
        'momentum 0.5 acting as 0.9375 a step; EMAHook momentum=0.1591 gives 0.5 a step'
    )
    assert line in proc.stdout + proc.stderr
