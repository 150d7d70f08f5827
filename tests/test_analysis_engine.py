"""RobustnessMetric on crafted predictions; AlphaLoggerHook in a real short training."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch
from conftest import DEMO_CONFIG, tiny_run_options
from mmengine.config import Config, DictAction
from mmengine.registry import HOOKS, METRICS

import dna_mm  # noqa: F401


def _samples(probs, labels, files=None):
    files = files or [f'v{i}.mp4' for i in range(len(labels))]
    return [
        dict(pred_scores=dict(item=torch.tensor(p)), gt_labels=dict(item=torch.tensor([y])), filename=f)
        for p, y, f in zip(probs, labels, files, strict=True)
    ]


def _metric(**kw):
    from mmaction.registry import METRICS as MMACTION_METRICS

    assert MMACTION_METRICS.get('RobustnessMetric') is METRICS.get(
        'RobustnessMetric'
    )  # root, seen from mmaction
    return METRICS.build(dict(type='RobustnessMetric', **kw))


def test_metric_values_on_crafted_predictions() -> None:
    # max probabilities 0.9 / 0.7 / 0.6 / 0.4 (each in its own 1/15-wide bin); right, wrong, right, wrong
    probs = [[0.9, 0.1, 0.0], [0.3, 0.7, 0.0], [0.6, 0.4, 0.0], [0.4, 0.35, 0.25]]
    labels = [0, 0, 0, 1]
    m = _metric(beta=1)
    m.process(None, _samples(probs, labels))
    out = m.compute_metrics(m.results)
    conf, correct = [0.9, 0.7, 0.6, 0.4], [1, 0, 1, 0]
    assert out['acc'] == 0.5 and out['num_samples'] == 4
    # bins of one sample in increasing confidence, the most confident (0.9, right) dropped
    assert out['rmsce'] == pytest.approx(math.sqrt((0.4**2 + 0.4**2 + 0.7**2) / 4))
    # most confident first: right, wrong, right, wrong
    assert out['aurra'] == pytest.approx((1 + 1 / 2 + 2 / 3 + 2 / 4) / 4)
    # equal-width ECE, one sample per bin: mean |correct - conf|
    assert out['ece'] == pytest.approx(
        sum(abs(c - k) for c, k in zip(conf, correct, strict=True)) / 4, abs=1e-6
    )
    m = _metric(beta=1, drop_last_bin=False)
    m.process(None, _samples(probs, labels))
    assert m.compute_metrics(m.results)['rmsce'] == pytest.approx(
        math.sqrt((0.1**2 + 0.4**2 + 0.4**2 + 0.7**2) / 4)
    )


def test_metric_scores_are_checked_and_logits_softmaxed() -> None:
    logits = [[2.0, 0.0], [0.0, 1.0]]
    m = _metric(beta=1, drop_last_bin=False)
    m.process(None, _samples(logits, [0, 0]))
    with pytest.raises(ValueError, match="scores='logits'"):
        m.compute_metrics(m.results)
    m = _metric(beta=1, drop_last_bin=False, scores='logits')
    m.process(None, _samples(logits, [0, 0]))
    p = torch.tensor(logits).softmax(-1).max(-1).values
    assert m.compute_metrics(m.results)['rmsce'] == pytest.approx(
        math.sqrt(((p[0] - 1) ** 2 + p[1] ** 2) / 2), abs=1e-6
    )
    m = _metric(beta=100)
    m.process(None, _samples([[1.0, 0.0]], [0]))
    assert math.isnan(m.compute_metrics(m.results)['rmsce'])  # too few samples: NaN and a warning


def test_metric_ood_mode_splits_by_the_ood_list(tmp_path) -> None:
    (tmp_path / 'ood.txt').write_text('a.mp4\nsub/b.mp4 3\n')
    files = ['/data/id/x.mp4', '/data/id/y.mp4', '/data/id/z.mp4', '/data/ood/a.mp4', '/data/ood/sub/b.mp4']
    probs = [[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4], [0.15, 0.85]]
    m = _metric(beta=1, ood_ann_file=str(tmp_path / 'ood.txt'), ood_data_prefix='/data/ood/')
    m.process(None, _samples(probs, [0, 1, 0, -1, -1], files))
    out = m.compute_metrics(m.results)
    assert out['num_ood'] == 2 and out['num_samples'] == 3 and out['acc'] == 1.0
    # in: 0.9, 0.8, 0.7; out: 0.6, 0.85 (see tests/test_analysis.py)
    assert (out['auroc'], out['aupr'], out['fpr95']) == pytest.approx((4 / 6, 0.75, 2 / 3))
    m = _metric(ood_ann_file=str(tmp_path / 'ood.txt'), ood_data_prefix='/elsewhere')
    m.process(None, _samples(probs, [0, 1, 0, -1, -1], files))
    with pytest.raises(ValueError, match='no test sample is in the OOD list'):
        m.compute_metrics(m.results)
    with pytest.raises(FileNotFoundError, match='missing.txt'):
        _metric(ood_ann_file=str(tmp_path / 'missing.txt'))


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
    cfg.custom_hooks = [dict(type='SkippedVideosHook'), dict(type='AlphaLoggerHook', interval=3)]
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


def test_with_ood_evaluation_sets_up_the_concat_and_keeps_the_metric_args(tmp_path) -> None:
    from mmengine.config import Config

    from dna_mm.evaluation import with_ood_evaluation

    pipeline = [dict(type='DecordInit'), dict(type='PackActionInputs')]
    ind = dict(type='RobustVideoDataset', ann_file='in.txt', data_prefix=dict(video='v'), pipeline=pipeline)
    cfg = Config(
        dict(
            test_dataloader=dict(batch_size=1, dataset=ind),
            test_evaluator=[dict(type='AccMetric'), dict(type='RobustnessMetric', beta=7)],
        )
    )
    with pytest.raises(FileNotFoundError, match='missing.txt'):
        with_ood_evaluation(cfg, str(tmp_path / 'missing.txt'))
    (tmp_path / 'ood.txt').write_text('a.mp4\n')
    with_ood_evaluation(cfg, str(tmp_path / 'ood.txt'), '/ood')
    ds = cfg.test_dataloader.dataset
    assert ds.type == 'ConcatDataset' and ds.datasets[0] == ind
    assert ds.datasets[1] == dict(
        type='RobustVideoDataset',
        ann_file=str(tmp_path / 'ood.txt'),
        data_prefix=dict(video='/ood'),
        pipeline=pipeline,
        test_mode=True,
    )
    assert cfg.test_evaluator == dict(
        type='RobustnessMetric', beta=7, ood_ann_file=str(tmp_path / 'ood.txt'), ood_data_prefix='/ood'
    )
