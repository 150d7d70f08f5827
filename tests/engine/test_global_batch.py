"""The recipe's global batch by gradient accumulation (dna_mm.engine.global_batch): the chosen steps,
the iteration-based schedule, and an SGD step equal to one on the whole global batch, in one
process and (slow) in two gloo processes."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, free_port, run_cmd, run_main, tiny_run_options
from mmengine.config import Config
from tolerance import SUMMED, assert_close_as

from dna_mm.checkpoint import read_checkpoint
from dna_mm.engine.global_batch import (
    LAYOUT_KEY,
    BatchLayout,
    accumulation_steps,
    apply_global_batch,
    layout_iteration,
    scale_iteration_schedule,
)
from dna_mm.errors import ConfigError


def test_the_steps_reach_the_recipes_global_batch(monkeypatch) -> None:
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    assert cfg.global_batch_size == 64 and cfg.auto_scale_lr.base_batch_size == 64
    lines = apply_global_batch(cfg, 'none')
    assert cfg.optim_wrapper.accumulative_counts == 8
    assert lines[0].startswith('global batch 64 = 1 process x 8 clips x 8 accumulation steps')
    assert cfg.custom_hooks[-1] == dict(type='GlobalBatchHook', global_batch=64, changes=[])
    assert cfg.param_scheduler[0].milestones == [11, 14]  # epoch-based: unchanged
    monkeypatch.setenv('WORLD_SIZE', '8')  # the authors' node: no accumulation
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    apply_global_batch(cfg, 'pytorch')
    assert cfg.optim_wrapper.accumulative_counts == 1
    monkeypatch.setenv('SLURM_NTASKS', '3')  # not a divisor: the closest, and a warning
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    lines = apply_global_batch(cfg, 'slurm')
    assert cfg.optim_wrapper.accumulative_counts == 3 and lines[1].startswith('warning: global_batch_size=64')
    assert accumulation_steps(64, 16, 8) == 1  # more than the global batch: no accumulation
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    assert apply_global_batch(cfg, 'none', 0) == [] and 'accumulative_counts' not in cfg.optim_wrapper
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    cfg.optim_wrapper.accumulative_counts = 4  # the user's, which the global batch replaces: said
    lines = apply_global_batch(cfg, 'none')
    assert cfg.optim_wrapper.accumulative_counts == 8
    assert lines[1].startswith('warning: optim_wrapper.accumulative_counts=4 replaced by 8, which reaches')
    cfg = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_ntu60.py'))
    cfg.auto_scale_lr.enable = True
    with pytest.raises(ConfigError, match='two answers to one question'):
        apply_global_batch(cfg, 'none')


def test_an_iteration_schedule_keeps_its_length_in_optimizer_steps() -> None:
    """ViTDet's 184,375 iterations at 32 images: with 4 accumulation steps every count in
    iterations is multiplied by 4 (warm-up, milestones, length, intervals)."""
    cfg = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_coco.py'))
    batch = cfg.train_dataloader.batch_size
    cfg.global_batch_size = 4 * batch
    apply_global_batch(cfg, 'none')
    warmup, steps = cfg.param_scheduler
    assert cfg.optim_wrapper.accumulative_counts == 4
    assert (warmup.begin, warmup.end) == (0, 1000)
    assert (steps.end, steps.milestones) == (4 * 184375, [4 * 163889, 4 * 177546])
    assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval) == (4 * 184375, 4 * 5000)
    assert cfg.default_hooks.checkpoint.interval == 4 * 5000
    assert scale_iteration_schedule(Config.fromfile(DEMO_CONFIG), 4) == []  # epoch-based: nothing


def _train(work_dir, root, batch: int, global_batch: str) -> list[str]:
    """Two epochs of the tiny demo model on the 8 training clips, no randomness in the data or
    the model, SGD with momentum; the final weights."""
    opts = [o for o in tiny_run_options(root, epochs=2) if 'batch_size' not in o]
    opts += [
        f'train_dataloader.batch_size={batch}',
        'train_dataloader.dataset.pipeline.1.test_mode=True',  # fixed frames
        'optim_wrapper.optimizer.type=SGD',
        'optim_wrapper.optimizer.lr=0.1',
        'optim_wrapper.optimizer.momentum=0.9',
        'optim_wrapper.optimizer.weight_decay=1e-4',
        'default_hooks.checkpoint.interval=2',
        'train_cfg.val_begin=3',  # no validation
    ]
    args = [DEMO_CONFIG, '--work-dir', str(work_dir), '--seed', '0', '--global-batch', global_batch]
    return [*args, '--cfg-options', *opts]


def _weights(work_dir) -> dict:
    return read_checkpoint(str(work_dir / 'epoch_2.pth'))['state_dict']


def _assert_same(a: dict, b: dict) -> None:
    assert_close_as(a, b, ulps=2 * SUMMED)  # two optimizer steps: two gradients' round-off


def test_an_accumulated_step_is_the_step_on_the_global_batch(tiny_video_set) -> None:
    """mmengine's OptimWrapper with 2 accumulation steps of 4 real clips gives the weights of
    steps on the 8 clips at once: two SGD steps with momentum, weight decay and clipping."""
    from mmaction.registry import MODELS
    from mmengine.dataset import Compose, pseudo_collate
    from mmengine.optim import build_optim_wrapper

    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.model.backbone.update(embed_dims=32, num_heads=2, num_transformer_layers=1)  # tiny
    cfg.model.cls_head.in_channels = 32
    pipeline = Compose(cfg.test_pipeline)
    lines = (tiny_video_set / 'train.txt').read_text().splitlines()
    samples = [
        pipeline(
            dict(
                filename=str(tiny_video_set / 'videos' / ln.split()[0]),
                label=int(ln.split()[1]),
                start_index=0,
                modality='RGB',
            )
        )
        for ln in lines
    ]
    optim = dict(
        type='OptimWrapper',
        optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4),
        clip_grad=dict(max_norm=5),
    )

    def train(batch: int, steps: int) -> dict:
        torch.manual_seed(0)
        model = MODELS.build(cfg.model).train()
        wrapper = build_optim_wrapper(model, dict(optim, accumulative_counts=steps))
        wrapper.initialize_count_status(model, 0, 2 * steps)
        for _ in range(2):  # two optimizer steps over the same 8 clips
            for i in range(0, 8, batch):
                with wrapper.optim_context(model):
                    data = model.data_preprocessor(pseudo_collate(samples[i : i + batch]), True)
                    losses = model(**data, mode='loss')
                wrapper.update_params(sum(losses.values()))
        return model.state_dict()

    whole = train(8, 1)
    _assert_same(train(4, 2), whole)
    with pytest.raises(AssertionError):  # a step per batch of 4: other weights (the test can fail)
        _assert_same(train(4, 1), whole)


@pytest.mark.slow
def test_train_py_accumulates_to_the_global_batch(tiny_video_set, tmp_path) -> None:
    """tools/train.py: 1 process x batch 4 x 2 accumulation steps = 1 process x batch 8."""
    out = run_main(['tools/train.py', *_train(tmp_path / 'b8', tiny_video_set, 8, '8')]).stdout
    assert 'global batch 8 = 1 process x 8 clips x 1 accumulation step' in out
    out = run_main(['tools/train.py', *_train(tmp_path / 'b4', tiny_video_set, 4, '8')]).stdout
    assert 'global batch 8 = 1 process x 4 clips x 2 accumulation steps' in out
    log = next((tmp_path / 'b4').glob('*/*.log')).read_text()
    assert 'global batch 8 = 1 process x 4 clips x 2 gradient accumulation steps' in log
    _assert_same(_weights(tmp_path / 'b8'), _weights(tmp_path / 'b4'))


@pytest.mark.slow
@pytest.mark.integration
def test_two_gloo_processes_accumulate_to_the_same_step(tiny_video_set, tmp_path) -> None:
    """2 processes (gloo) x batch 2 x 2 accumulation steps = 1 process x batch 8."""
    run_main(['tools/train.py', *_train(tmp_path / 'one', tiny_video_set, 8, '8')])
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()), 'OMP_NUM_THREADS': '1'}
    config, *args = _train(tmp_path / 'two', tiny_video_set, 2, '8')
    run_cmd(['bash', 'tools/dist_train.sh', config, '2', *args], env=env)
    log = next((tmp_path / 'two').glob('*/*.log')).read_text()
    assert 'global batch 8 = 2 processes x 2 clips x 2 gradient accumulation steps' in log
    _assert_same(_weights(tmp_path / 'one'), _weights(tmp_path / 'two'))


def test_a_saved_iteration_is_converted_to_another_layout_by_the_samples_trained() -> None:
    """``i2 = e · L2 + d2``, ``d2 · s2 = d1 · s1`` (the first ``d2`` batches of each rank are the
    epoch's first ``d2 · s2`` samples); what does not divide is trained again, never skipped."""
    one = BatchLayout(world_size=1, batch_size=4, accumulative_counts=4, iters_per_epoch=10)
    two = BatchLayout(world_size=2, batch_size=4, accumulative_counts=2, iters_per_epoch=5)
    assert layout_iteration(one, two, 10, by_epoch=True) == (5, 0)  # epoch 2 starts: not skipped
    assert layout_iteration(two, one, 5, by_epoch=True) == (10, 0)
    assert layout_iteration(one, two, 14, by_epoch=True) == (7, 0)  # 4 batches of 4 = 2 of 8
    assert layout_iteration(one, two, 13, by_epoch=True) == (6, 4)  # 12 samples: the last 4 again
    assert layout_iteration(two, one, 7, by_epoch=True) == (14, 0)
    assert layout_iteration(one, two, 20, by_epoch=True) == (10, 0)  # an iteration checkpoint at the end
    padded = BatchLayout(world_size=3, batch_size=4, accumulative_counts=1, iters_per_epoch=4)  # 48 > 40
    assert layout_iteration(one, padded, 10, by_epoch=True) == (4, 0)
    assert layout_iteration(padded, one, 4, by_epoch=True) == (10, 0)  # an epoch whole: this one whole
    assert layout_iteration(one, two, 13, by_epoch=False) == (6, 4)  # iteration-based: samples only
    assert one.per_step == two.per_step == 16
    assert BatchLayout.saved({LAYOUT_KEY: one.as_meta()}) == one and BatchLayout.saved({}) is None
    assert (
        two.describe(by_epoch=True) == '2 processes x 4 clips x 2 accumulation steps (5 iterations an epoch)'
    )
