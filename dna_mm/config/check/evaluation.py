"""The evaluators against the data they score, checked before anything is built
(:func:`dna_mm.config.check.check_config`):

* each evaluator's ``ann_file`` (MMDetection's ``CocoMetric``) that is another split's (the file
  another loader's dataset reads, where its own reads another): it would score the predictions
  against another split's annotations, matched by image id, a wrong AP and no error;
* an ``AccMetric`` whose ``metric_list`` (its default too) holds ``top_k_accuracy`` or
  ``mean_class_accuracy`` evaluating a multi-label dataset (``multi_class=True``; the val and
  test splits, in ``mode='test'`` the test split): MMAction2's ``mean_class_accuracy`` stops on a
  ``TypeError`` once every prediction is in (after a whole epoch), ``top_k_accuracy`` compares a
  class index with the 0/1 label vector (a wrong accuracy, no error); the multi-label metrics
  (``mmit_mean_average_precision``, ``mean_average_precision``) are named;
* the keys of each metric of the evaluators the run uses (``val_evaluator`` and
  ``test_evaluator`` in training, ``test_evaluator`` in a test): the arguments of its class
  (registered in the config's scope's ``METRICS``; a typo such as ``metric_lsit`` would be a
  ``TypeError`` naming no key once the model is built); a metric that takes any keyword is its own
  affair.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from mmengine.config import Config

from ..build import type_name
from .data import iter_datasets
from .values import class_arguments, has_base, registry_of, type_class, unknown_keys


def _dataset_file(loader: Any) -> Optional[str]:
    """The annotation file a loader's dataset reads, as mmengine's ``BaseDataset`` resolves it
    (``ann_file`` under ``data_root`` unless absolute), normalised; ``None`` without one."""
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    ann_file = dataset.get('ann_file') if isinstance(dataset, dict) else None
    if not isinstance(ann_file, str) or not ann_file:
        return None
    root = dataset.get('data_root')
    return os.path.normpath(ann_file if os.path.isabs(ann_file) or not root else os.path.join(root, ann_file))


def evaluator_file_problems(cfg: Config, mode: str) -> list[str]:
    """Each evaluator's ``ann_file`` (MMDetection's ``CocoMetric``) that is another split's file:
    that of the train, val or test loader's dataset, where its own loader's dataset reads another.
    The metric scores the predictions against its own file's annotations, matched by image id, so
    another split's gives a wrong AP and no error (image ids 1-8 of both splits: AP 0.00 for a
    model at 1.30). A file of no loader (a subset's full annotations) is not checked."""
    splits = ('train', 'val', 'test') if mode == 'train' else ('test',)
    files = {s: _dataset_file(cfg.get(f'{s}_dataloader')) for s in ('train', 'val', 'test')}
    out = []
    for split in splits[1:] if mode == 'train' else splits:
        evaluators = cfg.get(f'{split}_evaluator')
        own = files[split]
        for i, metric in enumerate(evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]):
            given = metric.get('ann_file') if isinstance(metric, dict) else None
            if own is None or not isinstance(given, str) or metric.get('format_only'):
                continue
            path = os.path.normpath(given)
            others = [s for s, f in files.items() if f == path and f != own]
            if others:
                key = f'{split}_evaluator' + (f'[{i}]' if isinstance(evaluators, (list, tuple)) else '')
                out.append(
                    f'{key}.ann_file is {given}, the file of {others[0]}_dataloader.dataset, and '
                    f'{split}_dataloader.dataset reads {own}: the metric would score the {split} '
                    "predictions against another split's annotations (a wrong AP, no error); give it "
                    f'{own}'
                )
    return out


#: MMAction2's ``AccMetric``: its default ``metric_list``, the metrics of one label per sample
ACC_METRICS = ('top_k_accuracy', 'mean_class_accuracy')
#: its metrics of multi-label data (a 0/1 vector of the classes per sample), each reported under its
#: own name (``acc/mmit_mean_average_precision``)
MULTI_LABEL_METRICS = ('mmit_mean_average_precision', 'mean_average_precision')
#: what each of :data:`ACC_METRICS` does with multi-label data (MMAction2 1.2)
SINGLE_LABEL_FAILURES = {
    'top_k_accuracy': 'top_k_accuracy reports a wrong accuracy without a word',
    'mean_class_accuracy': 'mean_class_accuracy stops on a TypeError once every prediction is in',
}


def evaluator_keys(evaluator: Any) -> Optional[list[str]]:
    """The metric keys a validation with ``evaluator`` (a metric's config or a list of them)
    reports, when they follow from the config (every metric an ``AccMetric`` of
    :data:`ACC_METRICS` and :data:`MULTI_LABEL_METRICS`: ``acc/top{k}`` for each of its ``topk``,
    ``acc/mean1``, ``acc/mmit_mean_average_precision``, ``acc/mean_average_precision``, in the
    order of its ``metric_list``, as ``AccMetric.calculate`` reports them); ``None`` otherwise."""
    keys: list[str] = []
    for metric in evaluator if isinstance(evaluator, (list, tuple)) else [evaluator]:
        if not isinstance(metric, dict) or type_name(metric.get('type')) != 'AccMetric':
            return None
        chosen = metric.get('metric_list', ACC_METRICS)
        chosen = (chosen,) if isinstance(chosen, str) else tuple(chosen)
        if not set(chosen) <= {*ACC_METRICS, *MULTI_LABEL_METRICS}:
            return None
        prefix = metric.get('prefix') or 'acc'
        for name in dict.fromkeys(chosen):
            if name == 'top_k_accuracy':
                options = (metric.get('metric_options') or {}).get('top_k_accuracy') or {}
                topk = options.get('topk', (1, 5))
                keys += [f'{prefix}/top{k}' for k in ((topk,) if isinstance(topk, int) else topk)]
            else:
                keys.append(f'{prefix}/mean1' if name == 'mean_class_accuracy' else f'{prefix}/{name}')
    return keys


def multi_label_dataset(dataset: Any, key: str) -> Optional[str]:
    """The config key of ``dataset`` (at ``key``), or of the first dataset it wraps, that is
    multi-label (``multi_class=True``); None where none is."""
    return next((at for at, inner in iter_datasets(dataset, key) if inner.get('multi_class')), None)


def multi_label_metric_problems(cfg: Config, mode: str) -> list[str]:
    """An ``AccMetric`` whose ``metric_list`` (its default too) holds a metric of one label per
    sample (:data:`ACC_METRICS`) evaluating a loader whose dataset is multi-label
    (``multi_class=True``, through dataset wrappers): the val and test splits in training, the
    test split in a test run. MMAction2's ``mean_class_accuracy`` stops on ``TypeError: y_real
    dtype must be np.int64`` once every prediction is in (after a whole epoch of training), and
    ``top_k_accuracy`` compares the predicted class index with the 0/1 entries of the label
    vector: a wrong accuracy (0.00 in the audit), without a word. The multi-label metrics
    (:data:`MULTI_LABEL_METRICS`) are named."""
    out = []
    for split in ('val', 'test') if mode == 'train' else ('test',):
        loader = cfg.get(f'{split}_dataloader')
        dataset = loader.get('dataset') if isinstance(loader, dict) else None
        multi = multi_label_dataset(dataset, f'{split}_dataloader.dataset')
        if multi is None:
            continue
        evaluators = cfg.get(f'{split}_evaluator')
        listed = isinstance(evaluators, (list, tuple))
        for i, metric in enumerate(evaluators if listed else [evaluators]):
            if not isinstance(metric, dict) or type_name(metric.get('type')) != 'AccMetric':
                continue
            chosen = metric.get('metric_list', ACC_METRICS)
            chosen = (chosen,) if isinstance(chosen, str) else tuple(chosen)
            single = [m for m in ACC_METRICS if m in chosen]
            if not single:
                continue
            key = f'{split}_evaluator' + (f'[{i}]' if listed else '')
            default = " (AccMetric's default)" if 'metric_list' not in metric else ''
            what = 'are metrics' if len(single) > 1 else 'is a metric'
            out.append(
                f"{key}.metric_list: {multi} is multi-label (multi_class=True), and AccMetric's "
                f'{" / ".join(single)}{default} {what} of one label per sample '
                f'({", ".join(SINGLE_LABEL_FAILURES[m] for m in single)}): use '
                f'metric_list={MULTI_LABEL_METRICS!r}'
            )
    return out


def metric_argument_problems(cfg: Config, mode: str) -> list[str]:
    """The keys of each metric of ``val_evaluator`` / ``test_evaluator`` (one dict or a list; in
    ``mode='test'`` the test one) against its class's arguments (module docstring)."""
    registry, base = registry_of(cfg, 'METRICS'), has_base(cfg)  # a list is replaced, a dict merged
    out = []
    for split in ('val', 'test') if mode == 'train' else ('test',):
        evaluators = cfg.get(f'{split}_evaluator')
        listed = isinstance(evaluators, (list, tuple))
        for i, metric in enumerate(evaluators if listed else [evaluators]):
            if not isinstance(metric, dict) or registry is None:
                continue
            kind = metric.get('type')
            cls = type_class(registry, kind)
            valid = class_arguments(cls) if cls is not None else None
            if valid is None:
                continue
            key = f'{split}_evaluator' + (f'[{i}]' if listed else '')
            given = {k: v for k, v in metric.items() if k != 'type' and not str(k).startswith('_')}
            out += unknown_keys(
                given,
                valid,
                key,
                f'an argument of {type_name(kind)}',
                merged=key if base and not listed else '',
            )
    return out
