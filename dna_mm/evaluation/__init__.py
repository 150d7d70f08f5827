"""Evaluation helpers registered with MMEngine."""

from .dump import DumpPredictions
from .robustness import RobustnessMetric, with_ood_evaluation

__all__ = ["DumpPredictions", "RobustnessMetric", "with_ood_evaluation"]
