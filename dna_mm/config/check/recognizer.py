"""An MMAction2 recognizer against its data, checked before anything is built
(:func:`dna_mm.config.check.check_config`):

* (``mode='train'``) ``num_clips`` > 1 in the train pipeline's ``SampleFrames`` (or a subclass)
  for MMAction2's ``Recognizer3D`` and a head that keeps ``BaseHead``'s loss (TimeSformer's, I3D's,
  ...): the recognizer scores each clip as a sample of its own against its video's one label, a
  ``ValueError`` at the first iteration (``Recognizer2D`` averages its segments and is left
  alone; the val / test pipelines may sample more clips);
* a recognizer's TimeSformer (MMAction2's, or a subclass such as dna_mm's), whose layers would
  stop the first iteration otherwise: ``img_size`` a multiple of ``patch_size`` (MMAction2
  asserts it), ``num_frames`` the pipelines' ``clip_len``, ``img_size`` the size of the frames
  where a pipeline fixes it (a last ``Resize`` to ``(w, h)`` with ``keep_ratio=False``, or a crop
  of a fixed size), and the head's ``in_channels`` its ``embed_dims``;
* ``model.test_cfg.max_testing_views`` (MMAction2's): a positive int, and then the val / test
  dataloaders' ``batch_size`` is 1 (the recognizer splits the views of one video);
* the keys of an MMAction2 recognizer's ``model.test_cfg`` and ``model.train_cfg``: those it reads
  (``Recognizer3D``: ``max_testing_views``, ``fcn_test``; none in ``train_cfg``), where its
  ``.get`` would drop a typo (``max_testing_view``) and test every view in one pass; the closest
  valid name is suggested, and an MMAction2 0.x key named where 1.x reads it
  (``average_clips``: ``model.cls_head.average_clips``).
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Optional

from mmengine.config import Config

from ..build import type_name
from .data import fixed_size, iter_pipelines, iter_transforms, sampler_arguments
from .heads import mmaction_head, model_class
from .values import is_size, registered_class, registry_of, square_size

#: the keys MMAction2's recognizers read from their ``test_cfg`` / ``train_cfg`` (1.2.0:
#: ``Recognizer3D.extract_feat`` and ``Recognizer2D.extract_feat``; the others read neither)
_NO_KEYS: dict[str, tuple[str, ...]] = {'test_cfg': (), 'train_cfg': ()}
RECOGNIZER_CFG_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    'Recognizer3D': {'test_cfg': ('max_testing_views', 'fcn_test'), 'train_cfg': ()},
    'Recognizer2D': {'test_cfg': ('max_testing_views', 'fcn_test', 'num_segs'), 'train_cfg': ()},
    'RecognizerAudio': _NO_KEYS,
    'RecognizerGCN': _NO_KEYS,
    'Recognizer3DMM': _NO_KEYS,
    'RecognizerOmni': _NO_KEYS,
}
#: (part, key) of an MMAction2 0.x recognizer config -> where MMAction2 1.x reads it
MOVED_RECOGNIZER_KEYS = {
    ('test_cfg', 'average_clips'): "the clips are averaged by the head's argument, "
    "model.cls_head.average_clips ('prob' or 'score')",
    ('test_cfg', 'feature_extraction'): 'features come from tools/extract_features.py '
    "(or the model's extract_feat)",
    ('train_cfg', 'blending'): "mixup / cutmix is the preprocessor's, model.data_preprocessor.blending",
}


def training_clips_problems(cfg: Config) -> list[str]:
    """``num_clips`` > 1 in a sampling step (MMAction2's ``SampleFrames`` or a subclass) of the
    train pipeline, for MMAction2's ``Recognizer3D`` (or a subclass that keeps its
    ``extract_feat`` and ``loss``) with a head that keeps ``BaseHead``'s ``loss`` and
    ``loss_by_feat`` (TimeSformer's, I3D's, SlowFast's, X3D's, MViT's, ...): the recognizer puts
    every clip through the backbone as a sample of its own and passes the head no number of clips,
    so the head scores ``num_clips`` clips per video against one label (the top-k accuracy it logs
    stops the first iteration on ``ValueError: operands could not be broadcast together``).
    ``Recognizer2D`` (TSN, TSM) averages its segments in the head and is left alone; the val and
    test pipelines may sample more clips, which the head averages."""
    try:
        from mmaction.models.heads.base import BaseHead  # noqa: PLC0415
        from mmaction.models.recognizers import Recognizer3D  # noqa: PLC0415
        from mmaction.models.recognizers.base import BaseRecognizer  # noqa: PLC0415
    except ImportError:
        return []
    model = cfg.get('model')
    found = mmaction_head(cfg)
    recognizer = model_class(cfg, model.get('type')) if isinstance(model, dict) else None
    if found is None or not isinstance(recognizer, type) or not issubclass(recognizer, Recognizer3D):
        return []
    head = found[1]
    own = (
        recognizer.extract_feat is not Recognizer3D.extract_feat or recognizer.loss is not BaseRecognizer.loss
    )
    if own or head.loss is not BaseHead.loss or head.loss_by_feat is not BaseHead.loss_by_feat:
        return []
    loader = cfg.get('train_dataloader')
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    return [
        f'{key}.num_clips ({type_name(step.get("type"))}) must be 1 for training with {recognizer.__name__} '
        f'and {head.__name__}, got {step["num_clips"]}: the recognizer scores each clip as a sample of its '
        'own against the one label of its video (a ValueError at the first iteration); sample more clips '
        'in the val / test pipelines, where the head averages them'
        for key, step in iter_transforms(dataset, 'train_dataloader.dataset')
        if sampler_arguments(step.get('type')) is not None
        and is_size(step.get('num_clips'))
        and step['num_clips'] > 1
    ]


def recognizer_cfg_problems(model: Any) -> list[str]:
    """The keys of an MMAction2 recognizer's ``model.test_cfg`` / ``model.train_cfg`` against those
    it reads (:data:`RECOGNIZER_CFG_KEYS`; its ``.get`` would drop a typo such as
    ``max_testing_view``, and testing would go on with every view in one pass), the key that moved
    to another part in MMAction2 1.x named (:data:`MOVED_RECOGNIZER_KEYS`). A recognizer of
    another type (a subclass may read more) is left alone."""
    if not isinstance(model, dict) or type_name(model.get('type')) not in RECOGNIZER_CFG_KEYS:
        return []
    kind = type_name(model.get('type'))
    out = []
    for part in ('test_cfg', 'train_cfg'):
        node = model.get(part)
        if not isinstance(node, dict):
            continue
        valid = list(RECOGNIZER_CFG_KEYS[kind][part])
        for key in node:
            moved = MOVED_RECOGNIZER_KEYS.get((part, key))
            if moved:
                out.append(f'model.{part}.{key} is read by no MMAction2 1.x recognizer: {moved}')
            elif key not in valid:
                near = difflib.get_close_matches(str(key), valid, n=1)
                hint = f'did you mean {near[0]!r}? ' if near else ''
                keys = ', '.join(valid) if valid else 'none'
                out.append(f'model.{part}.{key} is not a key {kind} reads ({hint}it reads: {keys})')
    return out


def testing_views_problems(cfg: Config, loaders: tuple[str, ...]) -> list[str]:
    """``model.test_cfg.max_testing_views``: an int > 0 (or None), with batch_size 1 in ``loaders``
    (MMAction2's Recognizer3D asserts it)."""
    views = ((cfg.get('model') or {}).get('test_cfg') or {}).get('max_testing_views')
    if views is None or views is False:
        return []
    if isinstance(views, bool) or not isinstance(views, int) or views <= 0:
        return [
            f'model.test_cfg.max_testing_views must be a positive int (or None: all views), got {views!r}'
        ]
    return [
        f'{name}.batch_size must be 1 with model.test_cfg.max_testing_views={views} (the views of one '
        f'video are split), got {loader.get("batch_size")}'
        for name in loaders
        if isinstance(loader := cfg.get(name), dict) and loader.get('batch_size', 1) != 1
    ]


def recognizer_problems(cfg: Config, loaders: tuple[str, ...]) -> list[str]:
    """The sizes a recognizer's TimeSformer (MMAction2's, or a subclass such as dna_mm's) shares
    with the rest of the config, where its layers would stop the first iteration: ``img_size`` a
    multiple of ``patch_size`` (MMAction2 asserts it); ``num_frames`` the ``clip_len`` of the
    pipelines of ``loaders`` and ``img_size`` the frames' size where a pipeline fixes it
    (:func:`_clip_shape`: its time and position embeddings have that many places); the head's
    ``in_channels`` the backbone's ``embed_dims``."""
    model = cfg.get('model')
    if not isinstance(model, dict) or not isinstance(model.get('cls_head'), dict):
        return []
    backbone, key = model.get('backbone'), 'model.backbone'
    if isinstance(backbone, dict) and type_name(backbone.get('type')) == 'with_attention':
        backbone, key = backbone.get('model'), f'{key}.model'
    if not isinstance(backbone, dict) or not _is_timesformer(cfg, backbone.get('type')):
        return []
    out = []
    img, patch = square_size(backbone.get('img_size')), square_size(backbone.get('patch_size'))
    if img and patch and img % patch:
        out.append(
            f'{key}.img_size ({img}) must be a multiple of {key}.patch_size ({patch}): the frames are '
            'cut into patch_size x patch_size patches'
        )
    width, channels = backbone.get('embed_dims'), model['cls_head'].get('in_channels')
    if is_size(width) and is_size(channels) and width != channels:
        out.append(
            f'model.cls_head.in_channels ({channels}) must be {key}.embed_dims ({width}): the head '
            "reads the backbone's features"
        )
    frames: dict[Any, list[str]] = {}
    sizes: dict[Any, list[str]] = {}
    for name in loaders:
        loader = cfg.get(name)
        dataset = loader.get('dataset') if isinstance(loader, dict) else None
        for at, pipeline in iter_pipelines(dataset, f'{name}.dataset'):
            clip, final = _clip_shape(pipeline)
            if clip is not None:
                frames.setdefault(clip[0], []).append(
                    f'{at}[{clip[1]}] ({type_name(pipeline[clip[1]].get("type"))})'
                )
            if final is not None:
                sizes.setdefault(final[0], []).append(
                    f'{at}[{final[1]}] ({type_name(pipeline[final[1]].get("type"))})'
                )
    num_frames = backbone.get('num_frames')
    wrong = [f'{n} in {", ".join(where)}' for n, where in frames.items() if n != num_frames]
    if is_size(num_frames) and wrong:
        out.append(
            f'{key}.num_frames ({num_frames}) must be the clip length the pipelines sample '
            f'(clip_len): {"; ".join(wrong)}'
        )
    wrong = [f'{w}x{h} from {", ".join(where)}' for (h, w), where in sizes.items() if (h, w) != (img, img)]
    if img and wrong:
        out.append(
            f'{key}.img_size ({img}) must be the size of the frames the pipelines give: {"; ".join(wrong)}'
        )
    return out


def _is_timesformer(cfg: Config, kind: Any) -> bool:
    """``kind`` (a backbone's ``type``) is MMAction2's ``TimeSformer`` or a subclass of it."""
    try:
        from mmaction.models.backbones import TimeSformer  # noqa: PLC0415
    except ImportError:
        return False
    cls = kind
    if isinstance(kind, str):
        registry = registry_of(cfg, 'MODELS')
        cls = registered_class(registry, kind)[1] if registry is not None else None
    return isinstance(cls, type) and issubclass(cls, TimeSformer)


def _clip_shape(pipeline: list) -> tuple[Optional[tuple[int, int]], Optional[tuple[tuple[int, int], int]]]:
    """``((frames, index), ((height, width), index))`` of the clips a pipeline gives, each with the
    step that fixes it, where it does not depend on the video (``None`` where it does, or where
    it cannot be told):

    * the frames: the ``clip_len`` of the last sampling step (``SampleFrames`` and the like);
    * the size: a last sizing step that is a ``Resize`` to a ``(w, h)`` with ``keep_ratio=False``
      or a crop of a fixed size (``CenterCrop``, ``ThreeCrop``, ``TenCrop``, ``RandomCrop``,
      MMPretrain's ``RandomResizedCrop`` ``scale``), with no other step after it whose name says
      that it resizes, crops, pads or rescales.

    Neither is read past a step that runs another library's ops (an ``op`` or ``transforms``
    key: MMAction2's ``PytorchVideoWrapper`` / ``TorchVisionWrapper``, ``ImgAug``, mmcv's
    ``RandomApply``), which may change both."""
    clip, final = None, None
    for i, step in enumerate(pipeline):
        if not isinstance(step, dict) or 'op' in step or 'transforms' in step:
            clip, final = None, None
            continue
        kind = type_name(step.get('type')) or ''
        if is_size(step.get('clip_len')):
            clip = step['clip_len'], i
        size = fixed_size(kind, step)
        if size is not None:
            final = size, i
        elif re.search('Resize|Crop|Scale|Pad|Rotate|Affine', kind):
            final = None
    return clip, final
