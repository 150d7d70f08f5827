"""Mean class accuracy over the classes the labels hold: a config's ``AccMetric`` (MMAction2's
name, dna_mm's class) gives it; MMAction2's function counts a class that is only predicted as
0 %, and the two agree wherever every predicted class is labelled."""

from __future__ import annotations

import numpy as np
import pytest
from mmaction.evaluation.functional import mean_class_accuracy as mmaction_mean_class_accuracy
from mmaction.registry import METRICS
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope

import dna_mm  # noqa: F401  (registers dna_mm's AccMetric)
from dna_mm.evaluation.class_accuracy import AccMetric, mean_class_accuracy


def _scores(preds: list[int], classes: int = 4) -> list[np.ndarray]:
    return [np.eye(classes)[p] for p in preds]


def test_a_class_predicted_but_held_by_no_video_is_left_out() -> None:
    """The audit's case: 16 videos of class 2, 15 right, one predicted as class 3."""
    scores, labels = _scores([2] * 15 + [3]), [2] * 16
    assert mean_class_accuracy(scores, labels) == pytest.approx(15 / 16)
    assert mmaction_mean_class_accuracy(scores, labels) == pytest.approx(15 / 32)  # class 3 as 0 %


def test_the_same_as_mmaction2s_where_every_predicted_class_is_labelled() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, 200).tolist()
    scores = list(rng.random((200, 5)))
    assert mean_class_accuracy(scores, labels) == pytest.approx(mmaction_mean_class_accuracy(scores, labels))
    per_class = [
        np.mean([np.argmax(s) == c for s, y in zip(scores, labels, strict=True) if y == c]) for c in range(5)
    ]
    assert mean_class_accuracy(scores, labels) == pytest.approx(np.mean(per_class))


def test_a_configs_acc_metric_computes_it_and_says_when_mmaction2s_differs(caplog) -> None:
    init_default_scope('mmaction')
    metric = METRICS.build(dict(type='AccMetric', metric_list=('top_k_accuracy', 'mean_class_accuracy')))
    assert type(metric) is AccMetric
    logger = MMLogger.get_current_instance()  # print_log's; it does not propagate to caplog's
    logger.addHandler(caplog.handler)
    try:
        results = metric.calculate(_scores([2] * 15 + [3]), [2] * 16)
        assert results['mean1'] == pytest.approx(0.9375) and results['top1'] == pytest.approx(0.9375)
        said = 'mCA 93.75 is the mean over the 1 class the labels hold; MMAction2 gives 46.88, counting the '
        assert said + '1 class predicted but held by no sample (3) as 0 %' in caplog.text
        caplog.clear()
        metric.calculate(_scores([0, 1, 2, 3]), [0, 1, 2, 3])
        assert 'MMAction2 gives' not in caplog.text
    finally:
        logger.removeHandler(caplog.handler)
