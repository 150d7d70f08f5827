"""``RobustVideoDataset``: MMAction2's ``VideoDataset`` that checks its list at build time and
survives undecodable videos during training.

At build time (``load_data_list``), with a clear error that names the annotation file:

* a malformed line (``path label`` expected) → ``ValueError`` with its line number;
* a label outside ``[0, num_classes)`` → ``ValueError`` with the line and the label;
* files missing on disk → ``FileNotFoundError`` listing the first few paths and the total.

During training, a video that fails to load or decode is logged with its path (and the running
count of skipped videos) and replaced by another sample; mmengine's ``max_refetch`` bounds the
retries. In test mode a broken video is an error naming the file: silently replacing test
samples would change the metric.
"""
from __future__ import annotations

import os.path as osp
from typing import Optional

from mmaction.datasets import VideoDataset
from mmaction.registry import DATASETS
from mmengine.fileio import list_from_file
from mmengine.logging import print_log

SHOW_MISSING = 5


@DATASETS.register_module()
class RobustVideoDataset(VideoDataset):
    """``VideoDataset`` with build-time checks and corrupt-video tolerance.

    Args:
        num_classes: Number of classes; labels must lie in ``[0, num_classes)``.
        check_files: Verify at build time that every listed video exists.
        max_refetch: Replacement attempts for one sample before giving up (training).
        **kwargs: ``VideoDataset`` arguments (``ann_file``, ``pipeline``, ``data_prefix``, ...).
    """

    def __init__(self, *args, num_classes: Optional[int] = None, check_files: bool = True,
                 max_refetch: int = 10, **kwargs) -> None:
        if num_classes is not None and num_classes <= 0:
            raise ValueError(f'num_classes must be positive, got {num_classes}')
        self.check_files = check_files
        self.num_skipped = 0
        super().__init__(*args, num_classes=num_classes, max_refetch=max_refetch, **kwargs)

    def load_data_list(self) -> list[dict]:
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'annotation file {self.ann_file} does not exist')
        data_list = []
        for lineno, line in enumerate(list_from_file(self.ann_file), start=1):
            fields = line.strip().split(self.delimiter)
            if not line.strip():
                continue
            if self.multi_class:
                data_list.append(dict(filename=fields[0], label=[self._label(f, lineno) for f in fields[1:]]))
                continue
            if len(fields) not in (1, 2):
                raise ValueError(f'{self.ann_file}:{lineno}: expected "path label", got {line.strip()!r}')
            label = self._label(fields[1], lineno) if len(fields) == 2 else -1
            data_list.append(dict(filename=fields[0], label=label))
        prefix = self.data_prefix.get('video')
        for info in data_list:
            if prefix is not None:
                info['filename'] = osp.join(prefix, info['filename'])
        if self.check_files:
            missing = [d['filename'] for d in data_list if not osp.isfile(d['filename'])]
            if missing:
                shown = '\n  '.join(missing[:SHOW_MISSING])
                raise FileNotFoundError(
                    f'{self.ann_file}: {len(missing)} of {len(data_list)} listed videos are missing '
                    f'on disk, e.g.\n  {shown}' + ('\n  ...' if len(missing) > SHOW_MISSING else ''))
        return data_list

    def _label(self, text: str, lineno: int) -> int:
        try:
            label = int(text)
        except ValueError:
            raise ValueError(f'{self.ann_file}:{lineno}: label {text!r} is not an integer') from None
        if label < 0 or (self.num_classes is not None and label >= self.num_classes):
            bound = f'[0, {self.num_classes})' if self.num_classes is not None else '>= 0'
            raise ValueError(f'{self.ann_file}:{lineno}: label {label} outside {bound} '
                             f'(num_classes={self.num_classes})')
        return label

    def prepare_data(self, idx: int) -> Optional[dict]:
        try:
            return super().prepare_data(idx)
        except Exception as err:  # undecodable / truncated / unreadable video
            path = self.get_data_info(idx).get('filename')
            if self.test_mode:
                raise RuntimeError(f'cannot load test video {path}: {err}') from err
            self.num_skipped += 1
            print_log(f'skipped unreadable video {path} ({type(err).__name__}: {err}); '
                      f'{self.num_skipped} skipped so far in this worker; using another sample',
                      logger='current', level=30)
            return None  # BaseDataset.__getitem__ draws another index (max_refetch times)
