"""``RobustnessMetric``: calibration, selective prediction and OOD detection as an MMEngine metric.

Registered in MMEngine's root ``METRICS`` (usable from the ``mmaction`` / ``mmdet`` scopes), next
to ``AccMetric`` in any ``test_evaluator``::

    test_evaluator = [dict(type='AccMetric', metric_list=('top_k_accuracy', 'mean_class_accuracy')),
                      dict(type='RobustnessMetric')]

reports ``robustness/acc``, ``robustness/rmsce`` (Hendrycks' RMS calibration error, equal-count
bins of ``beta``), ``robustness/aurra`` and ``robustness/ece`` (torchmetrics'
``MulticlassCalibrationError``: ``ece_bins`` equal-width bins, L1 — the usual ECE, a different
estimator from RMSCE). Formulas: :mod:`dna_mm.analysis.calibration`. The confidence of a sample
is its maximum class probability: MMAction2 heads with ``average_clips='prob'`` output
probabilities (``scores='probs'``, the default; rows that do not sum to 1 are an error), raw
scores need ``scores='logits'`` (softmax here).

OOD mode — ``ood_ann_file`` (+ ``ood_data_prefix``): the test set is the in-distribution list and
the OOD list together (one ``ConcatDataset``; OOD lines need no label), the samples whose video
(``metainfo['filename']``) is in the OOD list are OOD and the rest in-distribution; adds
``robustness/auroc``, ``/aupr``, ``/fpr95`` (OOD positive, scored by ``-confidence``) and computes
the others on the in-distribution samples only::

    ood = dict(type='RobustVideoDataset', ann_file='data/ood/test.txt', labels_optional=True,
               data_prefix=dict(video='data/ood/videos'), pipeline=test_pipeline, test_mode=True)
    test_dataloader = dict(dataset=dict(_delete_=True, type='ConcatDataset',
                                        datasets=[{{_base_.test_dataloader.dataset}}, ood]))
    test_evaluator = dict(_delete_=True, type='RobustnessMetric', ood_ann_file='data/ood/test.txt',
                          ood_data_prefix='data/ood/videos')

or, on any recognizer config, :func:`with_ood_evaluation` (``tools/test.py --ood LIST [PREFIX]``).
"""

from __future__ import annotations

import os.path as osp
from typing import Any, Optional, Sequence

import torch
from mmengine.config import Config
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmengine.registry import METRICS

from ..datasets import RobustVideoDataset
from .calibration import aurra, ood_measures, rms_calibration_error


@METRICS.register_module()
class RobustnessMetric(BaseMetric):
    """RMSCE, AURRA, ECE and accuracy; AUROC, AUPR and FPR95 with an OOD list.

    Args:
        scores: ``'probs'`` (the model outputs class probabilities) or ``'logits'``.
        beta: Samples per RMSCE bin (Hendrycks: 100).
        drop_last_bin: Leave out the most confident RMSCE bin, as Hendrycks' code does (default,
            comparable with published numbers); see :func:`~dna_mm.analysis.rms_calibration_error`.
        ece_bins: Equal-width bins of the ECE.
        ood_ann_file: Annotation list of the OOD videos (one path per line, a label optional).
        ood_data_prefix: Folder the OOD list's paths are relative to (its ``data_prefix.video``).
        recall: TPR of the FPR measure.
        collect_device, prefix: As MMEngine's ``BaseMetric`` (default prefix ``'robustness'``).
    """

    default_prefix = 'robustness'

    def __init__(
        self,
        scores: str = 'probs',
        beta: int = 100,
        drop_last_bin: bool = True,
        ece_bins: int = 15,
        ood_ann_file: Optional[str] = None,
        ood_data_prefix: str = '',
        recall: float = 0.95,
        collect_device: str = 'cpu',
        prefix: Optional[str] = None,
    ) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if scores not in ('probs', 'logits'):
            raise ValueError(f"RobustnessMetric: scores must be 'probs' or 'logits', got {scores!r}")
        self.scores, self.beta, self.drop_last_bin = scores, beta, drop_last_bin
        self.ece_bins, self.recall = ece_bins, recall
        self.ood_ann_file = ood_ann_file
        self.ood_files = _read_list(ood_ann_file, ood_data_prefix) if ood_ann_file else None

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            score = _get(sample, 'pred_scores', 'pred_score').float().cpu().flatten()  # [K]
            label = _get(sample, 'gt_labels', 'gt_label').flatten()
            self.results.append(
                dict(
                    score=score,
                    label=int(label[0]) if label.numel() else -1,
                    filename=sample.get('filename', ''),
                )
            )

    def compute_metrics(self, results: list) -> dict:
        from torchmetrics.functional.classification import multiclass_calibration_error

        scores = torch.stack([r['score'] for r in results])  # [N, K]
        probs = scores.softmax(dim=-1) if self.scores == 'logits' else scores
        sums = scores.sum(dim=-1)
        if self.scores == 'probs' and not torch.allclose(sums, torch.ones_like(sums), atol=1e-3):
            raise ValueError(
                f'RobustnessMetric: the prediction scores do not sum to 1 (e.g. {float(sums[0]):.4g}); '
                f"set scores='logits' or the head's average_clips='prob'"
            )
        labels = torch.tensor([r['label'] for r in results])
        conf, pred = probs.max(dim=-1)
        is_ood = torch.zeros(len(results), dtype=torch.bool)
        if self.ood_files is not None:
            is_ood = torch.tensor([osp.normpath(r['filename']) in self.ood_files for r in results])
            if not is_ood.any():
                raise ValueError(
                    f'RobustnessMetric: no test sample is in the OOD list '
                    f'{self.ood_ann_file}; add it to the test dataloader (see the '
                    f"docstring) and check ood_data_prefix"
                )
            if is_ood.all():
                raise ValueError(
                    f'RobustnessMetric: every test sample is in the OOD list '
                    f'{self.ood_ann_file}; the in-distribution set is missing'
                )
        ind = ~is_ood
        if (labels[ind] < 0).any():
            raise ValueError(
                'RobustnessMetric: in-distribution samples without a label '
                f'({int((labels[ind] < 0).sum())}); OOD samples need ood_ann_file'
            )
        correct = (pred[ind] == labels[ind]).double()
        metrics = dict(
            acc=float(correct.mean()),
            aurra=aurra(conf[ind], correct),
            ece=float(  # torchmetrics' multiclass ECE (top-1 confidence, equal-width bins, L1)
                multiclass_calibration_error(
                    probs[ind], labels[ind], num_classes=probs.shape[-1], n_bins=self.ece_bins, norm='l1'
                )
            ),
        )
        try:
            metrics['rmsce'] = rms_calibration_error(conf[ind], correct, self.beta, self.drop_last_bin)
        except ValueError as err:  # too few samples for the binning
            print_log(f'RobustnessMetric: rmsce not computed: {err}', logger='current', level=30)
            metrics['rmsce'] = float('nan')
        if self.ood_files is not None:
            m = ood_measures(conf[ind], conf[is_ood], self.recall)
            metrics.update(auroc=m['auroc'], aupr=m['aupr'], fpr95=m['fpr'], num_ood=int(is_ood.sum()))
        metrics['num_samples'] = int(ind.sum())
        return metrics


def _get(sample: dict, *keys: str) -> torch.Tensor:
    """``sample[key]['item']`` (MMAction2) or ``sample[key]`` (a tensor) for the first key present."""
    for key in keys:
        value = sample.get(key)
        value = value.get('item') if isinstance(value, dict) else value
        if isinstance(value, torch.Tensor):
            return value
    raise KeyError(f'RobustnessMetric: the data samples carry none of {keys}')


def _read_list(ann_file: str, prefix: str) -> set[str]:
    """Normalised paths of an annotation list (first field of each line, joined to ``prefix``)."""
    if not osp.isfile(ann_file):
        raise FileNotFoundError(f'RobustnessMetric: OOD list {ann_file} does not exist')
    with open(ann_file, encoding='utf-8') as f:
        paths = [line.split()[0] for line in f if line.strip()]
    if not paths:
        raise ValueError(f'RobustnessMetric: OOD list {ann_file} is empty')
    return {osp.normpath(osp.join(prefix, p)) for p in paths}


def with_ood_evaluation(cfg: Config, ood_ann_file: str, ood_data_prefix: str = '') -> Config:
    """``cfg`` set up for OOD evaluation: its test set (in-distribution) and the OOD list
    (read with the test set's dataset type and pipeline, in test mode) as one
    ``ConcatDataset``, evaluated by ``RobustnessMetric`` with the OOD list (the arguments of a
    ``RobustnessMetric`` already in ``test_evaluator`` are kept; other metrics are dropped, as
    OOD samples have no label of the model's classes). ``cfg`` is changed in place;
    ``ood_data_prefix`` is the folder of the OOD videos (default: the list's paths as they are).
    """
    if not osp.isfile(ood_ann_file):
        raise FileNotFoundError(f'OOD annotation list {ood_ann_file} does not exist')
    ind = cfg.test_dataloader.dataset
    ood = dict(
        type=ind.get('type', 'VideoDataset'),
        ann_file=ood_ann_file,
        data_prefix=dict(video=ood_data_prefix),
        pipeline=ind.pipeline,
        test_mode=True,
    )
    kind = ood['type']
    if kind == 'RobustVideoDataset' or (isinstance(kind, type) and issubclass(kind, RobustVideoDataset)):
        ood['labels_optional'] = True  # MMAction2's VideoDataset reads a path alone as label -1
    cfg.test_dataloader.dataset = dict(type='ConcatDataset', datasets=[ind, ood])
    evaluators = cfg.test_evaluator
    evaluators = evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]
    metric = next((dict(e) for e in evaluators if e.get('type') == 'RobustnessMetric'), {})
    cfg.test_evaluator = dict(
        metric, type='RobustnessMetric', ood_ann_file=ood_ann_file, ood_data_prefix=ood_data_prefix
    )
    return cfg
