"""Figures, one module per consumer, one look (:mod:`.style`: a colour per attention member, the
same in every figure; line styles, panels, the legend below them, error bars; figures outside
pyplot, written by the Agg renderer):

* :mod:`.analyses` — the analyses' figures (``tools/analysis/analyze_attention.py``):
  :data:`PLOTTERS`, one ``plot_*`` per analysis;
* :mod:`.relevance_maps` — :func:`plot_relevance` (``tools/analysis/relevance_maps.py``);
* :mod:`.study` — the denoising study's figures and each member's label (:func:`method_label`)
  (``tools/analysis/study.py``).
"""

from .analyses import (
    PLOTTERS,
    plot_alpha,
    plot_cvv,
    plot_entropy,
    plot_intruders,
    plot_redundancy,
    plot_robustness,
)
from .relevance_maps import RELEVANCE_CMAPS, plot_relevance
from .study import method_label, plot_accuracy_vs_distractors, plot_target_mass

__all__ = [
    'method_label',
    'PLOTTERS',
    'RELEVANCE_CMAPS',
    'plot_accuracy_vs_distractors',
    'plot_alpha',
    'plot_cvv',
    'plot_entropy',
    'plot_intruders',
    'plot_redundancy',
    'plot_relevance',
    'plot_robustness',
    'plot_target_mass',
]
