"""Segments of a video from its windows' class scores: runs of one class after smoothing.

With ``N`` windows in time order and their scores ``S [N, K]`` (class probabilities)::

    S̄ = moving average of S over `width` windows, centred   (fewer at the two ends)
    y_i = argmax_k S̄[i, k]
    segments = runs of equal y_i; each covers its windows' cells, scored by mean S̄[run, y]

A multi-label model scores each class on its own (``S`` each class's probability), and
several actions may run at once; its segments are each class's runs above a threshold ``τ``,
which may overlap (:func:`find_segments` with a ``threshold``)::

    segments = for each class k, the runs of S̄[i, k] >= τ; each scored by mean S̄[run, k]

A threshold on a single-label model's scores leaves out what it is unsure of (``top_only``):
a window belongs to its best class's run only where that class's smoothed probability
reaches ``τ``; the stretches below it, where no action is sure (a long video's moments between
actions), are in no segment::

    segments = runs of equal y_i among the windows where S̄[i, y_i] >= τ

A window's *cell* is the part of the video nearer its centre than any other window's: cells
meet half-way between two windows' centres, the first starts at 0 (or ``begin``) and the last
ends with the video, so the segments tile the video without gap or overlap, whatever the
stride (with a threshold: but for what none reaches). (A video with gaps of damaged data is
segmented in its pieces between them: :meth:`~dna_mm.over_time.predictor.OverTime.segments`.)
Then, while a segment is shorter than ``min_length`` seconds (and there are two or more), the
shortest one joins the neighbour whose class scores higher over its windows; with a threshold, a
shorter run is dropped instead (its class is taken as absent there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np


@dataclass
class Segment:
    """A run of one class: ``label``, ``start`` and ``end`` in seconds, ``score`` (its class's
    mean smoothed score over its windows) and the windows ``[first, last]`` (inclusive) it spans."""

    label: int
    start: float
    end: float
    score: float
    first: int
    last: int


def smooth_scores(scores: np.ndarray, width: int) -> np.ndarray:
    """Centred moving average of ``scores [N, K]`` over ``width`` windows (odd; 1: unchanged);
    near the ends, over the windows there are."""
    if width < 1 or width % 2 == 0:
        raise ValueError(f'smoothing width must be an odd number of windows >= 1, got {width}')
    scores = np.asarray(scores, dtype=np.float64)
    if width == 1 or len(scores) == 0:
        return scores.copy()
    half = width // 2
    padded = np.concatenate([np.zeros((1, scores.shape[1])), np.cumsum(scores, axis=0)])
    n = len(scores)
    lo = np.clip(np.arange(n) - half, 0, n)
    hi = np.clip(np.arange(n) + half + 1, 0, n)
    return (padded[hi] - padded[lo]) / (hi - lo)[:, None]


def cell_bounds(
    starts: Sequence[float], ends: Sequence[float], duration: Optional[float] = None, begin: float = 0.0
) -> np.ndarray:
    """``[N + 1]`` cell boundaries of windows ``[start, end)``: ``begin`` (0), the midpoints
    between consecutive centres, then ``duration`` (default the last window's end)."""
    centres = (np.asarray(starts, dtype=np.float64) + np.asarray(ends, dtype=np.float64)) / 2
    last = float(ends[-1]) if duration is None else float(duration)
    first = min(float(begin), centres[0])
    return np.concatenate([[first], (centres[1:] + centres[:-1]) / 2, [max(last, centres[-1])]])


def find_segments(
    starts: Sequence[float],
    ends: Sequence[float],
    scores: np.ndarray,
    width: int = 1,
    min_length: float = 0.0,
    duration: Optional[float] = None,
    begin: float = 0.0,
    threshold: Optional[float] = None,
    top_only: bool = False,
) -> list[Segment]:
    """The segments of windows ``[starts[i], ends[i])`` with scores ``[N, K]`` (module
    docstring); ``duration``: the video's length in seconds (the last cell's end), ``begin``:
    the first cell's start; ``threshold``: each class's runs at or above it (:func:`_class_runs`),
    with ``top_only`` (a single-label model's) a window counting for its best class alone."""
    if len(starts) == 0:
        return []
    smoothed = smooth_scores(scores, width)
    bounds = cell_bounds(starts, ends, duration, begin)
    if threshold is not None:
        if top_only:  # the best class keeps its score, the others 0: below τ wherever τ > 0
            best = smoothed.argmax(axis=1)  # [N]
            rows = np.arange(len(best))
            smoothed, kept = np.zeros_like(smoothed), smoothed
            smoothed[rows, best] = kept[rows, best]
        return _class_runs(smoothed, bounds, min_length, threshold)
    labels = smoothed.argmax(axis=1)
    runs, first = [], 0  # [first, last] window ranges of one label
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[first]:
            runs.append([int(labels[first]), first, i - 1])
            first = i
    while len(runs) > 1 and min_length > 0:
        lengths = [bounds[b + 1] - bounds[a] for _, a, b in runs]
        k = int(np.argmin(lengths))
        if lengths[k] >= min_length:
            break
        _, a, b = runs[k]
        near = [j for j in (k - 1, k + 1) if 0 <= j < len(runs)]
        into = max(near, key=lambda j: smoothed[a : b + 1, runs[j][0]].mean())
        runs[into][1], runs[into][2] = min(runs[into][1], a), max(runs[into][2], b)
        del runs[k]
        merged = []  # neighbours of one label after the join become one run
        for run in runs:
            if merged and merged[-1][0] == run[0]:
                merged[-1][2] = run[2]
            else:
                merged.append(run)
        runs = merged
    return [
        Segment(label, float(bounds[a]), float(bounds[b + 1]), float(smoothed[a : b + 1, label].mean()), a, b)
        for label, a, b in runs
    ]


def _class_runs(
    smoothed: np.ndarray, bounds: np.ndarray, min_length: float, threshold: float
) -> list[Segment]:
    """The segments at or above a threshold (module docstring) from the smoothed scores ``[N, K]`` and the
    cells' bounds ``[N + 1]``: each class's runs of windows at or above ``threshold``, a run
    shorter than ``min_length`` seconds dropped; they may overlap, and are ordered by start, then
    class."""
    above = np.pad(smoothed >= threshold, ((1, 1), (0, 0)))  # [N + 2, K], False at both ends
    edges = np.diff(above.astype(np.int8), axis=0)  # [N + 1, K]: +1 a run's first window, -1 past its last
    segments = []
    for k in range(smoothed.shape[1]):
        firsts, stops = np.flatnonzero(edges[:, k] == 1), np.flatnonzero(edges[:, k] == -1)
        for a, stop in zip(firsts.tolist(), stops.tolist(), strict=True):
            if bounds[stop] - bounds[a] >= min_length:
                score = float(smoothed[a:stop, k].mean())
                segments.append(Segment(k, float(bounds[a]), float(bounds[stop]), score, a, stop - 1))
    return sorted(segments, key=lambda s: (s.start, s.label))
