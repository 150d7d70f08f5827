"""``DumpPredictions``: per-video (per-image) predictions to a CSV file (name, label, prediction,
score, top-5).

The label column holds the sample's class, or with ``multi_class`` its classes in increasing
order, separated by blanks (``0 2``): MMAction2 packs a multi-label line's labels as a one-hot
float vector of ``num_classes``, which written as it is (``1 0 1 0``) reads as four class indices.

Added by ``tools/test.py --dump preds.csv``; for MMAction2's pickle use ``--dump preds.pkl``
(mmengine's ``DumpResults``, MMDetection's ``DumpDetResults`` for a detector, each written whole
or not at all: :func:`dump_evaluator`).
The samples are MMAction2's (``ActionDataSample``: ``pred_scores`` / ``gt_labels`` with their
``item``) or MMPretrain's (``DataSample``: ``pred_score`` / ``gt_label`` tensors, an ImageNet
config's). The first column names the sample: ``video``, its ``metainfo['filename']``
(``RobustVideoDataset`` and ``RobustRawframeDataset`` always set it; for another dataset add ``'filename'`` to
``PackActionInputs(meta_keys=...)``) or ``frame_dir`` (rawframe datasets); ``image`` for an image
classifier's samples, their ``img_path`` (MMPretrain's ``PackInputs`` keeps it).
"""

from __future__ import annotations

import csv
from typing import Any, Sequence

from mmengine.evaluator import BaseMetric, DumpResults
from mmengine.fileio import dump
from mmengine.logging import print_log
from mmengine.registry import METRICS
from torch import Tensor

from ..errors import ConfigError
from ..utils.files import atomic_path

#: the CSV's columns after the first (``video`` or ``image``)
COLUMNS = ['label', 'pred', 'score', 'top5']


def _field(sample: dict, *names: str) -> Tensor:
    """The first of ``names`` the sample has, as a tensor: MMAction2's ``LabelData`` comes as a
    dict with its ``item``; MMPretrain's fields are tensors."""
    for name in names:
        if name in sample:
            value = sample[name]
            return value['item'] if isinstance(value, dict) else value
    raise KeyError(f'DumpPredictions: the sample has none of {list(names)} (its keys: {sorted(sample)})')


def _classes(label: Tensor) -> list[int]:
    """The classes of a sample's ground truth: the indices of a ``multi_class`` one-hot target
    (MMAction2 packs it as a float vector; a class index is always an integer tensor), else the
    labels as they are (``-1`` for an unlabelled OOD sample)."""
    if label.is_floating_point():
        return [int(c) for c in label.flatten().nonzero().flatten()]
    return [int(v) for v in label.flatten()]


#: the first column, by the kind of sample: ``(the metainfo keys that name it, in order, how to add them)``
NAMES = {
    'video': (
        ('filename', 'frame_dir'),
        "add 'filename' (videos) or 'frame_dir' (frame folders) to PackActionInputs(meta_keys=...)",
    ),
    'image': (('img_path',), "add 'img_path' to PackInputs(meta_keys=...)"),
}


@METRICS.register_module()
class DumpPredictions(BaseMetric):
    """Write one CSV row per video or image to ``out_file_path`` (``.csv``): ``video`` (or
    ``image``), ``label, pred, score, top5``. ``multi_label``: the scores are a multi-label
    head's mean logits ``s`` (``multi_class``, ``average_clips='score'``), written as each class's
    own probability ``σ(s)``."""

    default_prefix = 'dump'  # it returns no metric; named so that mmengine does not warn

    def __init__(self, out_file_path: str, collect_device: str = 'cpu', multi_label: bool = False) -> None:
        super().__init__(collect_device=collect_device)
        if not out_file_path.endswith('.csv'):
            raise ValueError(f'DumpPredictions writes CSV; got out_file_path={out_file_path!r}')
        self.out_file_path = out_file_path
        self.multi_label = multi_label
        self._warned = False

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            score = _field(sample, 'pred_scores', 'pred_score').float().cpu()  # [num_classes]
            score = score.sigmoid() if self.multi_label else score
            top = score.topk(min(5, score.numel()))
            label = _field(sample, 'gt_labels', 'gt_label')
            column = 'image' if 'img_path' in sample else 'video'  # MMPretrain's PackInputs keeps it
            keys, fix = NAMES[column]
            name = next((sample[k] for k in keys if sample.get(k) is not None), None)
            if name is None and not self._warned:
                self._warned = True
                print_log(
                    f'{self.out_file_path}: the samples carry no {" or ".join(keys)}, so the '
                    f'{column} column stays empty; {fix}',
                    logger='current',
                    level=30,
                )
            row = dict(
                label=' '.join(str(c) for c in _classes(label)),
                pred=int(top.indices[0]),
                score=round(float(top.values[0]), 6),
                top5=' '.join(str(int(i)) for i in top.indices),
            )
            self.results.append({column: name or '', **row})

    def compute_metrics(self, results: list) -> dict:
        first = next(iter(results[0]), 'video') if results else 'video'
        with atomic_path(self.out_file_path) as tmp, open(tmp, 'w', newline='') as f:  # whole or not at all
            writer = csv.DictWriter(f, fieldnames=[first, *COLUMNS])
            writer.writeheader()
            writer.writerows(results)
        return {}


class WrittenWhole:
    """For mmengine's ``DumpResults`` and its subclasses: the pickle written whole or not at all
    (mmengine opens the final name for writing, so a full disk leaves the previous file cut short)."""

    out_file_path: str
    default_prefix = 'dump'  # it returns no metric; named so that mmengine does not warn

    def compute_metrics(self, results: list) -> dict:
        with atomic_path(self.out_file_path) as tmp:
            dump(results, str(tmp), file_format='pkl')
        print_log(f'Results has been saved to {self.out_file_path}.', logger='current')
        return {}


@METRICS.register_module()
class DumpResultsWhole(WrittenWhole, DumpResults):
    """mmengine's ``DumpResults`` (MMAction2's pickle of the predictions), written whole."""


def dump_evaluator(out_file_path: str, detector: bool, multi_label: bool = False) -> dict:
    """The evaluator of ``tools/test.py --dump FILE``: :class:`DumpPredictions` for ``.csv``
    (recognizers; ``multi_label``: a multi-label head's scores, written as probabilities), the
    predictions' pickle for ``.pkl`` / ``.pickle`` (MMDetection's ``DumpDetResults``, masks as RLE,
    for a detector), written whole."""
    if out_file_path.endswith(('.pkl', '.pickle')):
        if not detector:
            return dict(type='DumpResultsWhole', out_file_path=out_file_path)
        from .det_dump import DumpDetResultsWhole  # noqa: F401  (registers it; imports mmdet)

        return dict(type='DumpDetResultsWhole', out_file_path=out_file_path)
    if out_file_path.endswith('.csv') and not detector:
        return dict(type='DumpPredictions', out_file_path=out_file_path, multi_label=multi_label)
    expected = 'for a detector must end in .pkl or .json' if detector else 'must end in .csv or .pkl'
    raise ConfigError(f'--dump {expected}, got {out_file_path}')
