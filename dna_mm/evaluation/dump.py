"""``DumpPredictions``: per-video predictions to a CSV file (video, label, prediction, score).

Added by ``tools/test.py --dump preds.csv``; for MMAction2's pickle use ``--dump preds.pkl``.
The ``video`` column is the sample's ``metainfo['filename']`` (``RobustVideoDataset`` always
sets it; for another dataset add ``'filename'`` to ``PackActionInputs(meta_keys=...)``) or
``frame_dir`` (rawframe datasets).
"""

from __future__ import annotations

import csv
import os
import os.path as osp
from typing import Any, Sequence

from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmengine.registry import METRICS


@METRICS.register_module()
class DumpPredictions(BaseMetric):
    """Write one CSV row per video to ``out_file_path`` (``.csv``): ``video, label, pred, score,
    top5``."""

    default_prefix = 'dump'  # it returns no metric; named so that mmengine does not warn

    def __init__(self, out_file_path: str, collect_device: str = 'cpu') -> None:
        super().__init__(collect_device=collect_device)
        if not out_file_path.endswith('.csv'):
            raise ValueError(f'DumpPredictions writes CSV; got out_file_path={out_file_path!r}')
        self.out_file_path = out_file_path
        self._warned = False

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            score = sample['pred_scores']['item'].float().cpu()  # [num_classes]
            top = score.topk(min(5, score.numel()))
            label = sample['gt_labels']['item']
            video = sample.get('filename', sample.get('frame_dir'))
            if video is None and not self._warned:
                self._warned = True
                print_log(
                    f'{self.out_file_path}: the samples carry no filename, so the video '
                    f"column stays empty; add 'filename' to PackActionInputs(meta_keys=...)",
                    logger='current',
                    level=30,
                )
            self.results.append(
                dict(
                    video=video or '',
                    label=' '.join(str(int(v)) for v in label.flatten()),
                    pred=int(top.indices[0]),
                    score=round(float(top.values[0]), 6),
                    top5=' '.join(str(int(i)) for i in top.indices),
                )
            )

    def compute_metrics(self, results: list) -> dict:
        os.makedirs(osp.dirname(osp.abspath(self.out_file_path)), exist_ok=True)
        with open(self.out_file_path, 'w', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=['video', 'label', 'pred', 'score', 'top5'])
            writer.writeheader()
            writer.writerows(results)
        return {}
