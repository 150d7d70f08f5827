"""The classifying heads against the data's classes, their losses and the batch blendings,
checked before anything is built (:func:`dna_mm.config.check.check_config`):

* the classes (``mode='train'``): every classifying head's ``num_classes`` (MMAction2's
  ``cls_head``, MMPretrain's ``head``, MMDetection's ``bbox_head`` / ``mask_head``; not an RPN's)
  against what the training data states: the datasets' ``num_classes`` (dna_mm's video datasets),
  ``metainfo.classes`` or ``classes``, and the class names in the config's ``label_map`` file where
  it exists (MMDetection's ``NumClassCheckHook``, done before anything is built): fewer stop the
  first iteration on a target out of range, more train on classes no sample has (and a trivial
  top-5);
* an MMAction2 head's (``model.cls_head``, a ``BaseHead``) ``loss_cls``: a dict with a ``type``
  (one without, as ``--cfg-options model.cls_head.loss_cls.loss_weight=2.0`` makes on a base that
  leaves the loss to the head's default, is a registry ``KeyError`` naming no key), and
  (``mode='train'``) its ``class_weight`` one weight per class (a ``RuntimeError`` at the first
  iteration); (``mode='train'``) its ``label_smooth_eps`` in [0, 1) (1.5 trained towards a
  negative target without a word); with ``multi_class``, its ``average_clips`` not ``'prob'`` (a
  softmax over the classes that a multi-label video's classes share, ranked by the mAP);
* an MMAction2 head against its loaders' video datasets: multi-label (``multi_class=True``, or a
  sigmoid loss) on single-label lists (a sigmoid loss stops the first iteration), or single-label
  on multi-label lists (a softmax loss trains on targets of several ones without a word);
* the data preprocessor's ``blending`` (MMAction2's ``MixupBlending`` / ``CutmixBlending``, or
  ``RandomBatchAugment`` of them): each blending's ``alpha`` > 0 (a ``ValueError`` traceback from
  its ``Beta`` distribution as the model is built), its ``num_classes`` given (a ``TypeError``
  there) and (``mode='train'``) the classifying head's (a ``RuntimeError`` at the first
  iteration); ``RandomBatchAugment``'s ``probs`` a float or a list, one per augment, with a sum <=
  1 (MMAction2 asserts both) and (``mode='train'``) each in [0, 1].
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Optional

from mmengine.config import Config

from ..build import type_name
from .data import LOADERS, iter_datasets
from .values import is_number, is_size, not_positive, registered_class, registry_of, type_class

#: heads whose ``num_classes`` is not the data's (MMDetection's ``NumClassCheckHook`` skips them:
#: an RPN's is 1, a semantic head's the stuff classes)
OTHER_CLASS_HEADS = ('rpn_head', 'FusedSemanticHead', 'GARPNHead')


def class_count_problems(cfg: Config) -> list[str]:
    """Every classifying head's ``num_classes`` against the classes the training data states:
    each dataset's ``num_classes`` (dna_mm's video datasets), ``metainfo.classes`` or
    ``classes`` (MMDetection's, MMPretrain's), through dataset wrappers, and the names in the
    config's ``label_map`` file where it exists (a label map shipped with dna_mm, named without a
    file, is the datasets' affair). Fewer would stop the first iteration on a label
    out of range; more would train on classes no sample has (and a trivial top-5). A detector that
    reads its classes from text (a ``language_model``: MMDetection's GLIP, Grounding DINO) is left
    alone: its head's ``num_classes`` is the text's length."""
    counts: dict[int, list[str]] = {}
    for name in LOADERS['train']:
        loader = cfg.get(name)
        if isinstance(loader, dict):
            for count, where in _dataset_classes(loader.get('dataset'), f'{name}.dataset'):
                counts.setdefault(count, []).append(where)
    label_map = cfg.get('label_map')
    if isinstance(label_map, str) and os.path.isfile(label_map):  # the demo's comes with its data
        try:
            with open(label_map, encoding='utf-8') as f:
                names = [line for line in f if line.strip()]  # tools/infer.py's reading
        except (OSError, UnicodeDecodeError):
            names = []
        if names:
            counts.setdefault(len(names), []).append(f'the class names of label_map {label_map!r}')
    out = []
    model = cfg.get('model')
    if isinstance(model, dict) and 'language_model' in model:  # GLIP, Grounding DINO: classes named in text
        return []
    for key, num in _class_heads(model, 'model'):
        wrong = [f'{n} ({", ".join(where)})' for n, where in counts.items() if n != num]
        if wrong:
            out.append(
                f'{key}.num_classes ({num}) must be the number of classes of the data: {"; ".join(wrong)}'
            )
    return out


def _dataset_classes(dataset: Any, key: str) -> Iterator[tuple[int, str]]:
    """``(number of classes, its key)`` each dataset config under ``dataset`` states."""
    if not isinstance(dataset, dict):
        return
    if is_size(dataset.get('num_classes')):
        yield dataset['num_classes'], f'{key}.num_classes'
    metainfo = dataset.get('metainfo')
    for where, classes in (
        ('metainfo.classes', metainfo.get('classes') if isinstance(metainfo, dict) else None),
        ('classes', dataset.get('classes')),
    ):
        if isinstance(classes, (list, tuple)):
            yield len(classes), f'{key}.{where}'
    yield from _dataset_classes(dataset.get('dataset'), f'{key}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from _dataset_classes(inner, f'{key}.datasets[{i}]')


def _class_heads(node: Any, key: str) -> Iterator[tuple[str, int]]:
    """``(key, num_classes)`` of each head under ``node`` (a key ending in ``head``: MMAction2's
    ``cls_head``, MMPretrain's ``head``, MMDetection's ``bbox_head`` / ``mask_head``) that
    classifies into the data's classes (not :data:`OTHER_CLASS_HEADS`)."""
    if isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _class_heads(value, f'{key}[{i}]')
        return
    if not isinstance(node, dict):
        return
    name = key.rsplit('.', 1)[-1].split('[')[0]
    other = name in OTHER_CLASS_HEADS or type_name(node.get('type')) in OTHER_CLASS_HEADS
    if name.endswith('head') and not other and is_size(node.get('num_classes')):
        yield key, node['num_classes']
    for sub, value in node.items():
        yield from _class_heads(value, f'{key}.{sub}')


def model_class(cfg: Config, kind: Any) -> Any:
    """The class a model part's ``type`` builds (a name registered in the config's default
    scope, a dotted path, or the class itself); ``None`` where it cannot be told."""
    if isinstance(kind, str):
        registry = registry_of(cfg, 'MODELS')
        return registered_class(registry, kind)[1] if registry is not None else None
    return kind if isinstance(kind, type) else None


def mmaction_head(cfg: Config) -> Optional[tuple[dict, type]]:
    """``(config, class)`` of ``model.cls_head`` where it is MMAction2's ``BaseHead`` or a
    subclass (which builds its ``loss_cls`` and smooths its labels itself); ``None`` otherwise."""
    try:
        from mmaction.models.heads.base import BaseHead  # noqa: PLC0415
    except ImportError:
        return None
    model = cfg.get('model')
    head = model.get('cls_head') if isinstance(model, dict) else None
    if not isinstance(head, dict):
        return None
    cls = model_class(cfg, head.get('type'))
    return (head, cls) if isinstance(cls, type) and issubclass(cls, BaseHead) else None


def head_problems(cfg: Config, train: bool) -> list[str]:
    """An MMAction2 head's (:func:`mmaction_head`) loss and label smoothing:

    * ``loss_cls`` a dict with a ``type``: the head builds it with ``MODELS.build``, which stops on a
      ``KeyError`` naming no key without one. A ``loss_cls`` written in a config replaces the head's
      default loss (an argument's default, not a config key a child's dict or ``--cfg-options``
      merges into), so ``model.cls_head.loss_cls.loss_weight=2.0`` on a base that does not write
      ``loss_cls`` out is a loss without a type; the head's default type is named;
    * (``train``) its ``class_weight``, a list, one weight per class (``num_classes``): torch's
      loss stops the first iteration on a ``RuntimeError`` otherwise;
    * a ``multi_class`` head's ``average_clips`` not ``'prob'`` (``BaseHead``'s default): its test
      scores would be a softmax over the classes, which a multi-label video's classes share, and
      the mAP would rank the videos by those shares (MMAction2 tests it without a word);
    * (``train``) ``label_smooth_eps`` in [0, 1): ``BaseHead.loss_by_feat`` trains on targets
      ``(1 - eps) * one_hot + eps / num_classes`` without a word, where 1 or more leaves the true
      class's target no higher than the others' and below 0 makes the others' negative."""
    import inspect  # noqa: PLC0415

    found = mmaction_head(cfg)
    if found is None:
        return []
    head, cls = found
    out = []
    signature = inspect.signature(cls).parameters
    loss = head.get('loss_cls')
    if isinstance(loss, dict) and 'type' not in loss:
        default = signature.get('loss_cls')
        kind = default.default.get('type') if default and isinstance(default.default, dict) else None
        example = f"e.g. {kind!r}, {cls.__name__}'s default" if kind else "e.g. 'CrossEntropyLoss'"
        out.append(
            f'model.cls_head.loss_cls has no type, got {dict(loss)!r}: a loss_cls in the config replaces '
            f"the head's default loss whole (MMAction2 would stop on a KeyError naming no key); give "
            f'model.cls_head.loss_cls.type with it ({example})'
        )
    weights = loss.get('class_weight') if isinstance(loss, dict) else None
    classes = head.get('num_classes')
    if train and isinstance(weights, (list, tuple)) and is_size(classes) and len(weights) != classes:
        out.append(
            f'model.cls_head.loss_cls.class_weight has {len(weights)} weights and '
            f"model.cls_head.num_classes is {classes}: one weight per class (torch's loss would stop the "
            'first iteration on a RuntimeError)'
        )
    clips = head.get('average_clips', getattr(signature.get('average_clips'), 'default', None))
    if head.get('multi_class') and clips == 'prob':
        said = '' if 'average_clips' in head else f" ({cls.__name__}'s default)"
        out.append(
            f"model.cls_head.average_clips is 'prob'{said} with multi_class=True: a test would score each "
            'video with a softmax over the classes, one distribution that its classes share, where a '
            'multi-label head scores each class on its own (a sigmoid loss), and the mAP would rank the '
            "videos by those shares; set model.cls_head.average_clips='score'"
        )
    eps = head.get('label_smooth_eps')
    if train and eps is not None and (not is_number(eps) or not 0 <= eps < 1):
        out.append(
            f'model.cls_head.label_smooth_eps must be a number in [0, 1) (the share of each target spread '
            'evenly over the classes: at 1 or more the true class is no longer the most likely one, below 0 '
            f'the others are negative; MMAction2 trains on it without a word), got {eps!r}'
        )
    return out


#: MMAction2's losses that take a 0/1 target per class: a multi-label dataset's (``multi_class``)
MULTI_LABEL_LOSSES = ('BCELossWithLogits',)


def multi_label_problems(cfg: Config, loaders: tuple[str, ...]) -> list[str]:
    """An MMAction2 head (:func:`mmaction_head`) and the video datasets of ``loaders`` (through
    dataset wrappers) that disagree on how many labels a video has. A dataset with
    ``multi_class=True`` gives each video a 0/1 target over the classes; without it, one class.
    A head is multi-label by its ``multi_class`` (which dna_mm's tools read: ``tools/infer.py``'s
    lists and scores) or its loss (:data:`MULTI_LABEL_LOSSES`). A sigmoid loss on single-label data
    stops training at its first iteration (a target of another size than the scores); a softmax
    loss on multi-label data trains on targets that hold several ones without a word. One message
    for the datasets that disagree alike."""
    found = mmaction_head(cfg)
    if found is None:
        return []
    from mmaction.datasets import BaseActionDataset  # noqa: PLC0415

    head, cls = found
    loss = head.get('loss_cls', _default(cls, 'loss_cls'))
    loss_name = type_name(loss.get('type')) if isinstance(loss, dict) else None
    flag, sigmoid = bool(head.get('multi_class')), loss_name in MULTI_LABEL_LOSSES
    registry = registry_of(cfg, 'DATASETS')
    single, multi = [], []
    for loader in loaders:
        node = cfg.get(loader)
        dataset = node.get('dataset') if isinstance(node, dict) else None
        for at, inner in iter_datasets(dataset, f'{loader}.dataset'):
            kind = type_class(registry, inner.get('type')) if registry is not None else None
            if isinstance(kind, type) and issubclass(kind, BaseActionDataset):
                (multi if inner.get('multi_class') else single).append(at)
    out = []
    if single and (flag or sigmoid):
        said = ' and '.join(
            [*(['multi_class=True'] if flag else []), *([f'loss_cls {loss_name}'] if sigmoid else [])]
        )
        stops = (
            ': training would stop at its first iteration on a target of another size than the scores'
            if sigmoid and single[0].startswith('train_dataloader')
            else ''
        )
        out.append(
            f'{_listed(single)} single-label (no multi_class=True: one class a video) and model.cls_head '
            f'is multi-label ({said}){stops}; give the datasets multi_class=True and num_classes for lists '
            'of several labels a video, or make the head single-label (no multi_class, a softmax loss such '
            "as loss_cls=dict(type='CrossEntropyLoss'))"
        )
    if multi and not flag:
        effect = (
            "dna_mm's tools would read the model as single-label (tools/infer.py: its lists, its scores)"
            if sigmoid
            else f'its softmax loss ({loss_name}) would train on targets that hold several ones, '
            'without a word'
        )
        out.append(
            f'{_listed(multi)} multi-label (multi_class=True) and model.cls_head is not (no multi_class): '
            f'{effect}; set model.cls_head.multi_class=True'
            + ("" if sigmoid else ", loss_cls=dict(type='BCELossWithLogits') and average_clips='score'")
        )
    return out


def _default(cls: type, name: str) -> Any:
    """The default of ``cls``'s argument ``name``; ``None`` without one."""
    import inspect  # noqa: PLC0415

    default = inspect.signature(cls).parameters.get(name)
    return None if default is None or default.default is inspect.Parameter.empty else default.default


def _listed(keys: list[str]) -> str:
    """``'a is'``, ``'a and b are'``, ``'a, b and c are'``."""
    if len(keys) == 1:
        return f'{keys[0]} is'
    return f'{", ".join(keys[:-1])} and {keys[-1]} are'


#: MMAction2's blendings of a batch (``ActionDataPreprocessor``'s ``blending``, or an item of a
#: ``RandomBatchAugment``'s ``augments``): ``num_classes`` required, ``alpha`` their ``Beta(alpha,
#: alpha)``'s
BLENDINGS = ('MixupBlending', 'CutmixBlending')


def blending_problems(cfg: Config, train: bool) -> list[str]:
    """The blending of the data preprocessor the runner uses (``model.data_preprocessor``, else
    the top-level ``data_preprocessor``, which mmengine's runner gives a model without one): a
    :data:`BLENDINGS` one (:func:`_mix_problems`), or a ``RandomBatchAugment``: its ``augments`` a
    dict or a list of dicts, each a blending checked as one, and its ``probs``
    (:func:`_probs_problems`). What MMAction2 asserts or raises as the model is built is named in
    both modes; what stops the first iteration (the classes, a negative probability) with
    ``train``."""
    model = cfg.get('model')
    if isinstance(model, dict) and 'data_preprocessor' in model:  # the runner's setdefault
        key, preprocessor = 'model.data_preprocessor', model['data_preprocessor']
    else:
        key, preprocessor = 'data_preprocessor', cfg.get('data_preprocessor')
    blending = preprocessor.get('blending') if isinstance(preprocessor, dict) else None
    if not isinstance(blending, dict):
        return []
    key += '.blending'
    heads = list(_class_heads(model, 'model'))
    if type_name(blending.get('type')) != 'RandomBatchAugment':
        return _mix_problems(blending, key, heads, train)
    augments = blending.get('augments')
    if augments is None:
        return [f'{key} needs augments (RandomBatchAugment: a list of blendings, e.g. MixupBlending)']
    listed = isinstance(augments, (list, tuple))
    out = []
    for i, augment in enumerate(augments if listed else [augments]):
        at = f'{key}.augments' + (f'[{i}]' if listed else '')
        if isinstance(augment, dict):
            out += _mix_problems(augment, at, heads, train)
        else:  # MMAction2 asserts it
            out.append(
                f'{at} must be a dict (a blending, e.g. MixupBlending, and its arguments), got {augment!r}'
            )
    return out + _probs_problems(blending.get('probs'), f'{key}.probs', len(augments) if listed else 1, train)


def _mix_problems(blending: dict, key: str, heads: list[tuple[str, int]], train: bool) -> list[str]:
    """One :data:`BLENDINGS` blending at ``key``: ``alpha`` > 0 (``Beta(alpha, alpha)`` stops the
    build on a ``ValueError`` traceback otherwise), ``num_classes`` given (a ``TypeError`` there;
    the heads' named) and (``train``) that of each classifying head of ``heads`` (``(key,
    num_classes)``, :func:`_class_heads`): the labels become one-hot vectors of ``num_classes``
    that the loss compares with the head's scores (a ``RuntimeError`` at the first iteration).
    Another blending is its own affair."""
    if type_name(blending.get('type')) not in BLENDINGS:
        return []
    kind = type_name(blending.get('type'))
    out = not_positive(blending.get('alpha'), f'{key}.alpha')
    classes = blending.get('num_classes')
    if 'num_classes' not in blending:
        said = f': {", ".join(f"{k}.num_classes, {n}" for k, n in heads)}' if heads else ''
        out.append(f"{key} needs num_classes ({kind}'s one-hot labels have that many classes{said})")
    elif train and is_size(classes):
        out += [
            f'{key}.num_classes ({classes}) must be {at}.num_classes ({n}): the blended labels are one-hot '
            "vectors of num_classes classes, which the loss compares with the head's scores"
            for at, n in heads
            if n != classes
        ]
    return out


def _probs_problems(probs: Any, key: str, augments: int, train: bool) -> list[str]:
    """A ``RandomBatchAugment``'s ``probs`` (``None``: each augment as likely): a float or a list
    (MMAction2 appends the chance of no blending to it: a tuple is an ``AttributeError``), one per
    augment and a sum <= 1 (MMAction2 asserts both), and (``train``) each in [0, 1] (NumPy's
    ``choice`` refuses a negative one at the first iteration)."""
    if probs is None:
        return []
    if isinstance(probs, float):
        probs = [probs]
    if not isinstance(probs, list) or not all(is_number(p) for p in probs):
        return [
            f'{key} must be a float or a list of floats, one per augment (None: each as likely), '
            f'got {probs!r}'
        ]
    if len(probs) != augments:
        return [
            f'{key} has {len(probs)} probabilities for {augments} augments: one per augment '
            '(MMAction2 asserts it)'
        ]
    out = []
    if sum(probs) > 1:
        out.append(
            f"{key} sum to {sum(probs):g}, more than 1 (each is its augment's chance, 1 - the sum that "
            'of no blending; MMAction2 asserts it)'
        )
    if train:
        out += [
            f'{key}[{i}] must be in [0, 1] (a probability), got {p!r}'
            for i, p in enumerate(probs)
            if not 0 <= p <= 1
        ]
    return out
