"""A loop's labels against the classes its model's head scores, held as the loop is built.

A classifying head of ``num_classes`` scores the classes ``0 .. num_classes - 1``. A list with a
larger label stops training at its first iteration on torch's ``IndexError: Target 2 is out of
bounds`` traceback (on a GPU, a device-side assert that names nothing), and in a validation or
test scores that sample as a wrong prediction without a word. The config check
(:mod:`dna_mm.config.check.heads`) compares the head with the classes a config states; a config
that states none (no dataset ``num_classes``, no ``label_map``) is caught here, from the labels
the lists hold, before the first iteration: one :class:`~dna_mm.errors.ConfigError` naming the
list's line and the head's key.
"""

from __future__ import annotations

from typing import Any, Optional

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
    """``(label, 'list:line')`` of the largest label of ``dataset``: a dna_mm list dataset's
    (:attr:`~dna_mm.datasets.robust_samples.RobustSamples.largest_label`), or the largest of those
    under a dataset wrapper (mmengine's ``ConcatDataset`` ``datasets``, ``RepeatDataset`` /
    ``ClassBalancedDataset`` ``dataset``); ``None`` where none is known (another dataset)."""
    inner = getattr(dataset, 'datasets', None)
    if inner is None and getattr(dataset, 'dataset', None) is not None:
        inner = [dataset.dataset]
    if inner is not None:
        found = [f for f in map(largest_data_label, inner) if f is not None]
        return max(found, key=lambda f: f[0]) if found else None
    largest = getattr(dataset, 'largest_label', None)
    if not isinstance(largest, tuple):
        return None
    label, lineno = largest
    where = getattr(dataset, 'ann_file', None) or type(dataset).__name__
    return label, f'{where}:{lineno}' if lineno is not None else str(where)


def refuse_labels_beyond_head(model: nn.Module, dataloader: Any, key: str, train: bool) -> None:
    """A :class:`~dna_mm.errors.ConfigError` when the data of ``dataloader`` (the config's
    ``key``, ``'train_dataloader'``) holds a label the model's head does not score
    (:func:`head_classes`, :func:`largest_data_label`); what it would do otherwise (``train``:
    stop at the first iteration; else: score as wrong) is said."""
    head, found = head_classes(model), largest_data_label(getattr(dataloader, 'dataset', None))
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
