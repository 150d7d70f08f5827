"""Evaluation helpers registered with MMEngine."""

from .class_accuracy import AccMetric, mean_class_accuracy
from .dump import DumpPredictions, DumpResultsWhole, dump_evaluator
from .robustness import RobustnessMetric, with_ood_evaluation

__all__ = [
    "AccMetric",
    "mean_class_accuracy",
    "DumpPredictions",
    "DumpResultsWhole",
    "dump_evaluator",
    "RobustnessMetric",
    "with_ood_evaluation",
]
