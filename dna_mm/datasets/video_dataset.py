"""``RobustVideoDataset``: MMAction2's ``VideoDataset`` that checks its list at build time and
survives undecodable training videos; :class:`~.skipped_samples.SkippedSamplesHook` reports how
many it skipped."""

from __future__ import annotations

import os.path as osp
from collections import Counter
from typing import Any, Iterator, Optional

from mmaction.datasets import VideoDataset
from mmaction.registry import DATASETS
from mmengine.logging import print_log

from ..errors import ConfigError, DataError, UserError
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
    (:class:`~.skipped_samples.SkippedSamplesHook` reports the count) and replaced by another sample;
    when ``max_refetch + 1`` samples in a row fail, a one-line :class:`~dna_mm.errors.DataError`
    names each of them and why (mmengine's names no file). In test mode a broken video is an error
    naming it (replacing test samples would change the metric), or, with ``report_unreadable = True`` (set by
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
        self._bugs = 0  # failures of the last __getitem__ that are not the files' (a transform's bug)
        super().__init__(*args, num_classes=num_classes, max_refetch=max_refetch, **kwargs)

    def load_data_list(self) -> list[dict]:
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'annotation file {self.ann_file} does not exist')
        prefix = self.data_prefix.get('video')
        data_list = []
        for lineno, line in read_list_lines(self.ann_file):
            try:
                path, labels = split_list_line(line, self.delimiter, self.multi_class)
            except ValueError:
                raise DataError(f'{self.ann_file}:{lineno}: expected "path label", got {line!r}') from None
            if self.multi_class:
                label = [self._label(f, lineno) for f in labels]
            elif labels:
                label = self._label(labels[0], lineno)
            elif not self.labels_optional:
                raise DataError(
                    f'{self.ann_file}:{lineno}: expected "path label", got {line!r} (no label; a list '
                    'of videos without labels, such as an OOD list, needs labels_optional=True)'
                )
            else:
                label = -1
            filename = path if prefix is None else osp.join(prefix, path)
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
            return list_label(text, self.num_classes)
        except ValueError as err:
            raise DataError(f'{self.ann_file}:{lineno}: {err}') from None

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
            self._failures.append((path, _reason(err, path)))
            self._bugs += not _a_files_fault(err)
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
        """mmengine's ``BaseDataset.__getitem__``, with a one-line :class:`~dna_mm.errors.DataError`
        naming each video that failed and why (a video drawn again: once, with the count) when
        ``max_refetch + 1`` training samples in a row fail on their files (a ``RuntimeError`` with
        the same text, and so a traceback, when any failed otherwise: a bug in a transform).
        Raised in a loader worker, it reaches the tool as that line too
        (:func:`~dna_mm.errors.error_line`): no reason in it is written ``Type: message``, the
        form of the worker traceback's last line."""
        self._failures, self._bugs = [], 0
        try:
            return super().__getitem__(idx)
        except Exception:  # in training: mmengine's "Cannot find valid image after max_refetch"
            if self.test_mode or len(self._failures) <= self.max_refetch:
                raise  # not the refetch limit (a lazy full_init, a sampler fault): as it is
        times = Counter(self._failures)
        shown = '; '.join(
            f'{path}{f" ({n} times)" if n > 1 else ""}: {reason}' for (path, reason), n in times.items()
        )
        error = DataError if not self._bugs else RuntimeError  # a transform's bug keeps its traceback
        raise error(
            f'{self.ann_file}: {len(self._failures)} training videos in a row could not be used '
            f'(max_refetch={self.max_refetch}); check the video files and the pipeline: {shown}'
        )


def read_list_lines(ann_file: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each non-blank line of a ``path label`` list, stripped; a line
    that is not UTF-8 is a :class:`~dna_mm.errors.DataError` naming ``file:line`` and the byte."""
    with open(ann_file, 'rb') as f:
        raw_lines = f.read().splitlines()
    for lineno, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode('utf-8').strip()
        except UnicodeDecodeError as err:
            raise DataError(
                f'{ann_file}:{lineno}: not UTF-8 text (byte 0x{raw[err.start]:02x} at '
                f'column {err.start + 1}): {raw!r}; save the list as UTF-8'
            ) from None
        if line:
            yield lineno, line


def split_list_line(line: str, delimiter: str = ' ', multi_class: bool = False) -> tuple[str, list[str]]:
    """``(path, label fields)`` of a list line as :class:`RobustVideoDataset` reads it: ``path
    label``, where a path may hold blanks (the label is the last field, an integer); a path alone
    (no label field); with ``multi_class``, a path and its labels. Any other line (more fields, the
    last not an integer) is a ``ValueError``."""
    fields = line.split(delimiter)
    if multi_class or len(fields) <= 2:
        return fields[0], fields[1:]
    if _is_int(fields[-1]):  # a path with blanks
        return delimiter.join(fields[:-1]), fields[-1:]
    raise ValueError(f'expected "path label", got {line!r}')


def list_label(text: str, num_classes: Optional[int]) -> int:
    """A list's label field as an ``int`` in ``[0, num_classes)`` (``num_classes`` ``None``: any
    label ``>= 0``); else a ``ValueError`` saying why."""
    try:
        label = int(text)
    except ValueError:
        raise ValueError(f'label {text!r} is not an integer') from None
    if label < 0 or (num_classes is not None and label >= num_classes):
        bound = f'[0, {num_classes})' if num_classes is not None else '>= 0'
        raise ValueError(f'label {label} outside {bound} (num_classes={num_classes})')
    return label


def _a_files_fault(err: BaseException) -> bool:
    """``err`` says the video's file is at fault (unreadable, damaged, missing: the readers'
    :class:`~dna_mm.errors.UserError`, an ``OSError``, an error of decord or PyAV), not the code
    that transforms it."""
    module = type(err).__module__ or ''
    return isinstance(err, (UserError, OSError)) or module.split('.')[0] in ('decord', 'av')


def _reason(err: BaseException, path: Optional[str]) -> str:
    """Why a video failed, on one line: ``err``'s message without the path it starts with (the
    line names it), then its type: ``'truncated: ... (DataError)'``."""
    text = ' '.join(str(err).split())
    if path and text.startswith(f'{path}: '):
        text = text[len(path) + 2 :]
    return f'{text} ({type(err).__name__})'


def _is_int(text: str) -> bool:
    return text.lstrip('-').isdigit()
