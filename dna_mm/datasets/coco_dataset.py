"""MMDetection's ``CocoDataset`` that names what is wrong with its data in one line.

* Loading an annotation file runs :func:`~dna_mm.datasets.coco_report.check_coco` on it first:
  a problem MMDetection cannot load past (a bare ``KeyError: 'bbox'``, ``'categories'``,
  ``'file_name'`` deep in its loading) or would pass over silently (an annotation whose
  ``category_id`` is not among the file's categories, dropped from training and from the metric)
  is a :class:`~dna_mm.errors.DataError` naming the file and the entries.
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
from typing import Any

import cv2
from mmengine.logging import print_log

from ..errors import DataError
from .coco_report import check_coco
from .skipped_samples import SharedCounter

try:
    from mmdet.datasets import CocoDataset
    from mmdet.registry import DATASETS
except ImportError:  # MMAction2 only: no detection dataset
    CocoDataset = DATASETS = None


def _unreadable(path: Any) -> bool:
    return isinstance(path, str) and (not osp.isfile(path) or cv2.imread(path, cv2.IMREAD_UNCHANGED) is None)


if CocoDataset is not None:

    @DATASETS.register_module()
    class CheckedCocoDataset(CocoDataset):
        """``CocoDataset`` whose malformed annotation file is one :class:`~dna_mm.errors.DataError`
        naming it, whose unreadable training image is skipped and counted, and whose unreadable
        test image is a ``DataError`` naming it (module docstring). Same arguments."""

        def __init__(self, *args, **kwargs) -> None:
            self.skipped = SharedCounter('image')
            super().__init__(*args, **kwargs)

        def load_data_list(self) -> list[dict]:
            if isinstance(self.ann_file, str) and osp.isfile(self.ann_file):
                check_coco(self.ann_file).raise_if_unloadable()
            return super().load_data_list()

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
