"""Evaluation helpers registered with MMEngine."""

from .dump import DumpPredictions
from .robustness import RobustnessMetric

__all__ = ["DumpPredictions", "RobustnessMetric"]
