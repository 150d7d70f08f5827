"""Faster video loading for MMAction2 pipelines: drop-in replacements for ``DecordInit`` /
``DecordDecode`` that decode at the size the pipeline needs, in frame order (measured with
``tools/benchmarks/benchmark_data.py``, docs/data_throughput.md).
"""

from __future__ import annotations

import functools
import io
import math
import os.path as osp
from typing import Optional

import numpy as np
from mmaction.datasets.transforms import DecordDecode, DecordInit
from mmaction.registry import TRANSFORMS
from mmengine.fileio import get_file_backend

from ..errors import ConfigError, DataError
from .video_reader import TIME_LIMIT, KeyframeReader, open_video


def video_size(path: str, min_short: float = math.inf) -> tuple[int, int, int]:
    """``(width, height, rotation)`` of the first video stream of ``path`` as stored (PyAV, from
    the header). ``rotation`` (0, 90, 180, 270, as decord applies it) is the ``rotate`` tag;
    FFmpeg 7 (PyAV 18) keeps a display matrix only on the frames, so where the short side is at
    least ``min_short`` the first frame is decoded to read it. A file that cannot be read is a
    :class:`~dna_mm.errors.DataError` naming it and what is wrong."""
    import av

    container, stream = open_video(path, path)
    with container:
        width, height = stream.codec_context.width, stream.codec_context.height
        rotation = int(float(stream.metadata.get('rotate', 0) or 0))
        if not rotation and min(width, height) >= min_short:
            try:
                rotation = int(getattr(next(container.decode(stream), None), 'rotation', 0) or 0)
            except av.FFmpegError:
                pass  # damaged data: the reader says so
        return width, height, rotation % 360


@functools.lru_cache(maxsize=1 << 16)  # about 150 bytes a file
def display_size(path: str, min_short: float) -> tuple[int, int]:
    """``(width, height)`` of ``path`` as decord returns its frames (display orientation), probed
    once per process (:func:`video_size`), not at every epoch."""
    width, height, rotation = video_size(path, min_short)
    return (height, width) if rotation in (90, 270) else (width, height)


def scaled_size(
    width: int, height: int, short_side: int, min_downscale: float = 1.0
) -> Optional[tuple[int, int]]:
    """``(w, h)`` with short side ``short_side`` and the aspect ratio of ``width × height``, or
    ``None`` when the short side is below ``min_downscale × short_side`` or at most
    ``short_side`` (never upscale)."""
    short = min(width, height)
    if short <= short_side or short < min_downscale * short_side:
        return None
    scale = short_side / short
    w = short_side if width == short else int(round(width * scale))
    h = short_side if height == short else int(round(height * scale))
    return w, h


def decord_can_scale_to(width: int) -> bool:
    """Whether decord 0.6 returns correct ``width``-wide RGB frames from its scaler.

    decord takes an FFmpeg frame whose row stride is a multiple of ``3 * width`` for a compact
    one, so a padded stride that happens to be a multiple of the width (FFmpeg pads the width to
    a power of two until the stride is 16-, 32- or 64-byte aligned) gives frames of the wrong
    width and a size error; it can only happen for widths below 192.
    """
    for align in (16, 32, 64):
        step = 1
        while step <= align:  # FFmpeg's get_video_buffer: pad the width until the stride aligns
            stride = 3 * (-(-width // step) * step)
            if stride % align == 0:
                break
            step *= 2
        if stride != 3 * width and stride % width == 0:
            return False
    return True


@TRANSFORMS.register_module()
class ScaledDecordInit(DecordInit):
    """``DecordInit`` that decodes a video whose short side is at least ``min_downscale ×
    short_side`` straight to short side ``s = short_side`` with FFmpeg's scaler (aspect kept)::

        (w, h) -> (round(w * s / min(w, h)), round(h * s / min(w, h)))

    and other videos at their own size (never upscaled; below a 3x reduction the scaler costs
    more than a plain conversion plus an OpenCV rescale). With ``short_side`` at least the
    largest short side a later transform rescales to, the geometry is that of rescaling the full
    frame (to a pixel); only the interpolation differs.

    Args:
        short_side: Decode-time short side, at least the largest short side any later transform
            rescales to; ``None``: the native size (plain ``DecordInit``).
        min_downscale: Resize at decode time only when the short side shrinks at least this
            many times (>= 1).
        io_backend, num_threads, **kwargs: As ``DecordInit``'s (the size probe needs a path:
            an ``io_backend`` other than ``'disk'`` decodes at the native size).

    Adds ``results['video_shape']``, the file's ``(h, w)``; ``original_shape`` / ``img_shape``
    are the decoded frames' size (always upright, as shown). ``video_shape`` is the shown size
    where the rotation is known without decoding (a ``rotate`` tag) or the file is large enough
    to be scaled (its first frame is then decoded to read the display matrix), and the stored
    size of a smaller clip rotated by a display matrix only: use ``img_shape`` for the frames.
    """

    def __init__(
        self,
        short_side: Optional[int] = None,
        min_downscale: float = 3.0,
        io_backend: str = 'disk',
        num_threads: int = 1,
        **kwargs,
    ) -> None:
        if short_side is not None and (not isinstance(short_side, int) or short_side <= 0):
            raise ConfigError(
                f'{type(self).__name__}: short_side must be a positive int or None, got {short_side!r}'
            )
        if not min_downscale >= 1:
            raise ConfigError(f'{type(self).__name__}: min_downscale must be >= 1, got {min_downscale!r}')
        super().__init__(io_backend=io_backend, num_threads=num_threads, **kwargs)
        self.short_side = short_side
        self.min_downscale = min_downscale

    def _reader(self, source: io.BytesIO, filename: str, size: Optional[tuple[int, int]]) -> object:
        """decord's reader of ``source``, decoding at ``size = (w, h)`` where it applies."""
        import decord

        scaled = (
            {} if size is None or not decord_can_scale_to(size[0]) else dict(width=size[0], height=size[1])
        )
        try:
            return decord.VideoReader(source, num_threads=self.num_threads, **scaled)
        except (decord.DECORDError, RuntimeError) as err:  # a C++ trace: its last line says why
            raise DataError(
                f'{filename}: decord cannot read it ({str(err).strip().splitlines()[-1]})'
            ) from None

    def transform(self, results: dict) -> dict:
        filename = results['filename']
        if osp.splitext(filename)[0] == filename:  # a bare name means .mp4, as DecordInit
            filename += '.mp4'
        if self.file_client is None:  # DecordInit's FileClient, in mmengine's current API
            backend = 'local' if self.io_backend == 'disk' else self.io_backend
            self.file_client = get_file_backend(filename, backend_args=dict(backend=backend, **self.kwargs))
        # the bytes are read into memory, as DecordInit does (seeks then cost no file system calls)
        source = io.BytesIO(self.file_client.get(filename))
        size = None  # decode-time (w, h) in display orientation: decord rotates before it scales
        if self.short_side is not None and self.io_backend == 'disk':  # the size probe needs a path
            min_short = max(self.min_downscale * self.short_side, self.short_side + 1)
            width, height = display_size(filename, min_short)
            size = scaled_size(width, height, self.short_side, self.min_downscale)
            results['video_shape'] = (height, width)
        reader = self._reader(source, filename, size)
        results.update(total_frames=len(reader), video_reader=reader, avg_fps=reader.get_avg_fps())
        return results

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(short_side={self.short_side}, min_downscale={self.min_downscale}, '
            f'io_backend={self.io_backend}, num_threads={self.num_threads})'
        )


@TRANSFORMS.register_module()
class ScaledPyAVInit(ScaledDecordInit):
    """:class:`ScaledDecordInit` with dna_mm's PyAV reader
    (:class:`~dna_mm.datasets.video_reader.KeyframeReader`) in place of decord's (the configs'
    choice: the exact frames of every kind of file, for less CPU time per clip); decode with
    :class:`SortedDecordDecode` after it.

    Args:
        time_limit: Seconds that opening a video, and decoding one clip of it, may take before
            the video counts as unreadable (``None``: no limit).
        *args, **kwargs: As :class:`ScaledDecordInit`'s.
    """

    def __init__(self, *args, time_limit: Optional[float] = TIME_LIMIT, **kwargs) -> None:
        if time_limit is not None and not time_limit > 0:
            raise ConfigError(f'{type(self).__name__}: time_limit must be > 0 or None, got {time_limit!r}')
        super().__init__(*args, **kwargs)
        self.time_limit = time_limit

    def _reader(self, source: io.BytesIO, filename: str, size: Optional[tuple[int, int]]) -> object:
        from .video_reader import KeyframeReader

        return KeyframeReader(source, size, self.num_threads, name=filename, time_limit=self.time_limit)


@TRANSFORMS.register_module()
class SortedDecordDecode(DecordDecode):
    """``DecordDecode`` that decodes each sampled frame once, in increasing order (the same
    frames, order and keys)::

        u, inv = unique(frame_inds);  imgs = get_batch(u)[inv]

    A reader seeks back to a keyframe for every index smaller than the previous one, as when a
    clip wraps around a short video (8 frames at interval 32 of a 90-frame video are
    ``0, 32, 64, 6, 38, 70, 12, 44``). ``mode='efficient'`` is ``DecordDecode``'s.
    """

    def _decord_load_frames(self, container: object, frame_inds: np.ndarray) -> list[np.ndarray]:
        if self.mode != 'accurate':
            if isinstance(container, KeyframeReader):  # dna_mm's PyAV reader: exact frames only
                raise ConfigError(
                    "SortedDecordDecode(mode='efficient') seeks decord's reader to keyframes: "
                    "open the video with ScaledDecordInit, or use mode='accurate'"
                )
            return super()._decord_load_frames(container, frame_inds)
        frame_inds = np.asarray(frame_inds).reshape(-1)
        unique, inverse = np.unique(frame_inds, return_inverse=True)
        frames = container.get_batch(unique)  # [U, H, W, 3], U <= len(frame_inds)
        frames = frames if isinstance(frames, np.ndarray) else frames.asnumpy()  # decord's NDArray
        if len(unique) == len(frame_inds) and np.all(inverse == np.arange(len(inverse))):
            return list(frames)  # already increasing: no reordering copy
        return list(frames[inverse.reshape(-1)])  # [T, H, W, 3]
