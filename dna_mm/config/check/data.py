"""The dataloaders, their datasets and pipelines, checked before anything is built
(:func:`dna_mm.config.check.check_config`):

* batch sizes (ints > 0) and ``num_workers`` (>= 0) of every dataloader, and its keys: those
  mmengine's ``build_dataloader`` reads and torch's ``DataLoader`` takes (a typo such as
  ``batchsize`` would stop the run with a ``TypeError`` after the model was built), the closest
  valid name suggested;
* each dataset's keys and its sampler's (``sampler``, ``batch_sampler``): the arguments of their
  classes, the closest valid name suggested, and those a dataset needs and is not given (a misspelt
  ``ann_file`` that a ``**kwargs`` took), through dataset wrappers; in a child config, a key with
  no close name is perhaps the base's (mmengine merges a base's dict into the child's), and the
  message says how to replace it whole;
* a dataset's ``filter_cfg`` against the keys its ``filter_data`` reads (MMDetection's, with
  ``.get``: a typo keeps what it would drop);
* each dataset's ``data_prefix`` a dict of folders (a string: an ``AttributeError`` as the
  dataset is built) and ``backend_args.backend`` one of mmengine's file backends (a typo: a
  ``KeyError`` there), through dataset wrappers;
* clip and crop sizes in every pipeline: ``SampleFrames`` ``clip_len`` / ``frame_interval`` /
  ``num_clips``, ``crop_size`` / ``size`` of the crops (ints > 0), ``Resize.scale`` (> 0, or -1
  for "keep the aspect ratio");
* a crop of a fixed size larger than the frames the steps before it give, where they fix them
  (a ``Resize`` to ``(w, h)`` or to a short side, an earlier crop): MMAction2's crops would cut
  with a negative offset, assert, or stack ragged arrays, and every video would be "unreadable";
* mmengine's dataset wrappers, in every loader: a ``RepeatDataset``'s ``times`` an int > 0 (0: a
  ``ZeroDivisionError`` in the sampler), a ``ClassBalancedDataset``'s ``oversample_thr`` > 0 (a
  negative one: a ``math domain error`` as the dataset is built; 0 repeats nothing);
* the keys of MMAction2's ``SampleFrames`` and its subclasses (``DenseSampleFrames``,
  ``SampleFramesBySeconds``): it takes ``**kwargs`` and drops them, so a typo (``clip_lenn``)
  would sample with the default; the closest valid name is suggested;
* the keys of every other pipeline step: the arguments of its class (registered in the config's
  scope's ``TRANSFORMS``: MMAction2's, MMDetection's, MMPretrain's), which the dataset builds it
  with (a typo such as ``keep_ratoi`` would be a ``TypeError`` naming no key once the model is
  built), and MMAction2's video readers' file client's (``io_backen``: every video unreadable); a
  step that takes any keyword is its own affair.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Iterator, Optional

from mmengine.config import Config

from ..build import type_name
from .values import (
    argument_problems,
    class_arguments,
    has_base,
    is_size,
    not_positive,
    registered_class,
    registry_of,
    type_class,
    unknown_keys,
)

LOADERS = {'train': ('train_dataloader', 'val_dataloader', 'test_dataloader'), 'test': ('test_dataloader',)}
# transform type -> its size arguments that must be > 0
CROP_KEYS = {
    'SampleFrames': ('clip_len', 'frame_interval', 'num_clips'),
    'UniformSample': ('clip_len', 'num_clips'),
    'RandomCrop': ('size',),
    'CenterCrop': ('crop_size',),
    'ThreeCrop': ('crop_size',),
    'TenCrop': ('crop_size',),
    'MultiScaleCrop': ('input_size',),
}


def _loader_keys() -> list[str]:
    """The keys of a dataloader config: what mmengine's ``build_dataloader`` reads (0.10.7) and
    the keyword arguments of torch's ``DataLoader`` it passes the rest to."""
    import inspect

    from torch.utils.data import DataLoader

    torch_args = [p for p in inspect.signature(DataLoader.__init__).parameters if p != 'self']
    return list(dict.fromkeys([*torch_args, 'num_batch_per_epoch', 'disable_subprocess_warning']))


def loader_problems(cfg: Config, name: str) -> list[str]:
    """The dataloader ``name`` of ``cfg``: its keys and sizes, its datasets' storage and wrappers,
    and each pipeline step's sizes and arguments (module docstring)."""
    loader = cfg.get(name)
    if not isinstance(loader, dict):
        return []
    transforms = registry_of(cfg, 'TRANSFORMS')
    out = unknown_keys(loader, _loader_keys(), name, "a key of a dataloader (mmengine's, torch's DataLoader)")
    out += not_positive(loader.get('batch_size'), f'{name}.batch_size', integer=True)
    workers = loader.get('num_workers')
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        out.append(f'{name}.num_workers must be an int >= 0, got {workers!r}')
    elif isinstance(workers, int) and workers < 0:
        out.append(f'{name}.num_workers must be >= 0, got {workers}')
    elif workers == 0 and loader.get('persistent_workers'):  # torch's DataLoader: a ValueError traceback
        out.append(
            f'{name}.persistent_workers=True needs {name}.num_workers > 0, got 0 (set '
            f'{name}.persistent_workers=False to load in the main process)'
        )
    datasets, base = registry_of(cfg, 'DATASETS'), has_base(cfg)
    for at, dataset in iter_datasets(loader.get('dataset'), f'{name}.dataset'):
        out += argument_problems(datasets, dataset, at, base=base) + _filter_problems(datasets, dataset, at)
    for part in ('sampler', 'batch_sampler'):  # mmengine's build_dataloader gives these two
        given = ('dataset', 'seed') if part == 'sampler' else ('sampler', 'batch_size')
        sampler = loader.get(part)
        out += argument_problems(registry_of(cfg, 'DATA_SAMPLERS'), sampler, f'{name}.{part}', given, base)
    out += _storage_problems(loader.get('dataset'), f'{name}.dataset', datasets)
    out += _dataset_wrapper_problems(loader.get('dataset'), f'{name}.dataset')
    for at, pipeline in iter_pipelines(loader.get('dataset'), f'{name}.dataset'):
        out += _crop_problems(pipeline, at)
    for key, transform in iter_transforms(loader.get('dataset'), f'{name}.dataset'):
        kind = type_name(transform.get('type'))
        sizes = [(arg, (), True) for arg in CROP_KEYS.get(kind, ())]  # counts and pixels: ints
        if kind in ('Resize', 'RandomResize'):
            sizes.append(('scale', (-1,), False))  # -1: keep the aspect ratio; a float: a factor
        for arg, allow, integer in sizes:
            values = transform.get(arg)
            for v in values if isinstance(values, (list, tuple)) else [values]:
                out += not_positive(v, f'{key}.{arg} ({kind})', allow, integer)
        valid = sampler_arguments(transform.get('type'))
        what = f'an argument of {kind} (which ignores the others)'
        if valid is None:
            valid, what = _transform_arguments(transforms, transform), f'an argument of {kind}'
        if valid is not None:
            # _scope_: the registry's; _delete_: list_delete_problems names it
            given = {k: v for k, v in transform.items() if k != 'type' and not str(k).startswith('_')}
            out += unknown_keys(given, valid, key, what)
    return out


def _transform_arguments(registry: Any, transform: dict) -> Optional[list[str]]:
    """The arguments of the transform ``transform`` names (registered in ``registry``, the config's
    scope's ``TRANSFORMS``), which the dataset builds it with (a misspelt one: a ``TypeError`` once
    the model is built, naming no key), and for MMAction2's readers those of the file client they
    pass the others to (:func:`_file_client_arguments`); ``None`` for one that takes any keyword,
    or is unknown."""
    cls = type_class(registry, transform.get('type'))
    if cls is None:
        return None
    valid = class_arguments(cls)
    return valid if valid is not None else _file_client_arguments(cls, transform)


def _file_client_arguments(cls: type, transform: dict) -> Optional[list[str]]:
    """MMAction2's video and frame readers (``DecordInit``, ``PyAVInit``, ``RawFrameDecode``, ...:
    ``mmaction.datasets.transforms.loading``, 1.2.0) keep the keys they do not name for mmengine's
    ``FileClient`` of their ``io_backend``: a typo (``io_backen``) would fail on every video, each
    "unreadable". Their arguments, the client's ``prefix`` and its backend's; ``None`` for another
    class, or a backend registered elsewhere."""
    import inspect  # noqa: PLC0415

    from mmengine.fileio import FileClient  # noqa: PLC0415

    from ...utils.build_errors import accepted_arguments  # noqa: PLC0415

    readers = [k for k in cls.__mro__ if k.__module__ == 'mmaction.datasets.transforms.loading']
    names = accepted_arguments(cls)
    if not readers or 'io_backend' not in names:
        return None
    default = inspect.signature(cls).parameters.get('io_backend')
    backend = transform.get('io_backend', getattr(default, 'default', None))
    client = FileClient._backends.get(backend) if isinstance(backend, str) else None
    return None if client is None else [*names, 'prefix', *accepted_arguments(client)]


#: the class whose ``filter_data`` reads a dataset's ``filter_cfg`` -> the keys it reads
#: (MMDetection 3.3.0's ``filter_data`` and ``XMLDataset._get_bbox_min_size``; mmengine's reads none,
#: which MMDetection's own ODVG and CrowdHuman configs give a ``filter_cfg`` anyway: left alone)
FILTER_KEYS: dict[str, tuple[str, ...]] = {
    'mmdet.datasets.coco.CocoDataset': ('filter_empty_gt', 'min_size'),
    'mmdet.datasets.coco_panoptic.CocoPanopticDataset': ('filter_empty_gt', 'min_size'),
    'mmdet.datasets.cityscapes.CityscapesDataset': ('filter_empty_gt', 'min_size'),
    'mmdet.datasets.base_video_dataset.BaseVideoDataset': ('filter_empty_gt', 'min_size'),
    'mmdet.datasets.xml_style.XMLDataset': ('filter_empty_gt', 'min_size', 'bbox_min_size'),
}


def _filter_problems(registry: Any, dataset: dict, key: str) -> list[str]:
    """A dataset's ``filter_cfg`` against the keys its ``filter_data`` reads
    (:data:`FILTER_KEYS`, found up its classes past dna_mm's, which call it; a class of another
    package's own is left alone): MMDetection reads them with ``.get``, so a typo
    (``filter_empty``) keeps the images it would drop, without a word."""
    filters = dataset.get('filter_cfg')
    cls = type_class(registry, dataset.get('type')) if isinstance(filters, dict) and filters else None
    reader = next((k for k in cls.__mro__ if 'filter_data' in vars(k)), None) if cls else None
    while reader is not None and reader.__module__.startswith('dna_mm.'):
        reader = next((k for k in reader.__mro__[1:] if 'filter_data' in vars(k)), None)
    name = f'{reader.__module__}.{reader.__qualname__}' if reader is not None else ''
    if name not in FILTER_KEYS:
        return []
    return unknown_keys(
        filters, list(FILTER_KEYS[name]), f'{key}.filter_cfg', f'a key {cls.__name__} filters by'
    )


def _crop_problems(pipeline: list, at: str) -> list[str]:
    """A crop of a fixed size (``CenterCrop``, ``ThreeCrop``, ``TenCrop``, ``RandomCrop``) larger
    than the frames the steps before it give, where they fix them: a ``Resize`` to ``(w, h)``
    with ``keep_ratio=False``, one to a short side (``scale=(-1, s)``), or an earlier crop.
    MMAction2's crops would cut smaller frames (a negative offset), assert, or stack ragged
    arrays: every video "unreadable", or the model's convolution failing on the clip."""
    out: list[str] = []
    frames: Optional[tuple[int, int]] = None  # (height, width), or (short side, short side)
    short, made = False, ''
    for i, step in enumerate(pipeline):
        if not isinstance(step, dict) or 'op' in step or 'transforms' in step:
            frames = None
            continue
        kind = type_name(step.get('type')) or ''
        scale = step.get('scale')
        crop = kind in ('CenterCrop', 'ThreeCrop', 'TenCrop', 'RandomCrop')
        size = fixed_size(kind, step)
        if crop and size is not None and frames is not None:
            large = min(size) > frames[0] if short else size[0] > frames[0] or size[1] > frames[1]
            if large:
                given = f'frames of short side {frames[0]}' if short else f'{frames[1]}x{frames[0]} frames'
                out.append(
                    f'{at}[{i}] ({kind}) crops {size[1]}x{size[0]} out of {given} ({made} makes them): '
                    'the crop must fit in the frames'
                )
        if size is not None:
            frames, short, made = size, False, f'{at}[{i}] ({kind})'
        elif kind == 'Resize' and isinstance(scale, (list, tuple)) and len(scale) == 2 and -1 in scale:
            side = max(scale)
            frames, short = ((side, side), True) if is_size(side) else (None, False)
            made = f'{at}[{i}] ({kind})'
        elif re.search('Resize|Crop|Scale|Pad|Rotate|Affine', kind):
            frames = None
    return out


def sampler_arguments(kind: Any) -> Any:
    """The arguments of MMAction2's ``SampleFrames`` or a subclass ``kind`` names (a step's
    ``type``: its registered name, dotted path or class; its ``__init__`` and those it passes
    ``**kwargs`` on to, up to ``SampleFrames``, which drops the rest:
    :func:`~dna_mm.utils.build_errors.accepted_arguments`); ``None`` for any other transform (its
    unknown keys are its own affair)."""
    from ...utils.build_errors import accepted_arguments  # noqa: PLC0415

    try:
        from mmaction.datasets.transforms import SampleFrames
        from mmaction.registry import TRANSFORMS
    except ImportError:
        return None
    cls = registered_class(TRANSFORMS, kind)[1] if isinstance(kind, str) else kind
    if not (isinstance(cls, type) and issubclass(cls, SampleFrames)):
        return None
    return accepted_arguments(cls)


def iter_transforms(dataset: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, transform dict)`` of a dataset's pipeline, through dataset wrappers."""
    for at, pipeline in iter_pipelines(dataset, key):
        for i, transform in enumerate(pipeline):
            if isinstance(transform, dict):
                yield f'{at}[{i}]', transform


def iter_datasets(dataset: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, dataset config)`` of a dataset and of those it wraps."""
    if not isinstance(dataset, dict):
        return
    yield key, dataset
    if isinstance(dataset.get('dataset'), dict):
        yield from iter_datasets(dataset['dataset'], f'{key}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from iter_datasets(inner, f'{key}.datasets[{i}]')


def iter_pipelines(dataset: Any, key: str) -> Iterator[tuple[str, list]]:
    """``(config key, pipeline)`` of a dataset and of those it wraps."""
    for at, inner in iter_datasets(dataset, key):
        if isinstance(inner.get('pipeline'), (list, tuple)):
            yield f'{at}.pipeline', list(inner['pipeline'])


def _storage_problems(dataset: Any, key: str, registry: Any) -> list[str]:
    """Where a dataset (and each it wraps) reads its files from: ``data_prefix`` a dict of folders
    by kind (mmengine's ``BaseDataset`` joins each to ``data_root``: a string is an
    ``AttributeError`` traceback as the dataset is built; MMPretrain's, whose default is a string,
    take one as their image folder), ``backend_args.backend`` one of mmengine's file backends (a
    typo, ``'lcoal'``, is a ``KeyError`` there)."""
    from mmengine.fileio.backends import backends

    out = []
    for at, inner in iter_datasets(dataset, key):
        prefix = inner.get('data_prefix')
        cls = type_class(registry, inner.get('type')) if isinstance(prefix, str) else None
        text = isinstance(prefix, str) and (cls is None or _text_prefix(cls))  # None: its build will say
        if prefix is not None and not isinstance(prefix, dict) and not text:
            out.append(
                f"{at}.data_prefix must be a dict of folders by kind (e.g. dict(img='train2017/'), "
                f"dict(video='videos/')), got {prefix!r}"
            )
        backend = (inner.get('backend_args') or {}).get('backend')
        if isinstance(inner.get('backend_args'), dict) and backend is not None and backend not in backends:
            near = difflib.get_close_matches(str(backend), list(backends), n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(
                f"{at}.backend_args.backend is not one of mmengine's file backends, got {backend!r} "
                f'({hint}valid: {", ".join(backends)})'
            )
    return out


def _text_prefix(cls: Optional[type]) -> bool:
    """Whether the dataset class ``cls`` takes a string ``data_prefix``: where the first
    ``__init__`` up its classes that names it gives no dict default or type (MMPretrain's
    ``BaseDataset`` a string default, its ``RefCOCO`` neither: each makes ``dict(img_path=...)`` of
    it), not where it reaches mmengine's ``BaseDataset`` as it is (MMDetection's, MMAction2's)."""
    import inspect  # noqa: PLC0415

    for owner in (k.__dict__['__init__'] for k in (cls.__mro__ if cls else ()) if '__init__' in k.__dict__):
        try:
            found = inspect.signature(owner).parameters.get('data_prefix')
        except (TypeError, ValueError):
            return False
        if found is not None:
            typed = str(found.annotation)
            return not isinstance(found.default, dict) and ('dict' not in typed or 'str' in typed)
    return False


#: mmengine's dataset wrappers -> their required argument that must be > 0, and whether it is a count
DATASET_WRAPPER_KEYS = {'RepeatDataset': ('times', True), 'ClassBalancedDataset': ('oversample_thr', False)}


def _dataset_wrapper_problems(dataset: Any, key: str) -> list[str]:
    """mmengine's dataset wrappers under ``dataset`` (:data:`DATASET_WRAPPER_KEYS`): a
    ``RepeatDataset``'s ``times`` an int > 0 (0 is an empty dataset, whose sampler stops on a
    ``ZeroDivisionError``, 1.5 a ``TypeError``), a ``ClassBalancedDataset``'s ``oversample_thr`` >
    0 (its repeat factors are ``sqrt(oversample_thr / class frequency)``: a negative one is a
    ``math domain error`` as the dataset is built, 0 repeats nothing); a missing one is
    named with the other arguments (:func:`~.values.argument_problems`)."""
    out = []
    for at, inner in iter_datasets(dataset, key):
        kind = type_name(inner.get('type'))
        if kind not in DATASET_WRAPPER_KEYS:
            continue
        arg, count = DATASET_WRAPPER_KEYS[kind]
        out += not_positive(inner.get(arg), f'{at}.{arg} ({kind})', integer=count)
    return out


def fixed_size(kind: str, step: dict) -> Optional[tuple[int, int]]:
    """``(height, width)`` of the frames after the step ``kind``, where the step fixes it."""
    if kind == 'Resize' and step.get('keep_ratio') is False:
        scale = step.get('scale')
        if isinstance(scale, (list, tuple)) and len(scale) == 2 and all(is_size(s) for s in scale):
            return scale[1], scale[0]  # MMAction2's (w, h)
        return None
    arg = {'CenterCrop': 'crop_size', 'ThreeCrop': 'crop_size', 'TenCrop': 'crop_size', 'RandomCrop': 'size'}
    arg['RandomResizedCrop'] = 'scale'  # MMPretrain's (MMAction2's has none: its output varies)
    size = step.get(arg.get(kind, ''))
    if (
        kind != 'RandomCrop'
        and isinstance(size, (list, tuple))
        and len(size) == 2
        and all(map(is_size, size))
    ):
        return size[1], size[0]
    return (size, size) if is_size(size) else None
