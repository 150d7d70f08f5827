"""What a checked action dataset does with its samples, whatever they are stored as (a video,
a folder of frames): a label checked at build time (one, or with ``multi_class`` several: each
line's classes, which MMAction2 turns into a 0/1 target of ``num_classes``), an unreadable
training sample logged, counted (:class:`~.skipped_samples.SkippedSamplesHook`) and replaced by
another, one line naming each when ``max_refetch + 1`` in a row fail, and in test mode an error
naming it or, for :class:`~dna_mm.engine.test_loop.UnreadableVideosTestLoop`,
``dict(unreadable=(path, reason))``.
:class:`~.video_dataset.RobustVideoDataset` and :class:`~.rawframe_dataset.RobustRawframeDataset`
are MMAction2's datasets with this mixin first."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Iterator, Optional, Union

import torch
from mmengine.logging import print_log

from ..errors import ConfigError, DataError, UserError
from .skipped_samples import SharedCounter

#: the class names the annotation builders write beside their lists
CLASSES_FILE = 'classes.txt'


class RobustSamples:
    """The sample handling of the module docstring, before an MMAction2 ``BaseActionDataset``
    in the bases.

    Args:
        num_classes: Number of classes; labels must lie in ``[0, num_classes)``. Required with
            ``multi_class``: the length of each line's 0/1 target.
        labels_optional: A line may hold no label (label ``-1``; with ``multi_class``, no
            classes: an all-zero target): a list outside the model's classes (OOD evaluation).
            Otherwise such a line is an error: trained on, or scored by a test, it would count as
            a sample of no class.
        check_files: Verify at build time that every listed sample is on disk.
        max_refetch: Replacement attempts for one sample before giving up (training).
        **kwargs: The MMAction2 dataset's arguments (``ann_file``, ``pipeline``, ``data_prefix``, ...).

    A subclass names its samples (:attr:`noun`, ``'video'``) and the key of their path in a data
    info (:attr:`path_key`, ``'filename'``), and may say more about a failure
    (:meth:`describe_failure`). Every packed sample carries its path in
    ``data_samples.metainfo['filename']`` (for ``tools/test.py --dump``), whatever
    ``PackActionInputs(meta_keys=...)`` says.
    """

    noun = 'sample'
    path_key = 'filename'

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
        if kwargs.get('multi_class') and num_classes is None:
            # MMAction2's own lists assert it; without it the first sample's one-hot target fails
            # in a loader worker (torch.zeros(None)), after the build, with no key named
            ann_file = kwargs.get('ann_file', args[0] if args else None)
            raise ConfigError(
                f'{ann_file}: multi_class=True needs num_classes (the length of the 0/1 target that '
                'each line\'s labels become), got none; set num_classes in the dataset\'s config'
            )
        self.check_files, self.labels_optional = check_files, labels_optional
        #: ``(label, line number)`` of the largest label the list holds (:func:`largest_label`), once read
        self.largest_label: Optional[tuple[int, Optional[int]]] = None
        self.skipped = SharedCounter(self.noun)
        self._failures: list[tuple[Any, str]] = []
        self._bugs = 0  # failures of the last __getitem__ that are not the files' (a transform's bug)
        super().__init__(*args, num_classes=num_classes, max_refetch=max_refetch, **kwargs)

    def listed(self, data_list: list[dict]) -> list[dict]:
        """``data_list``, read from the list, once it is known to hold samples of this dataset's
        classes: a list with none (an empty split) is a :class:`~dna_mm.errors.DataError` naming
        it (mmengine would stop on it with no file named), as is one whose ``classes.txt`` (written
        beside it by the annotation builders, ``tools/data/*/build_annotations.py``) names another
        number of classes than ``num_classes``: a list of another protocol, whose labels would
        train and score other classes (Smarthome's cross-view lists have 19, cross-subject 31).
        Its largest label is kept (:attr:`largest_label`): the runner holds it against the model's
        head (:mod:`dna_mm.engine.label_bounds`)."""
        if not data_list:
            raise DataError(f'{self.ann_file}: the list holds no {self.noun}s: nothing to train or test on')
        classes = os.path.join(os.path.dirname(self.ann_file), CLASSES_FILE)
        if self.num_classes is not None and os.path.isfile(classes):
            with open(classes, encoding='utf-8', errors='replace') as f:
                named = sum(1 for line in f if line.strip())
            if named != self.num_classes:
                raise DataError(
                    f'{self.ann_file}: its {CLASSES_FILE} names {named} classes and num_classes is '
                    f'{self.num_classes}: the list was made for another protocol than this config\'s '
                    f'(its labels would stand for other classes); use the config of the list\'s protocol'
                )
        self.largest_label = largest_label(data_list)
        return data_list

    def get_cat_ids(self, idx: int) -> list[int]:
        """The classes of sample ``idx`` (one, or a ``multi_class`` line's several; none for an
        unlabelled one): what mmengine's ``ClassBalancedDataset`` oversamples by. MMAction2's
        ``get_data_info`` has made a ``multi_class`` line's labels a one-hot tensor of
        ``num_classes``: its classes are the indices of its ones."""
        label = self.get_data_info(idx)['label']
        if isinstance(label, torch.Tensor) and label.ndim == 1:  # multi_class: the one-hot target
            return [int(c) for c in torch.nonzero(label).flatten()]
        labels = label if isinstance(label, (list, tuple)) else [label]
        return [int(c) for c in labels if int(c) >= 0]

    def describe_failure(self, err: BaseException, info: dict) -> Optional[str]:
        """What is wrong with the files of the sample of data info ``info``, on which ``err``
        stopped its pipeline, when the sample's kind can tell more than ``err`` (a frame folder:
        its first damaged frame); ``None`` otherwise."""
        return None

    def line_label(self, labels: list[str], lineno: int, line: str, form: str) -> Union[int, list[int]]:
        """The label of list line ``lineno`` (``line``, of the form ``form``) from its label fields
        ``labels``: one, checked (:func:`list_label`); with ``multi_class``, one or more, each
        checked; none with ``labels_optional`` (``-1``, or ``[]`` with ``multi_class``: no class);
        else a :class:`~dna_mm.errors.DataError` naming ``file:line``. A ``multi_class`` line
        without a label is no exception: it would train as an all-zero target (no class)."""
        if self.multi_class and (labels or self.labels_optional):
            return [self._label(f, lineno) for f in labels]
        if len(labels) == 1 and not self.multi_class:
            return self._label(labels[0], lineno)
        if labels or not self.labels_optional:
            why = (
                ''
                if labels
                else f' (no label; a list of {self.noun}s without labels, such as an OOD list, needs '
                'labels_optional=True)'
            )
            raise DataError(f'{self.ann_file}:{lineno}: expected "{form}", got {line!r}{why}')
        return -1

    def _label(self, text: str, lineno: int) -> int:
        try:
            return list_label(text, self.num_classes)
        except ValueError as err:
            raise DataError(f'{self.ann_file}:{lineno}: {err}') from None

    def prepare_data(self, idx: int) -> Optional[dict]:
        """The packed sample (its path in ``metainfo['filename']``), or ``None`` in training
        when the sample cannot be loaded (logged, counted, remembered for the error below)."""
        info = self.get_data_info(idx)
        path = info.get(self.path_key)
        try:
            data = super().prepare_data(idx)
        except Exception as err:  # undecodable / truncated / unreadable video or frame
            found = self.describe_failure(err, info)  # the files at fault, said better than err
            reason = found or f'{type(err).__name__}: {err}'
            if self.test_mode:
                if getattr(self, 'report_unreadable', False):  # UnreadableVideosTestLoop lists them all
                    return dict(unreadable=(path, reason))
                raise RuntimeError(f'cannot load test {self.noun} {path}: {reason}') from err
            self._failures.append((path, found or _reason(err, path)))
            self._bugs += not (found or _a_files_fault(err))
            total = self.skipped.add()
            print_log(
                f'skipped unreadable {self.noun} {path} ({reason}); {total} skipped so far in '
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
        naming each sample that failed and why (one drawn again: once, with the count) when
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
            f'{self.ann_file}: {len(self._failures)} training {self.noun}s in a row could not be used '
            f'(max_refetch={self.max_refetch}); check the {self.noun} files and the pipeline: {shown}'
        )


def read_list_lines(ann_file: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each non-blank line of a list, stripped; a line
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


def largest_label(data_list: list[dict]) -> Optional[tuple[int, Optional[int]]]:
    """``(label, line number)`` of the largest label of a list's data infos (each ``label`` an
    ``int``, ``-1`` for none, or a ``multi_class`` line's list of them; ``lineno`` its line), the
    first line that holds it; ``None`` for a list without labels."""
    found: Optional[tuple[int, Optional[int]]] = None
    for info in data_list:
        label = info.get('label')
        top = max(label, default=-1) if isinstance(label, (list, tuple)) else label
        if isinstance(top, int) and top >= 0 and (found is None or top > found[0]):
            found = (top, info.get('lineno'))
    return found


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
