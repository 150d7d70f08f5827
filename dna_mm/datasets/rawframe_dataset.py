"""``RobustRawframeDataset``: MMAction2's ``RawframeDataset`` (videos stored as folders of
frames, ``img_00001.jpg`` ...) that checks its list and folders at build time and survives a
damaged frame in training, as :class:`~.video_dataset.RobustVideoDataset` does for videos."""

from __future__ import annotations

import os
import os.path as osp
from typing import Optional

from mmaction.datasets import RawframeDataset
from mmaction.registry import DATASETS

from ..errors import ConfigError, DataError
from .robust_samples import RobustSamples, read_list_lines
from .video_dataset import SHOW_MISSING

#: pipeline steps that open a video file, not a frame folder
VIDEO_OPENERS = ('DecordInit', 'PyAVInit', 'OpenCVInit', 'ScaledDecordInit', 'ScaledPyAVInit')


@DATASETS.register_module()
class RobustRawframeDataset(RobustSamples, RawframeDataset):
    """``RawframeDataset`` with build-time checks and damaged-frame tolerance.

    A list line is ``frame_dir total_frames label`` (``frame_dir offset total_frames label`` with
    ``with_offset``; one or more labels with ``multi_class``, which needs ``num_classes``); frame
    ``n`` of a sample (from 0) is ``frame_dir / filename_tmpl.format(start_index + offset + n)``,
    as MMAction2's ``RawFrameDecode`` reads it. At build time, an error naming ``file:line``: a
    line of another form, a ``total_frames`` (or offset) that is not a whole number, a line
    without a label (unless ``labels_optional``; with ``multi_class`` too), a label outside
    ``[0, num_classes)``; and with ``check_files``, the folders that are missing, or lack the
    first or the last frame the line counts (the first few, with the frames the folder holds: a
    wrong ``total_frames`` or ``filename_tmpl``); and a pipeline that opens video files
    (``DecordInit``, ...) instead of decoding frames.

    In training, a sample whose frames fail to load is logged with the first damaged frame of its
    folder (missing, empty, or not an image OpenCV decodes), counted and replaced; in test mode it
    is an error naming the frame, or listed (``tools/test.py --skip-unreadable``)
    (:class:`~.robust_samples.RobustSamples`, which takes the arguments ``num_classes``,
    ``labels_optional``, ``check_files``, ``max_refetch``). ``tools/test.py --dump`` names each
    sample by its folder.
    """

    noun = 'frame folder'
    path_key = 'frame_dir'

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        opener = next((t for t in self.pipeline.transforms if type(t).__name__ in VIDEO_OPENERS), None)
        if opener is not None:
            raise ConfigError(
                f'{self.ann_file}: RobustRawframeDataset gives frame folders (frame_dir), and the '
                f"pipeline opens video files ({type(opener).__name__}); decode frames with "
                "dict(type='RawFrameDecode') in its place, or read videos with type='RobustVideoDataset'"
            )

    def load_data_list(self) -> list[dict]:
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'annotation file {self.ann_file} does not exist')
        prefix = self.data_prefix.get('img')
        counts = 2 if self.with_offset else 1
        form = f'frame_dir {"offset " if self.with_offset else ""}total_frames label'
        form += ' [label ...]' if self.multi_class else ''
        data_list = []
        for lineno, line in read_list_lines(self.ann_file):
            fields = line.split()
            numbers = fields[1 : 1 + counts]
            if len(numbers) < counts or not all(n.isdigit() for n in numbers):
                raise DataError(f'{self.ann_file}:{lineno}: expected "{form}", got {line!r}')
            label = self.line_label(fields[1 + counts :], lineno, line, form)
            info = dict(frame_dir=fields[0] if prefix is None else osp.join(prefix, fields[0]))
            if self.with_offset:
                info['offset'] = int(numbers[0])
            info.update(total_frames=int(numbers[-1]), label=label, lineno=lineno)
            if info['total_frames'] < 1:
                raise DataError(f'{self.ann_file}:{lineno}: total_frames must be at least 1, got {line!r}')
            data_list.append(info)
        if self.check_files:
            self._check_folders(data_list)
        return self.listed(data_list)

    def frame(self, info: dict, n: int) -> str:
        """The file of frame ``n`` (from 0) of the sample of data info ``info``."""
        return osp.join(
            info['frame_dir'], self.filename_tmpl.format(self.start_index + info.get('offset', 0) + n)
        )

    def _check_folders(self, data_list: list[dict]) -> None:
        """The folders missing, or without the first or the last frame their line counts: a
        ``FileNotFoundError`` naming the first few (line, what is wrong) and the total."""
        wrong = []
        for info in data_list:
            if not osp.isdir(info['frame_dir']):
                wrong.append((info, 'no such folder'))
                continue
            for n in (0, info['total_frames'] - 1):
                if not osp.isfile(self.frame(info, n)):
                    wrong.append((info, self._missing_frame(info, n)))
                    break
        if wrong:
            shown = '\n  '.join(
                f'line {i["lineno"]}: {i["frame_dir"]}: {why}' for i, why in wrong[:SHOW_MISSING]
            )
            raise FileNotFoundError(
                f'{self.ann_file}: {len(wrong)} of {len(data_list)} listed frame folders are missing or '
                f'lack frames on disk, e.g.\n  {shown}' + ('\n  ...' if len(wrong) > SHOW_MISSING else '')
            )

    def _missing_frame(self, info: dict, n: int) -> str:
        """Why frame ``n`` of a folder is not there: the list's count against the folder's frames,
        or the file name template against the names in the folder."""
        name = osp.basename(self.frame(info, n))
        files = sorted(f for f in os.listdir(info['frame_dir']) if not f.startswith('.'))
        held = f'{len(files)} files, {files[0]} ... {files[-1]}' if files else 'no files'
        if n == 0:
            tmpl = f'filename_tmpl={self.filename_tmpl!r}, start_index={self.start_index}'
            return f'no {name} ({tmpl}); it holds {held}'
        count = info['total_frames']
        return f'no {name}, frame {n + 1} of the total_frames={count} the list gives; it holds {held}'

    def describe_failure(self, err: BaseException, info: dict) -> Optional[str]:
        """The first damaged frame of the sample's folder (missing, empty, not an image OpenCV
        decodes), or ``None`` when every frame reads (the fault is not the files')."""
        import cv2

        for n in range(info.get('total_frames', 0)):
            path = self.frame(info, n)
            if not osp.isfile(path):
                return f'{path}: missing'
            if os.path.getsize(path) == 0:
                return f'{path}: empty file (0 bytes)'
            if cv2.imread(path, cv2.IMREAD_UNCHANGED) is None:
                return f'{path}: not an image OpenCV can decode (damaged or cut off)'
        return None
