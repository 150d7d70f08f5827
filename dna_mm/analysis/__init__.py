"""The DnA paper's analyses (Sec. 4.4 and Appendix C) as a library.

* :mod:`.measures` — pure functions on tensors: :func:`attention_entropy`,
  :func:`head_redundancy`, :func:`value_alignment` (C(V+, V-)), :func:`branch_cosine`,
  :func:`intruder_dimensions`, :func:`token_distance`, :func:`alpha_stats`;
* :mod:`.calibration` — :func:`rms_calibration_error`, :func:`aurra`, :func:`ood_measures`;
* :mod:`.collector` — :class:`AttentionCollector` / :class:`TokenDistanceCollector` (hooks on a
  real model, running reductions), :func:`eager_attention`, the hook point, and
  :class:`~.collector.EagerObserver`, the ``with`` block of the collectors that use it;
* :mod:`.relevance` — Chefer relevance per branch (:func:`relevance_maps`);
* :mod:`.target_mass` — the share of attention on an object's patches
  (:func:`attention_mass`, :class:`TargetMassCollector`); :mod:`.study` — the denoising study's
  evaluation and statistics (``tools/analysis/study.py``), :mod:`.study_runs` — its runs on disk
  (what each was made with, which a study started again may keep);
* :mod:`.models`, :mod:`.report` — loading a checkpoint, one analysis run as JSON;
* :mod:`.plots` — the figures, one module per tool (``analyze_attention.py``,
  ``relevance_maps.py``, ``study.py``) in one style.
"""

from ..evaluation.calibration import aurra, fpr_at_recall, ood_measures, rms_calibration_error
from ..models.sites import AttentionSite, find_attention_sites
from .collector import AttentionCollector, TokenDistanceCollector, branch_outputs, eager_attention
from .measures import (
    alpha_stats,
    attention_entropy,
    branch_cosine,
    frobenius_cosine,
    head_redundancy,
    intruder_dimensions,
    row_entropy,
    token_distance,
    value_alignment,
)
from .models import AnalysisModel, load_model
from .relevance import Relevance, relevance_maps
from .report import ANALYSES, analyze
from .target_mass import TargetMassCollector, attention_mass, box_patch_mask, uniform_mass

__all__ = [
    'attention_entropy',
    'row_entropy',
    'head_redundancy',
    'frobenius_cosine',
    'value_alignment',
    'branch_cosine',
    'intruder_dimensions',
    'token_distance',
    'alpha_stats',
    'rms_calibration_error',
    'aurra',
    'ood_measures',
    'fpr_at_recall',
    'AttentionCollector',
    'TokenDistanceCollector',
    'eager_attention',
    'branch_outputs',
    'AttentionSite',
    'find_attention_sites',
    'AnalysisModel',
    'load_model',
    'Relevance',
    'relevance_maps',
    'ANALYSES',
    'analyze',
    'TargetMassCollector',
    'attention_mass',
    'uniform_mass',
    'box_patch_mask',
]
