"""``RobustVideoDataset``: MMAction2's ``VideoDataset`` that checks its list at build time and
survives undecodable training videos; :class:`~.skipped_samples.SkippedSamplesHook` reports how
many it skipped."""

from __future__ import annotations

import os.path as osp
from typing import NoReturn

from mmaction.datasets import VideoDataset
from mmaction.registry import DATASETS

from ..errors import DataError
from .robust_samples import RobustSamples, read_list_lines
from .video_files import VIDEO_SUFFIXES

SHOW_MISSING = 5


@DATASETS.register_module()
class RobustVideoDataset(RobustSamples, VideoDataset):
    """``VideoDataset`` with build-time checks and corrupt-video tolerance.

    At build time, an error naming the list: a line that is not UTF-8 (``file:line`` and the
    byte), a line other than ``path label`` (a path may hold blanks: the label is the last
    field; with ``multi_class``, ``path label [label ...]``, which needs ``num_classes``), a line
    without a label (unless ``labels_optional``: an OOD list), a label outside
    ``[0, num_classes)``, videos missing on disk (the first few with their line numbers, and the
    total). A line of another kind of list is said to be one: ``video.mp4 1 2`` (a video file
    and several labels) of a multi-label list read without ``multi_class``, ``frame_dir
    total_frames label`` of a list of frame folders.

    In training, a video that fails to load is logged with the reason, counted
    (:class:`~.skipped_samples.SkippedSamplesHook` reports the count) and replaced by another sample;
    when ``max_refetch + 1`` samples in a row fail, a one-line :class:`~dna_mm.errors.DataError`
    names each of them and why (mmengine's names no file). In test mode a broken video is an error
    naming it (replacing test samples would change the metric), or, with ``report_unreadable = True`` (set by
    :class:`~dna_mm.engine.test_loop.UnreadableVideosTestLoop`), ``dict(unreadable=(path,
    reason))`` (:class:`~.robust_samples.RobustSamples`, which takes the arguments
    ``num_classes``, ``labels_optional``, ``check_files``, ``max_refetch``).
    """

    noun = 'video'
    path_key = 'filename'

    def load_data_list(self) -> list[dict]:
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'annotation file {self.ann_file} does not exist')
        prefix = self.data_prefix.get('video')
        form = 'path label [label ...]' if self.multi_class else 'path label'
        data_list = []
        for lineno, line in read_list_lines(self.ann_file):
            try:
                path, labels = split_list_line(line, self.delimiter, self.multi_class)
            except ValueError:
                raise DataError(f'{self.ann_file}:{lineno}: expected "path label", got {line!r}') from None
            if not self.multi_class and len(labels) == 1 and _is_int(path.rsplit(self.delimiter, 1)[-1]):
                self._another_list(line, lineno)
            label = self.line_label(labels, lineno, line, form)
            filename = path if prefix is None else osp.join(prefix, path)
            data_list.append(dict(filename=filename, label=label, lineno=lineno))
        missing = [d for d in data_list if not osp.isfile(d['filename'])] if self.check_files else []
        if missing:
            shown = '\n  '.join(f'line {d["lineno"]}: {d["filename"]}' for d in missing[:SHOW_MISSING])
            raise FileNotFoundError(
                f'{self.ann_file}: {len(missing)} of {len(data_list)} listed videos are missing '
                f'on disk, e.g.\n  {shown}' + ('\n  ...' if len(missing) > SHOW_MISSING else '')
            )
        return self.listed(data_list)

    def _another_list(self, line: str, lineno: int) -> NoReturn:
        """The :class:`~dna_mm.errors.DataError` for a line read without ``multi_class`` whose
        label follows another integer: a video file and several labels (a multi-label list, whose
        labels would be read as one path ``video.mp4 1`` and one label), or else
        ``frame_dir total_frames label`` (a list of frame folders)."""
        first, *rest = line.split(self.delimiter)
        if osp.splitext(first)[1].lower() in VIDEO_SUFFIXES and all(_is_int(f) for f in rest):
            raise DataError(
                f'{self.ann_file}:{lineno}: {line!r} gives the video {first} {len(rest)} labels '
                f'({" ".join(rest)}), and the dataset reads one label a video; for a multi-label list '
                'set multi_class=True and num_classes (the number of classes) in the dataset\'s config, '
                "and multi_class=True with loss_cls=dict(type='BCELossWithLogits') in the model's cls_head"
            )
        raise DataError(
            f'{self.ann_file}:{lineno}: {line!r} is a line of a list of frame folders '
            '("frame_dir total_frames label"); a list of videos has "path label" lines, and '
            "frame folders are read by type='RobustRawframeDataset' with RawFrameDecode "
            '(docs/datasets/rawframes.md)'
        )


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


def _is_int(text: str) -> bool:
    return text.lstrip('-').isdigit()
