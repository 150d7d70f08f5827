"""A loop's labels against the classes its model's head scores, held as the loop is built.

A classifying head of ``num_classes`` scores the classes ``0 .. num_classes - 1``. A list with a
larger label stops training at its first iteration on torch's ``IndexError: Target 2 is out of
bounds`` traceback (on a GPU, a device-side assert that names nothing), and in a validation or
test scores that sample as a wrong prediction without a word. The config check
(:mod:`dna_mm.config.check.heads`) compares the head with the classes a config states; a config
that states none (no dataset ``num_classes``, no ``label_map``; an image folder per class) is
caught here, from the labels the data holds, before the first iteration: one
:class:`~dna_mm.errors.ConfigError` naming the sample (a list's line) and the head's key.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from mmengine.model import BaseTTAModel, is_model_wrapper
from torch import nn

from ..errors import ConfigError

#: the attributes of a classifier that hold its classifying head: MMAction2's recognizers'
#: ``cls_head``, MMPretrain's ``ImageClassifier``'s ``head``
HEAD_ATTRIBUTES = ('cls_head', 'head')


def head_classes(model: nn.Module) -> Optional[tuple[str, int]]:
    """``(its config key, num_classes)`` of the model's classifying head (:data:`HEAD_ATTRIBUTES`);
    ``None`` for a model without one (a detector: MMDetection's ``NumClassCheckHook`` has it).
    A wrapped model (distributed, test-time augmentation) is read through its ``module``."""
    model = model.module if is_model_wrapper(model) or isinstance(model, BaseTTAModel) else model
    for name in HEAD_ATTRIBUTES:
        classes = getattr(getattr(model, name, None), 'num_classes', None)
        if isinstance(classes, int) and not isinstance(classes, bool) and classes > 0:
            return f'model.{name}', classes
    return None


def largest_data_label(dataset: Any) -> Optional[tuple[int, str]]:
    """``(label, where)`` of the largest label of ``dataset``, ``where`` naming its sample: a
    dna_mm list dataset's, kept as it read its list (``'list:line'``,
    :attr:`~dna_mm.datasets.robust_samples.RobustSamples.largest_label`; a subset of it, mmengine's
    ``indices``, is read as another dataset is, its lines named); another dataset's
    (MMPretrain's ``gt_label``, MMAction2's ``label``), read from its data infos (4 to 6 µs a
    sample: 5 to 8 s for ImageNet's 1.28 M, once a loop and rank); the largest of those under a
    dataset wrapper (mmengine's ``ConcatDataset`` ``datasets``, ``RepeatDataset`` /
    ``ClassBalancedDataset`` ``dataset``). ``None`` where none is known (no labels, a dataset not
    yet read: ``lazy_init``)."""
    inner = getattr(dataset, 'datasets', None)
    if inner is None and getattr(dataset, 'dataset', None) is not None:
        inner = [dataset.dataset]
    if inner is not None:
        found = [f for f in map(largest_data_label, inner) if f is not None]
        return max(found, key=lambda f: f[0]) if found else None
    if hasattr(dataset, 'largest_label') and getattr(dataset, '_indices', None) is None:  # a whole list
        if dataset.largest_label is None:
            return None
        label, lineno = dataset.largest_label
        return label, f'{dataset.ann_file}:{lineno}' if lineno is not None else str(dataset.ann_file)
    if not getattr(dataset, '_fully_initialized', False) or not hasattr(dataset, 'get_data_info'):
        return None
    found = None
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        top = _top_label(info.get('gt_label', info.get('label')))
        if top is not None and (found is None or top > found[0]):
            found = (top, i, info)
    if found is None:
        return None
    top, i, info = found
    if info.get('lineno') is not None and getattr(dataset, 'ann_file', None):  # a subset of a dna_mm list
        return top, f'{dataset.ann_file}:{info["lineno"]}'
    path = next((info[k] for k in SAMPLE_PATH_KEYS if info.get(k)), None)
    return top, f'{type(dataset).__name__} sample {i}' + (f' ({path})' if path else '')


#: the keys of a data info that name its sample's file (MMPretrain's, MMAction2's)
SAMPLE_PATH_KEYS = ('img_path', 'filename', 'frame_dir')


def _top_label(label: Any) -> Optional[int]:
    """The largest class of a data info's label: an ``int`` (``-1``: none), a list or array of
    them (a multi-label sample), or MMAction2's ``multi_class`` one-hot (a float tensor); ``None``
    for no class. A plain ``int``, the common case, is read without numpy (a third of the time)."""
    if type(label) is int:  # noqa: E721  (a bool is no class)
        return label if label >= 0 else None
    if isinstance(label, torch.Tensor) and label.is_floating_point():  # a one-hot target
        hot = torch.nonzero(label).flatten()
        return int(hot.max()) if len(hot) else None
    try:
        values = np.asarray(label).reshape(-1)
    except (TypeError, ValueError):
        return None
    if not np.issubdtype(values.dtype, np.integer):
        return None
    values = values[values >= 0]
    return int(values.max()) if values.size else None


def refuse_labels_beyond_head(model: nn.Module, dataloader: Any, key: str, train: bool) -> None:
    """A :class:`~dna_mm.errors.ConfigError` when the data of ``dataloader`` (the config's
    ``key``, ``'train_dataloader'``) holds a label the model's head does not score
    (:func:`head_classes`, :func:`largest_data_label`); what it would do otherwise (``train``:
    stop at the first iteration; else: score as wrong) is said."""
    head = head_classes(model)
    found = largest_data_label(getattr(dataloader, 'dataset', None)) if head is not None else None
    if head is None or found is None or found[0] < head[1]:
        return
    (at, classes), (label, where) = head, found
    effect = (
        'training would stop at its first iteration on a target out of range'
        if train
        else 'its samples would count as wrong without a word'
    )
    raise ConfigError(
        f'{where}: label {label} is beyond {at}.num_classes ({classes}: labels 0 to {classes - 1}); '
        f'{effect}. Set {at}.num_classes to the number of classes of the data (at least {label + 1}), '
        f'or give {key} a list of the model\'s classes'
    )
