"""AlphaLoggerHook: α per layer logged in a real short training; without DnA, one warning."""

from __future__ import annotations

import argparse
import json

import pytest
import torch
from conftest import DEMO_CONFIG, tiny_run_options
from mmengine.config import Config, DictAction
from mmengine.registry import HOOKS

import dna_mm  # noqa: F401


def test_alpha_logger_hook_in_a_real_training(tiny_video_set, tmp_path) -> None:
    """Two tiny epochs through mmengine's Runner with the hook turned on by one config line."""
    from mmengine.runner import Runner
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert HOOKS.get('AlphaLoggerHook') is not None
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options(tiny_video_set, epochs=2)]).o)
    cfg.work_dir, cfg.val_cfg, cfg.val_dataloader, cfg.val_evaluator = str(tmp_path), None, None, None
    cfg.custom_hooks = [dict(type='SkippedSamplesHook'), dict(type='AlphaLoggerHook', interval=3)]
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend'), dict(type='TensorboardVisBackend')]
    runner = Runner.from_cfg(cfg)
    runner.train()  # 2 epochs × 4 iterations: logged at iterations 3, 6 and 8 (the last)

    (scalars,) = tmp_path.glob('*/vis_data/scalars.json')
    logged = [json.loads(line) for line in scalars.read_text().splitlines()]
    alpha_steps = [e['step'] for e in logged if 'alpha/temporal/layer0/mean' in e]
    assert alpha_steps == [3, 6, 8]
    last = next(e for e in logged if e['step'] == 8 and 'alpha/spatial/layer0/std' in e)
    attn = runner.model.backbone.transformer_layers.layers[0].attentions
    for group, wrapper in (('temporal', attn[0]), ('spatial', attn[1])):
        alpha = wrapper.attn.alpha.detach()
        assert last[f'alpha/{group}/layer0/mean'] == pytest.approx(float(alpha.mean()), abs=1e-6)
        assert last[f'alpha/{group}/layer0/max'] == pytest.approx(float(alpha.max()), abs=1e-6)
        assert last[f'alpha/{group}/layer0/min'] == pytest.approx(float(alpha.min()), abs=1e-6)
        assert last[f'alpha/{group}/layer0/std'] == pytest.approx(float(alpha.std()), abs=1e-6)
    assert last['alpha/temporal/layer0/mean'] != 0.5  # trained away from the initial value
    (events,) = tmp_path.glob('*/vis_data/events.out.tfevents.*')
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    assert [e.step for e in acc.Scalars('alpha/spatial/layer0/max')] == [3, 6, 8]
    (log,) = tmp_path.glob('*/*.log')
    assert 'alpha temporal layer 0 (iter 8): mean' in log.read_text()


def test_alpha_logger_hook_without_dna_warns_once(tiny_video_set, tmp_path, caplog) -> None:
    from dna_mm.engine import AlphaLoggerHook

    hook = AlphaLoggerHook(interval=1)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    runner = type('R', (), dict(model=model, logger=__import__('logging').getLogger('alpha-test')))()
    with caplog.at_level('WARNING', logger='alpha-test'):
        hook.before_train(runner)
    assert caplog.text.count('no DnA attention') == 1
    with caplog.at_level('DEBUG', logger='alpha-test'):
        for i in range(3):
            hook.after_train_iter(runner, i)  # nothing to log, no error, no repeated warning
    assert caplog.text.count('no DnA attention') == 1
    with pytest.raises(ValueError, match='interval'):
        AlphaLoggerHook(interval=0)
