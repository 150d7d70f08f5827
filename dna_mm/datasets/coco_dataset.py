"""MMDetection's ``CocoDataset`` that names what is wrong with its data in one line.

* Loading an annotation file runs :func:`~dna_mm.datasets.coco_report.check_coco` on it first:
  a problem MMDetection cannot load past (a bare ``KeyError: 'bbox'``, ``'categories'``,
  ``'file_name'`` deep in its loading; with a pipeline that loads masks, ``KeyError: 'mask'``
  mid-run for an empty segmentation) or would pass over silently (an annotation whose
  ``category_id`` is not among the file's categories, dropped from training and from the metric)
  is a :class:`~dna_mm.errors.DataError` naming the file and the entries.
* The dataset's classes (``metainfo=dict(classes=...)``, else MMDetection's default, COCO's 80)
  against the file's categories: MMDetection labels the categories that the classes name, in the
  order of the file's ``categories`` list, and names label ``i`` ``classes[i]``; a class the file
  does not have (left out without a word: COCO's metric then fails at the first validation), or
  classes in another order (the names in the checkpoint and the predictions swapped silently), is
  a ``DataError`` naming the file, the classes and the categories, and saying what to write.
* Images missing on disk (a wrong ``data_prefix``: in training, 1,000 warnings and then
  MMDetection's ``Cannot find valid image``; in validation, a stop at the first one, maybe hours
  in) are a ``DataError`` naming the file, the count, the first few and where they were looked for,
  when the pipeline reads local files (``check_files=False`` skips this look).
* A box of zero width or height is a warning at build: training drops it, COCO's evaluation counts
  it (an object no prediction can find: a lower AP).
* An image that cannot be read (truncated, not an image, gone) is, in training, named in a
  warning, counted (:class:`~.skipped_samples.SkippedSamplesHook` logs the total over the workers
  and ranks) and replaced by another sample, as MMDetection replaces an image whose boxes were all
  filtered out; in a test or a validation, where replacing it would change the metric, a
  ``DataError`` naming it, in place of MMCV's ``AssertionError: failed to load image``.

Registered in MMDetection's registry as ``CheckedCocoDataset`` (dna_mm's COCO configs name it:
``configs/_base_/datasets/coco_instance_224.py``; a config of one's own gets it with
``dataset_type = 'CheckedCocoDataset'``); the same class as MMDetection's otherwise. Only a local
annotation file is checked (a file on another backend loads as before).
"""

from __future__ import annotations

import os.path as osp
import re
from typing import Any, Optional, Sequence

import cv2
from mmengine.logging import print_log

from ..errors import DataError
from .coco_report import CocoReport, check_coco, examples
from .skipped_samples import SharedCounter

try:
    from mmdet.datasets import CocoDataset
    from mmdet.registry import DATASETS
except ImportError:  # MMAction2 only: no detection dataset
    CocoDataset = DATASETS = None

#: examples a build-time error or warning shows
SHOW = 3
#: ``s3://``, ``http://``: a path another backend reads (mmengine picks its backend by the prefix)
_URI = re.compile(r'^[A-Za-z][A-Za-z0-9+.\-]*://')


def _unreadable(path: Any) -> bool:
    return isinstance(path, str) and (not osp.isfile(path) or cv2.imread(path, cv2.IMREAD_UNCHANGED) is None)


def _names(names: Sequence[str], limit: int = 10) -> str:
    """``('a', 'b', ...)`` of the first ``limit`` and how many in all."""
    shown = ', '.join(repr(n) for n in names[:limit])
    return f'({shown}, ... {len(names)} in all)' if len(names) > limit else f'({shown})'


def classes_mismatch(ann_file: str, classes: Sequence[str], categories: dict[Any, str]) -> Optional[str]:
    """Why the dataset's ``classes`` would label ``ann_file``'s ``categories`` (``id: name``, in the
    file's order) otherwise than they say, or ``None`` where they agree. MMDetection's rule
    (``CocoDataset.load_data_list``, pycocotools' ``getCatIds``): the categories whose name is
    among ``classes``, in the file's order, are labels 0, 1, ...; label ``i`` is named
    ``classes[i]`` (in the checkpoint's meta, the predictions, ``CocoMetric``)."""
    classes = tuple(classes)
    labelled = [(cid, name) for cid, name in categories.items() if name in classes]
    if [name for _, name in labelled] == list(classes):
        return None
    default = CocoDataset is not None and classes == tuple(CocoDataset.METAINFO['classes'])
    if default:  # no metainfo classes given (or COCO's given for a file of other categories)
        subject = (
            f"the dataset's classes, MMDetection's default where metainfo names none, COCO's {len(classes)} "
            f'{_names(classes, 3)},'
        )
    else:
        subject = f'metainfo classes {_names(classes)}'
    reasons = []
    wrong = next((i for i, (_, name) in enumerate(labelled) if classes[i : i + 1] != (name,)), None)
    if wrong is not None:  # a label named otherwise than its category
        cid, name = labelled[wrong]
        named = f'{classes[wrong]!r}' if wrong < len(classes) else 'by no class'
        reasons.append(
            f'MMDetection would train category {name!r} (id {cid}) as label {wrong}, which the classes '
            f'(and so the checkpoint and the predictions) name {named}'
        )
    missing = [c for c in classes if c not in categories.values()]
    if missing and not (default and reasons):  # COCO's 80 on another file: the wrong label says it
        absent = (
            'none of them is among its categories'
            if len(missing) == len(classes)
            else f'{_names(missing, 5)} {"is" if len(missing) == 1 else "are"} not among them'
        )
        reasons.insert(
            0,
            f"{absent}: MMDetection leaves such a class out without a word, and COCO's metric fails at "
            'the first validation',
        )
    keep = not missing and not default and len(labelled) == len(classes)  # the classes, reordered
    fix = tuple(name for _, name in labelled) if keep else tuple(categories.values())
    cats = ', '.join(f'{name!r}: {cid}' for cid, name in categories.items())
    return (
        f'{ann_file}: {subject} do not match its categories {{{cats}}} (name: id): {"; ".join(reasons)}; '
        "MMDetection numbers the classes in the order of the file's categories: write "
        f'metainfo=dict(classes={fix!r}) (or a subset of them, in that order)'
    )


if CocoDataset is not None:

    @DATASETS.register_module()
    class CheckedCocoDataset(CocoDataset):
        """``CocoDataset`` whose malformed annotation file, classes other than its categories, or
        images missing on disk are one :class:`~dna_mm.errors.DataError` naming it, whose empty
        boxes are a warning, whose unreadable training image is skipped and counted, and whose
        unreadable test image is a ``DataError`` naming it (module docstring). Same arguments, and
        ``check_files``: look for the listed images on disk at build (when the pipeline reads
        local files), as dna_mm's video datasets do."""

        def __init__(self, *args, check_files: bool = True, **kwargs) -> None:
            self.skipped = SharedCounter('image')
            self.check_files = check_files
            self._checked = False  # whether load_data_list checked a local annotation file
            super().__init__(*args, **kwargs)

        def _transform(self, attr: str) -> Any:
            """The pipeline's first transform that has ``attr`` (``with_mask``: LoadAnnotations;
            ``imdecode_backend``: LoadImageFromFile and its kin), or ``None``."""
            transforms = getattr(self.pipeline, 'transforms', [])
            return next((t for t in transforms if hasattr(t, attr)), None)

        def load_data_list(self) -> list[dict]:
            self._checked = isinstance(self.ann_file, str) and osp.isfile(self.ann_file)
            if self._checked:
                report = check_coco(self.ann_file)
                masks = self._transform('with_mask')
                with_mask = bool(masks is not None and masks.with_mask)
                report.raise_if_unloadable(SHOW, with_mask, getattr(masks, 'poly2mask', True))
                why = classes_mismatch(self.ann_file, self.metainfo['classes'], report.categories)
                if why:
                    raise DataError(why)
                self._warn_empty_boxes(report)
            return super().load_data_list()

        def _warn_empty_boxes(self, report: CocoReport) -> None:
            where = report.problems.get('empty bbox (w or h <= 0)')
            if where:
                print_log(
                    f'{self.ann_file}: {len(where)} annotation(s) with an empty bbox (w or h <= 0): '
                    f"{examples(where, SHOW, ', ')}; training drops them, COCO's evaluation of this file "
                    'counts them (objects no prediction can find: a lower AP); give each a real box, or '
                    'remove it',
                    logger='current',
                    level=30,
                )

        def filter_data(self) -> list[dict]:
            """MMDetection's, then a look for the images it kept on disk (one it filtered out is
            never read: missing, it stops nothing); about 2.5 us an image, 25 ms for 10,000 whose
            folder is in the page cache, 130 ms when it is not (ext4)."""
            data_list = super().filter_data()
            if self.check_files and self._checked and self._reads_local_images():
                self._check_images(data_list)
            return data_list

        def _reads_local_images(self) -> bool:
            """Whether the pipeline reads the images from local files: it has an image loader
            whose backend is the local one (by name, or, with none named, by the path: no
            ``s3://``-like prefix). A loader of another backend, or no loader, is not checked."""
            loader = self._transform('imdecode_backend')
            if loader is None:
                return False
            args = getattr(loader, 'file_client_args', None) or getattr(loader, 'backend_args', None) or {}
            backend = args.get('backend')
            if backend is not None:
                return backend in ('local', 'disk')
            return not _URI.match(str(self.data_prefix.get('img', '')))

        def _check_images(self, data_list: list[dict]) -> None:
            missing = [d for d in data_list if not osp.isfile(d['img_path'])]
            if not missing:
                return
            folder = self.data_prefix.get('img', '')
            if len(missing) < len(data_list):  # a few gone: the folder is right
                hint = 'restore them, or remove them from the file'
            else:
                gone = 'that folder does not exist' if not osp.isdir(folder or '.') else 'none is there'
                hint = f'{gone}: is data_prefix=dict(img=...) right?'
            shown = [f'{d["img_path"]} (image id {d["img_id"]})' for d in missing]
            raise DataError(
                f'{self.ann_file}: {len(missing)} of {len(data_list)} listed images are not on disk: '
                f'{examples(shown, SHOW, ", ")}; they are looked for in {folder!r} (data_root '
                f'{self.data_root!r} joined with data_prefix img); {hint}'
            )

        def prepare_data(self, idx: int) -> Any:
            try:
                return super().prepare_data(idx)
            except Exception as err:
                path = self.get_data_info(idx).get('img_path')
                if not _unreadable(path):
                    raise  # not the image's fault: as it is
                if not self.test_mode:
                    total = self.skipped.add()
                    print_log(
                        f'skipped unreadable image {path} ({type(err).__name__}: {err}); {total} skipped '
                        'so far in this process and its workers; using another sample',
                        logger='current',
                        level=30,
                    )
                    return None  # BaseDataset.__getitem__ draws another index
                raise DataError(
                    f'cannot read image {path} (listed in {self.ann_file}): {type(err).__name__}: {err}; '
                    'fix or remove it (python tools/data/coco/check_annotations.py --check-sizes finds '
                    'every unreadable image)'
                ) from err
