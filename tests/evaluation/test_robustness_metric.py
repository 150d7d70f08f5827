"""RobustnessMetric on crafted predictions, and the OOD evaluation set-up around it."""

from __future__ import annotations

import math

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import METRICS
from tolerance import ROUNDING, assert_close_as

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
    ece = sum(abs(c - k) for c, k in zip(conf, correct, strict=True)) / 4
    assert_close_as(out['ece'], ece, ulps=ROUNDING, dtype=torch.float32)  # float32 probabilities
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
    rmsce = math.sqrt(((p[0] - 1) ** 2 + p[1] ** 2) / 2)
    assert_close_as(m.compute_metrics(m.results)['rmsce'], rmsce, ulps=ROUNDING, dtype=torch.float32)
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
    # in: 0.9, 0.8, 0.7; out: 0.6, 0.85 (see tests/analysis/test_measures_and_maps.py)
    assert (out['auroc'], out['aupr'], out['fpr95']) == pytest.approx((4 / 6, 0.75, 2 / 3))
    m = _metric(ood_ann_file=str(tmp_path / 'ood.txt'), ood_data_prefix='/elsewhere')
    m.process(None, _samples(probs, [0, 1, 0, -1, -1], files))
    with pytest.raises(ValueError, match='no test sample is in the OOD list'):
        m.compute_metrics(m.results)
    with pytest.raises(FileNotFoundError, match='missing.txt'):
        _metric(ood_ann_file=str(tmp_path / 'missing.txt'))


def test_with_ood_evaluation_sets_up_the_concat_and_keeps_the_metric_args(tmp_path) -> None:

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
        labels_optional=True,  # an OOD list's lines are paths alone
    )
    assert cfg.test_evaluator == dict(
        type='RobustnessMetric', beta=7, ood_ann_file=str(tmp_path / 'ood.txt'), ood_data_prefix='/ood'
    )
    # the dataset named by its class (a config's own import), not by its registered name
    from dna_mm.datasets import RobustVideoDataset

    by_class = Config(
        dict(test_dataloader=dict(dataset=dict(ind, type=RobustVideoDataset)), test_evaluator={})
    )
    with_ood_evaluation(by_class, str(tmp_path / 'ood.txt'))
    assert by_class.test_dataloader.dataset.datasets[1]['labels_optional'] is True
