"""Mean class accuracy over the classes the labels hold.

    mCA = (1 / |C|) · Σ_{c ∈ C} |{i : yᵢ = c, ŷᵢ = c}| / |{i : yᵢ = c}|,   C = {yᵢ}

(the per-class accuracies of the paper's Smarthome tables, averaged over the classes of the
test set). MMAction2's ``mean_class_accuracy`` averages over the classes of the labels *and the
predictions*, so a class predicted for some video but held by none counts as 0 %: on a test list
that lacks classes (a subset, a validation split, videos ``--skip-unreadable`` dropped) its mCA
is too low (one class of 16 videos, 15 right, one predicted as another class: 46.88 for 93.75).
Where every class of the predictions is labelled, the two are the same number.

``import dna_mm`` registers :class:`AccMetric` in MMAction2's ``METRICS`` in place of
MMAction2's own, so every config's ``type='AccMetric'`` computes this mCA; its other metrics
are MMAction2's. A test where the two differ logs one warning giving MMAction2's figure too.
"""

from __future__ import annotations

from typing import Sequence

import mmaction.evaluation.metrics.acc_metric as _mmaction_acc  # registers MMAction2's first
import numpy as np
from mmaction.registry import METRICS
from mmengine.logging import print_log


def mean_class_accuracy(scores: Sequence[np.ndarray], labels: Sequence[int]) -> float:
    """The mean over the classes of ``labels`` of each one's accuracy (module docstring), from
    ``scores`` ``[N][num_classes]`` and ``labels`` ``[N]``; a fraction in [0, 1]."""
    pred = np.argmax(np.stack(scores), axis=1)  # [N]
    labels_np = np.asarray(labels)  # [N]
    classes = np.unique(labels_np)
    return float(np.mean([np.mean(pred[labels_np == c] == c) for c in classes]))


@METRICS.register_module(force=True)
class AccMetric(_mmaction_acc.AccMetric):
    """MMAction2's ``AccMetric`` with ``acc/mean1`` over the labelled classes
    (:func:`mean_class_accuracy`); the same arguments."""

    def calculate(self, preds: list[np.ndarray], labels: list) -> dict:
        results = super().calculate(preds, labels)
        if 'mean1' not in results or not all(np.ndim(label) == 0 for label in labels):
            return results
        theirs = float(results['mean1'])
        results['mean1'] = ours = mean_class_accuracy(preds, labels)
        if not np.isclose(ours, theirs):
            held = {int(x) for x in labels}
            absent = sorted(set(np.argmax(np.stack(preds), axis=1).tolist()) - held)
            print_log(
                f'mCA {100 * ours:.2f} is the mean over the {_count(len(held), "class")} the labels hold; '
                f'MMAction2 gives {100 * theirs:.2f}, counting the {_count(len(absent), "class")} predicted '
                f'but held by no sample ({", ".join(map(str, absent))}) as 0 %',
                logger='current',
                level=30,
            )
        return results


def _count(n: int, noun: str) -> str:
    return f'{n} {noun}{"es" if n != 1 else ""}'


__all__ = ['AccMetric', 'mean_class_accuracy']
