"""The keys of an MMDetection two-stage detector's ``model.train_cfg`` / ``model.test_cfg``,
checked before anything is built (:func:`dna_mm.config.check.check_config`). MMDetection reads
them with ``.get`` or as attributes of a ``ConfigDict``, so a misspelt key is dropped without a
word and the run changes (``rpn_proposa``: the RPN proposes for training with ``test_cfg.rpn``,
top 1000 before NMS, not 2000). Each key not read is named with the closest valid name:

* the parts a ``TwoStageDetector`` (``MaskRCNN``, ``FasterRCNN``, a subclass: the type resolved
  through MMDetection's ``MODELS``) reads: ``train_cfg`` ``rpn`` / ``rpn_proposal`` / ``rcnn``,
  ``test_cfg`` ``rpn`` / ``rcnn`` (and ``panoptic``: ``TwoStagePanopticSegmentor``);
* ``train_cfg.rpn``, ``train_cfg.rpn_proposal`` and ``test_cfg.rpn`` against what an ``RPNHead``
  reads of them, ``train_cfg.rcnn`` / ``test_cfg.rcnn`` against what ``StandardRoIHead``, its
  ``BBoxHead`` and its ``FCNMaskHead`` read (the mask keys with a ``mask_head`` only): a head that
  reads them elsewhere (``GARPNHead``, ``CascadeRoIHead``'s stages, ``PointRendRoIHead``, ...) or a
  subclass that overrides where they are read is left alone;
* the ``assigner`` / ``sampler`` of ``train_cfg.rpn`` / ``train_cfg.rcnn`` (each stage of a
  list) against the arguments of their ``TASK_UTILS`` class: the named ones up its classes, since
  ``RandomSampler`` and the other samplers take any other key into ``**kwargs``
  (``add_gt_as_proposal``), plus ``rng``, which ``RandomSampler`` reads from them.

* the parts of the model MMDetection builds from its ``TASK_UTILS`` (a head's ``bbox_coder``,
  ``prior_generator``, ...; those of ``train_cfg`` / ``test_cfg`` above) whose class drops the
  keys it does not name (``BaseBBoxCoder``: ``target_std`` for ``target_stds`` would train with
  the default stds, without a word): their arguments.

The ``nms`` dicts are left alone: mmcv's ``batched_nms`` pops ``class_agnostic`` and ``split_thr``
and passes the rest to the op (``nms``, ``soft_nms``, ...), which refuses an unknown key.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from mmengine.config import Config

from ..build import type_name
from .values import class_arguments, registry_of, type_class, unknown_keys

# The keys each part reads (mmdet 3.3.0). The detector: TwoStageDetector.__init__ (train_cfg.rpn,
# .rcnn, test_cfg.rpn, .rcnn) and .loss (train_cfg.get('rpn_proposal', test_cfg.rpn));
# TwoStagePanopticSegmentor.__init__ adds test_cfg.panoptic.
DETECTOR_KEYS = {'train_cfg': ('rpn', 'rpn_proposal', 'rcnn'), 'test_cfg': ('rpn', 'rcnn')}
# train_cfg.rpn: AnchorHead.__init__ (assigner, .get('sampler')), ._get_targets_single
# (allowed_border, pos_weight). rpn_proposal / test_cfg.rpn: RPNHead._predict_by_feat_single
# (.get('nms_pre')), ._bbox_post_process (.get('min_bbox_size'), nms, max_per_img).
RPN_KEYS = {
    'train': ('assigner', 'sampler', 'allowed_border', 'pos_weight', 'debug'),
    'test': ('nms_pre', 'min_bbox_size', 'nms', 'max_per_img'),
}
# train_cfg.rcnn: StandardRoIHead.init_assigner_sampler (assigner, sampler), BBoxHead
# ._get_targets_single (pos_weight), FCNMaskHead.get_targets -> structures/mask/mask_target.py
# mask_target_single (mask_size, .get('soft_mask_target')). test_cfg.rcnn: BBoxHead
# ._predict_by_feat_single -> multiclass_nms (score_thr, nms, max_per_img), StandardRoIHead
# .predict_mask and FCNMaskHead._predict_by_feat_single (mask_thr_binary).
RCNN_KEYS = {
    'train': ('assigner', 'sampler', 'pos_weight', 'debug'),
    'test': ('score_thr', 'nms', 'max_per_img'),
}
RCNN_MASK_KEYS = {'train': ('mask_size', 'soft_mask_target'), 'test': ('mask_thr_binary',)}
# 'debug' is read by no part of mmdet 3.x (2.x's), but every config of its own keeps it: accepted.
# The methods that read them: a subclass that overrides one may read more, and is left alone.
_DETECTOR_READS = ('__init__', 'loss', 'predict')
_RPN_READS = ('__init__', '_get_targets_single', '_predict_by_feat_single', '_bbox_post_process')
_ROI_READS = (
    '__init__',
    'init_assigner_sampler',
    'loss',
    'bbox_loss',
    'mask_loss',
    'predict_bbox',
    'predict_mask',
)
_BBOX_READS = (
    'get_targets',
    '_get_targets_single',
    'loss_and_target',
    'predict_by_feat',
    '_predict_by_feat_single',
)
_MASK_READS = ('get_targets', 'loss_and_target', 'predict_by_feat', '_predict_by_feat_single')
#: keys a TASK_UTILS class reads from its **kwargs (RandomSampler.__init__: kwargs.get('rng'))
KWARGS_READ = {'RandomSampler': ('rng',)}


def detector_cfg_problems(model: Any) -> list[str]:
    """The keys of an MMDetection two-stage detector's ``model.train_cfg`` / ``model.test_cfg``
    (and of their parts, assigners and samplers) that it does not read (module docstring); a model
    of another kind, or one whose classes cannot be had, gives none."""
    if not isinstance(model, dict) or not isinstance(model.get('roi_head'), dict):
        return []
    try:
        from mmdet.models.dense_heads import RPNHead  # noqa: PLC0415
        from mmdet.models.detectors import TwoStageDetector, TwoStagePanopticSegmentor  # noqa: PLC0415
        from mmdet.models.roi_heads import StandardRoIHead  # noqa: PLC0415
        from mmdet.models.roi_heads.bbox_heads import BBoxHead  # noqa: PLC0415
        from mmdet.models.roi_heads.mask_heads import FCNMaskHead  # noqa: PLC0415
        from mmdet.registry import MODELS, TASK_UTILS  # noqa: PLC0415
    except ImportError:
        return []
    cls = type_class(MODELS, model.get('type'))
    if cls is None or not issubclass(cls, TwoStageDetector):
        return []
    if not cls.__module__.startswith('mmdet.') and not _keeps(cls, TwoStageDetector, _DETECTOR_READS):
        return []  # mmdet's own are read above; another subclass may read more
    kind = type_name(model.get('type')) or cls.__name__
    what = f'a key {kind} reads'
    roi, masks = model['roi_head'], model['roi_head'].get('mask_head') is not None
    rpn = _reads_as(MODELS, model.get('rpn_head'), RPNHead, _RPN_READS)
    rcnn = _reads_as(MODELS, roi, StandardRoIHead, _ROI_READS)
    rcnn = rcnn and _reads_as(MODELS, roi.get('bbox_head'), BBoxHead, _BBOX_READS)
    rcnn = rcnn and (not masks or _reads_as(MODELS, roi['mask_head'], FCNMaskHead, _MASK_READS))
    out = []
    for part, mode in (('train_cfg', 'train'), ('test_cfg', 'test')):
        node = model.get(part)
        if not isinstance(node, dict):
            continue
        panoptic = ('panoptic',) if mode == 'test' and issubclass(cls, TwoStagePanopticSegmentor) else ()
        out += unknown_keys(node, list(DETECTOR_KEYS[part] + panoptic), f'model.{part}', what)
        tables = [('rpn', RPN_KEYS['test' if mode == 'test' else 'train'], rpn)]
        tables += [('rpn_proposal', RPN_KEYS['test'], rpn)] if mode == 'train' else []
        tables += [('rcnn', RCNN_KEYS[mode] + (RCNN_MASK_KEYS[mode] if masks else ()), rcnn)]
        for name, valid, checked in tables:
            if checked and isinstance(node.get(name), dict):
                out += unknown_keys(node[name], list(valid), f'model.{part}.{name}', what)
        for name in ('rpn', 'rcnn') if mode == 'train' else ():
            stages = node.get(name)
            listed = isinstance(stages, (list, tuple))
            for i, stage in enumerate(stages if listed else [stages]):
                key = f'model.{part}.{name}' + (f'[{i}]' if listed else '')
                out += _task_problems(TASK_UTILS, stage, key)
    return out


def _keeps(cls: type, base: type, methods: tuple[str, ...]) -> bool:
    """``cls`` is ``base`` or a subclass that keeps each of ``base``'s ``methods``."""
    return issubclass(cls, base) and all(getattr(cls, m) is getattr(base, m) for m in methods)


def _reads_as(registry: Any, node: Any, base: type, methods: tuple[str, ...]) -> bool:
    """The head ``node`` (a config) is a ``base`` that reads its cfg as ``base`` does (``_keeps``);
    ``False`` where there is none, or where its class cannot be had."""
    cls = type_class(registry, node.get('type')) if isinstance(node, dict) else None
    return cls is not None and _keeps(cls, base, methods)


def _task_problems(registry: Any, stage: Any, key: str) -> list[str]:
    """The ``assigner`` / ``sampler`` of ``stage`` (a part of ``train_cfg``) against the named
    arguments up its class (``accepted_arguments``) and those it reads from ``**kwargs``."""
    from ...utils.build_errors import accepted_arguments  # noqa: PLC0415

    out: list[str] = []
    for name in ('assigner', 'sampler') if isinstance(stage, dict) else ():
        node = stage.get(name)
        cls: Optional[type] = type_class(registry, node.get('type')) if isinstance(node, dict) else None
        if cls is None:
            continue
        valid = accepted_arguments(cls)
        valid += [k for c in cls.__mro__ for k in KWARGS_READ.get(c.__name__, ())]
        given = {k: v for k, v in node.items() if k != 'type' and not str(k).startswith('_')}
        out += unknown_keys(
            given, valid, f'{key}.{name}', f'an argument of {type_name(node["type"]) or cls.__name__}'
        )
    return out


def task_util_problems(cfg: Config) -> list[str]:
    """The keys of each part under ``model`` (but its ``train_cfg`` / ``test_cfg``) that the
    config's scope builds from ``TASK_UTILS`` and not from ``MODELS``, whose class drops the keys
    it does not name (:func:`~.values.class_arguments`: a class that passes them on, or reads
    some, is left to its build)."""
    utils, models = registry_of(cfg, 'TASK_UTILS'), registry_of(cfg, 'MODELS')
    out: list[str] = []
    for key, node in _typed_parts(cfg.get('model'), 'model') if utils is not None else ():
        cls = type_class(utils, node['type'])
        if cls is None or type_class(models, node['type']) is not None:
            continue
        valid = class_arguments(cls)
        given = {k: v for k, v in node.items() if k != 'type' and not str(k).startswith('_')}
        out += unknown_keys(given, valid, key, f'an argument of {cls.__name__}') if valid is not None else []
    return out


def _typed_parts(node: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, dict)`` of each dict with a string ``type`` under ``node``, but in a
    ``train_cfg`` / ``test_cfg``."""
    if isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _typed_parts(value, f'{key}[{i}]')
    elif isinstance(node, dict):
        if isinstance(node.get('type'), str):
            yield key, node
        for name, value in node.items():
            if name not in ('train_cfg', 'test_cfg'):
                yield from _typed_parts(value, f'{key}.{name}')
