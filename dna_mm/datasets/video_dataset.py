"""``RobustVideoDataset``: MMAction2's ``VideoDataset`` that checks its list at build time and
survives undecodable training videos; :class:`~.skipped_samples.SkippedSamplesHook` reports how
many it skipped."""

from __future__ import annotations

import os.path as osp
from typing import Any, Optional

from mmaction.datasets import VideoDataset
from mmaction.registry import DATASETS
from mmengine.logging import print_log

from ..errors import ConfigError, DataError
from .skipped_samples import SharedCounter

SHOW_MISSING = 5


@DATASETS.register_module()
class RobustVideoDataset(VideoDataset):
    """``VideoDataset`` with build-time checks and corrupt-video tolerance.

    At build time, an error naming the list: a line that is not UTF-8 (``file:line`` and the
    byte), a line other than ``path label`` (a path may hold blanks: the label is the last
    field), a line without a label (unless ``labels_optional``: an OOD list), a label outside
    ``[0, num_classes)``, videos missing on disk (the first few with their line numbers, and the
    total).

    In training, a video that fails to load is logged with the reason, counted
    (:class:`~.skipped_samples.SkippedSamplesHook` reports the count) and replaced by another sample; when
    ``max_refetch + 1`` samples in a row fail, the error lists each of them and why (mmengine's
    names no file). In test mode a broken video is an error naming it (replacing test samples
    would change the metric), or, with ``report_unreadable = True`` (set by
    :class:`~dna_mm.engine.test_loop.UnreadableVideosTestLoop`), ``dict(unreadable=(path,
    reason))``. Every packed sample carries its path in ``data_samples.metainfo['filename']``
    (for ``tools/test.py --dump``), whatever ``PackActionInputs(meta_keys=...)`` says.

    Args:
        num_classes: Number of classes; labels must lie in ``[0, num_classes)``.
        labels_optional: A line may be a path alone (label ``-1``): a list of videos outside the
            model's classes (OOD evaluation). Otherwise such a line is an error: trained on, or
            scored by a test, it would count as a sample of no class.
        check_files: Verify at build time that every listed video exists.
        max_refetch: Replacement attempts for one sample before giving up (training).
        **kwargs: ``VideoDataset`` arguments (``ann_file``, ``pipeline``, ``data_prefix``, ...).
    """

    def __init__(
        self,
        *args,
        num_classes: Optional[int] = None,
        labels_optional: bool = False,
        check_files: bool = True,
        max_refetch: int = 10,
        **kwargs,
    ) -> None:
        if num_classes is not None and num_classes <= 0:
            raise ConfigError(f'num_classes must be positive, got {num_classes}')
        self.check_files, self.labels_optional = check_files, labels_optional
        self.skipped = SharedCounter('video')
        self._failures: list[tuple[Any, str]] = []
        super().__init__(*args, num_classes=num_classes, max_refetch=max_refetch, **kwargs)

    def load_data_list(self) -> list[dict]:
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'annotation file {self.ann_file} does not exist')
        with open(self.ann_file, 'rb') as f:
            raw_lines = f.read().splitlines()
        prefix = self.data_prefix.get('video')
        data_list = []
        for lineno, raw in enumerate(raw_lines, start=1):
            try:
                line = raw.decode('utf-8').strip()
            except UnicodeDecodeError as err:
                raise DataError(
                    f'{self.ann_file}:{lineno}: not UTF-8 text (byte 0x{raw[err.start]:02x} at '
                    f'column {err.start + 1}): {raw!r}; save the list as UTF-8'
                ) from None
            if not line:
                continue
            fields = line.split(self.delimiter)
            if self.multi_class:
                label = [self._label(f, lineno) for f in fields[1:]]
            elif len(fields) == 2:
                label = self._label(fields[1], lineno)
            elif len(fields) == 1:
                if not self.labels_optional:
                    raise DataError(
                        f'{self.ann_file}:{lineno}: expected "path label", got {line!r} (no label; a list '
                        'of videos without labels, such as an OOD list, needs labels_optional=True)'
                    )
                label = -1
            elif _is_int(fields[-1]):  # a path with blanks: the label is the last field
                label = self._label(fields[-1], lineno)
                fields = [self.delimiter.join(fields[:-1])]
            else:
                raise DataError(f'{self.ann_file}:{lineno}: expected "path label", got {line!r}')
            filename = fields[0] if prefix is None else osp.join(prefix, fields[0])
            data_list.append(dict(filename=filename, label=label, lineno=lineno))
        missing = [d for d in data_list if not osp.isfile(d['filename'])] if self.check_files else []
        if missing:
            shown = '\n  '.join(f'line {d["lineno"]}: {d["filename"]}' for d in missing[:SHOW_MISSING])
            raise FileNotFoundError(
                f'{self.ann_file}: {len(missing)} of {len(data_list)} listed videos are missing '
                f'on disk, e.g.\n  {shown}' + ('\n  ...' if len(missing) > SHOW_MISSING else '')
            )
        return data_list

    def _label(self, text: str, lineno: int) -> int:
        try:
            label = int(text)
        except ValueError:
            raise DataError(f'{self.ann_file}:{lineno}: label {text!r} is not an integer') from None
        if label < 0 or (self.num_classes is not None and label >= self.num_classes):
            bound = f'[0, {self.num_classes})' if self.num_classes is not None else '>= 0'
            raise DataError(
                f'{self.ann_file}:{lineno}: label {label} outside {bound} (num_classes={self.num_classes})'
            )
        return label

    def prepare_data(self, idx: int) -> Optional[dict]:
        """The packed sample (its path in ``metainfo['filename']``), or ``None`` in training
        when the video cannot be loaded (logged, counted, remembered for the error below)."""
        path = self.get_data_info(idx).get('filename')
        try:
            data = super().prepare_data(idx)
        except Exception as err:  # undecodable / truncated / unreadable video
            reason = f'{type(err).__name__}: {err}'
            if self.test_mode:
                if getattr(self, 'report_unreadable', False):  # UnreadableVideosTestLoop lists them all
                    return dict(unreadable=(path, reason))
                raise RuntimeError(f'cannot load test video {path}: {err}') from err
            self._failures.append((path, reason))
            total = self.skipped.add()
            print_log(
                f'skipped unreadable video {path} ({reason}); {total} skipped so far in '
                f'this process and its workers; using another sample',
                logger='current',
                level=30,
            )
            return None  # __getitem__ draws another index (max_refetch times)
        if data is None:
            self._failures.append((path, 'the pipeline returned no sample'))
        elif hasattr(data.get('data_samples'), 'set_metainfo') and path is not None:
            data['data_samples'].set_metainfo(dict(filename=path))
        return data

    def __getitem__(self, idx: int) -> dict:
        """mmengine's ``BaseDataset.__getitem__``, with an error listing each video and why when
        ``max_refetch + 1`` training samples in a row fail."""
        self._failures = []
        try:
            return super().__getitem__(idx)
        except Exception:  # in training: mmengine's "Cannot find valid image after max_refetch"
            if self.test_mode or len(self._failures) <= self.max_refetch:
                raise  # not the refetch limit (a lazy full_init, a sampler fault): as it is
        shown = '\n  '.join(f'{path}: {reason}' for path, reason in self._failures)
        raise RuntimeError(
            f'{self.ann_file}: {len(self._failures)} training videos in a row could not be used '
            f'(max_refetch={self.max_refetch}); check the video files and the pipeline:\n  {shown}'
        )


def _is_int(text: str) -> bool:
    return text.lstrip('-').isdigit()
