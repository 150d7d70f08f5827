"""Evaluation helpers registered with MMEngine."""

from .dump import DumpPredictions, DumpResultsWhole, dump_evaluator
from .robustness import RobustnessMetric, with_ood_evaluation

__all__ = ["DumpPredictions", "DumpResultsWhole", "dump_evaluator", "RobustnessMetric", "with_ood_evaluation"]
