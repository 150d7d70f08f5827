"""Calibration, selective-prediction and OOD measures (Hendrycks et al.'s ``calibration_tools.py``).

Inputs are per-sample ``confidence [N]`` (e.g. the max softmax probability; higher = more
sure / more in-distribution) and ``correct [N]`` (bool or 0/1). Results are plain floats,
fractions in ``[0, 1]``: :func:`rms_calibration_error`, :func:`aurra`, :func:`ood_measures`
(with :func:`fpr_at_recall`).

Ties: samples of equal confidence keep their input order (stable sorts); the reference's
``np.argsort`` is not stable, so on tied inputs results can differ from it in the last digits.
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import torch
from torch import Tensor

ArrayLike = Union[Tensor, np.ndarray, Sequence[float]]


def _as_1d(x: ArrayLike, name: str) -> np.ndarray:
    arr = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f'{name}: expected a 1-d array [N], got shape {list(arr.shape)}')
    if arr.size == 0:
        raise ValueError(f'{name}: empty input')
    return arr.astype(np.float64)


def _pair(
    a: ArrayLike, b: ArrayLike, fn: str, names: tuple[str, str] = ('confidence', 'correct')
) -> tuple[np.ndarray, np.ndarray]:
    x, y = (_as_1d(v, f'{fn}: {name}') for v, name in zip((a, b), names, strict=True))
    if x.shape != y.shape:
        raise ValueError(f'{fn}: {names[0]} has {x.size} values, {names[1]} {y.size}')
    return x, y


def rms_calibration_error(
    confidence: ArrayLike, correct: ArrayLike, beta: int = 100, drop_last_bin: bool = True
) -> float:
    """RMS calibration error with equal-count bins (Hendrycks' ``calib_err(p='2', beta)``).

    ``sqrt(Σ_{b ∈ used} n_b / N · (mean(conf_b) - mean(correct_b))²)``; bins hold ``beta``
    consecutive samples in increasing confidence, the last one also the ``N mod beta`` rest.
    torchmetrics' ``CalibrationError(norm='l2')`` bins instead into ``n_bins`` equal-*width*
    intervals of ``[0, 1]``, every bin used: the two agree exactly when each equal-count bin is
    one equal-width bin and no bin is dropped (``tests/analysis/test_measures_and_maps.py``).

    Args:
        confidence: ``[N]`` confidences in ``[0, 1]``.
        correct: ``[N]`` 1 / True where the prediction is right.
        beta: Samples per bin.
        drop_last_bin: Leave out the most confident bin while still dividing by all ``N``, as
            the reference does (its loop stops one bin early), so numbers compare with the
            published ones (the DnA paper's ImageNet-A RMSCE); ``False`` uses every bin.

    Raises:
        ValueError: Fewer samples than the binning needs (``N < beta``, or ``N < 2·beta`` with
            ``drop_last_bin``, where no bin would be left).
    """
    conf, corr = _pair(confidence, correct, 'rms_calibration_error')
    if beta < 1:
        raise ValueError(f'rms_calibration_error: beta must be >= 1, got {beta}')
    n = conf.size
    n_bins = n // beta
    used = n_bins - 1 if drop_last_bin else n_bins
    if used < 1:
        raise ValueError(
            f'rms_calibration_error: {n} samples make {n_bins} bin(s) of beta={beta}'
            f'{" and the last is dropped (drop_last_bin=True)" if drop_last_bin else ""}'
            f'; need at least {(2 if drop_last_bin else 1) * beta} samples or a '
            f'smaller beta'
        )
    order = np.argsort(conf, kind='stable')
    bins = np.minimum(np.arange(n) // beta, n_bins - 1)  # [N], the last bin takes the rest
    size = np.bincount(bins)  # [n_bins]
    gap = np.bincount(bins, conf[order] - corr[order]) / size  # mean conf_b - acc_b
    return float(np.sqrt((size / n * gap**2)[:used].sum()))


def aurra(confidence: ArrayLike, correct: ArrayLike) -> float:
    """Area under the response-rate / accuracy curve.

    ``(1/N) Σ_{r=1}^{N} (1/r) Σ_{i ≤ r} correct_(i)`` with samples ``(i)`` in decreasing
    confidence: the accuracy when answering only the ``r`` most confident, averaged over ``r``.
    """
    conf, corr = _pair(confidence, correct, 'aurra')
    order = np.argsort(-conf, kind='stable')  # most confident first, ties in input order
    return float((np.cumsum(corr[order]) / np.arange(1, conf.size + 1)).mean())


def fpr_at_recall(labels: ArrayLike, scores: ArrayLike, recall: float = 0.95) -> float:
    """False-positive rate at the threshold whose recall (TPR) is closest to ``recall``.

    The reference's ``fpr_and_fdr_at_recall``: thresholds are the distinct scores down to the
    first one that reaches recall 1; scanning them from that lowest threshold upwards, the first
    one minimising ``|recall - target|`` gives ``FP / #negatives`` — so among thresholds of equal
    recall the lowest (most false positives) counts, and between two recalls equally close to the
    target the higher.

    Args:
        labels: ``[N]`` 1 = positive, 0 = negative (both present).
        scores: ``[N]`` higher = more positive.
        recall: Target recall in ``(0, 1]``.
    """
    y, s = _pair(labels, scores, 'fpr_at_recall', ('labels', 'scores'))
    y = y == 1
    if y.all() or not y.any():
        raise ValueError('fpr_at_recall: needs both positive and negative samples')
    order = np.argsort(s, kind='mergesort')[::-1]
    s, y = s[order], y[order]
    thr_idx = np.r_[np.where(np.diff(s))[0], y.size - 1]  # last index of each distinct score
    tps = np.cumsum(y)[thr_idx]
    fps = 1 + thr_idx - tps
    last = int(np.searchsorted(tps, tps[-1]))  # first threshold with recall 1
    rec = tps[last::-1] / tps[-1]
    # (the reference appends a point (recall 1, fps 0) after these; it can never be the closest
    # strictly, since the first point here already has recall 1, so it is left out)
    cutoff = int(np.argmin(np.abs(rec - recall)))
    return float(fps[last::-1][cutoff] / np.sum(~y))


def ood_measures(conf_in: ArrayLike, conf_out: ArrayLike, recall: float = 0.95) -> dict[str, float]:
    """AUROC, AUPR and FPR at ``recall`` TPR for detecting OOD samples by low confidence.

    OOD is the positive class, every sample scored by ``-confidence`` (max-softmax baseline;
    Hendrycks' ``get_measures(out_score, in_score)``): AUROC = P(an OOD sample is less confident
    than an in-distribution one) (ties count ½); AUPR = average precision of the OOD class (both
    by torchmetrics, exact with ``thresholds=None``; the reference's scikit-learn
    ``roc_auc_score`` / ``average_precision_score`` agree to 1e-7 on random tied scores, and
    scikit-learn is not a dependency: its presence alone makes ``import mmdet.models`` ~1 s
    slower); ``fpr`` = fraction of in-distribution samples flagged at the threshold that catches
    ``recall`` of the OOD ones (:func:`fpr_at_recall`).

    Args:
        conf_in: ``[N]`` confidences on in-distribution samples.
        conf_out: ``[M]`` confidences on OOD samples.
        recall: TPR of the FPR measure (0.95: "FPR95").

    Returns:
        ``dict(auroc=..., aupr=..., fpr=...)``.
    """
    from torchmetrics.functional.classification import binary_auroc, binary_average_precision

    c_in = _as_1d(conf_in, 'ood_measures: conf_in')
    c_out = _as_1d(conf_out, 'ood_measures: conf_out')
    scores = -np.concatenate([c_out, c_in])
    labels = np.r_[np.ones(c_out.size, dtype=np.int64), np.zeros(c_in.size, dtype=np.int64)]
    # Both measures depend on the order of the scores only; torchmetrics reads values outside
    # [0, 1] as logits (a sigmoid, which can merge scores that differ by ~1e-16), so it gets the
    # dense ranks scaled into [0, 1]: same order, same ties, exact.
    values, rank = np.unique(scores, return_inverse=True)
    preds = torch.from_numpy(rank.reshape(-1) / max(values.size - 1, 1))
    target = torch.from_numpy(labels)
    return dict(
        auroc=float(binary_auroc(preds, target, thresholds=None)),
        aupr=float(binary_average_precision(preds, target, thresholds=None)),
        fpr=fpr_at_recall(labels, scores, recall),
    )
