"""Evaluation helpers registered with MMEngine."""
from .dump import DumpPredictions

__all__ = ["DumpPredictions"]
