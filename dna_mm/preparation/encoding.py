"""Read a source video's header and re-encode it to H.264 (``libx264``, ``yuv420p``, CRF
:data:`CRF`, preset :data:`PRESET`) with PyAV's bundled FFmpeg; audio is dropped.

Every decoded source frame becomes one output frame, transformed by the caller (a resize, a
crop), at ``pts = index`` and the source's average rate. At most ``keyint`` frames lie between
keyframes: a seek decodes on average ``keyint / 2`` frames from the keyframe before it, so a
short interval makes the train pipeline's random access cheaper at some cost in size (16
decodes a 10-second 456x256 clip 1.68x faster than x264's default 250 at about 3x the file
size; ``tools/benchmarks/benchmark_preparation.py keyint``, docs/datasets/kinetics400.md).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable

import av
import numpy as np

from ..datasets.video_reader import KeyframeReader
from ..errors import DataError

#: frames between keyframes (``--keyint``), chosen by measuring decord random access
DEFAULT_KEYINT = 16
CRF = 23
PRESET = 'veryfast'
#: frame rate written when a source declares none
FALLBACK_RATE = Fraction(30)

FrameTransform = Callable[[av.VideoFrame], av.VideoFrame]


@dataclass(frozen=True)
class VideoInfo:
    """A source's video stream, as :func:`probe` reads it."""

    width: int
    height: int
    frames: int


def probe(path: Path) -> VideoInfo:
    """Size and frame count of the first video stream of ``path``, counted as training reads it
    (:class:`~dna_mm.datasets.video_reader.KeyframeReader`: the packets shown, an edit list's
    hidden lead-in left out); a :class:`~dna_mm.errors.DataError` saying what is wrong with a
    file it cannot read (empty, not a video, truncated, no video stream, ...)."""
    reader = KeyframeReader(str(path), name=path.name, time_limit=None)
    width, height = reader.stored_size
    reader.close()
    if width <= 0 or height <= 0:
        raise DataError(f'{path.name}: no picture size in the header ({width}x{height})')
    return VideoInfo(width, height, len(reader))


def short_side_size(width: int, height: int, short_side: int) -> tuple[int, int]:
    """``(W, H)`` with ``min(W, H) == short_side`` and the long side
    ``round(long_in * short_side / short_in)`` rounded to the nearest even number."""
    if width <= height:
        return short_side, max(2, 2 * round(height * short_side / width / 2))
    return max(2, 2 * round(width * short_side / height / 2)), short_side


def resize_to(width: int, height: int) -> FrameTransform:
    """Frame transform: scale to ``width x height`` (swscale, bicubic as the ffmpeg CLI)."""
    return functools.partial(
        av.VideoFrame.reformat, width=width, height=height, format='yuv420p', interpolation='BICUBIC'
    )


def crop_and_resize(box: tuple[int, int, int, int], size: int) -> FrameTransform:
    """Frame transform: cut ``box = (x0, y0, x1, y1)`` (pixels, end exclusive), resize to ``size²``."""
    import cv2

    x0, y0, x1, y1 = box

    def transform(frame: av.VideoFrame) -> av.VideoFrame:
        rgb = frame.to_ndarray(format='rgb24')[y0:y1, x0:x1]  # [h, w, 3]
        out = cv2.resize(np.ascontiguousarray(rgb), (size, size), interpolation=cv2.INTER_AREA)
        return av.VideoFrame.from_ndarray(out, format='rgb24')  # [size, size, 3]

    return transform


def encode(
    src: Path,
    dst: Path,
    size: tuple[int, int],
    transform: FrameTransform,
    keyint: int = DEFAULT_KEYINT,
    threads: int = 1,
) -> int:
    """Decode ``src``, ``transform`` each frame (to ``size = (W, H)``), write H.264 ``dst``
    (mp4, or Matroska for ``.mkv``); returns the frames written. ``threads`` per codec (0:
    FFmpeg's choice; 1 when several files are encoded in parallel processes)."""
    written = 0
    with av.open(str(src)) as inp:  # a source without video stream: probe() refused it
        vin = inp.streams.video[0]
        if threads != 1:
            vin.thread_type = 'AUTO'
        vin.codec_context.thread_count = threads
        rate = Fraction(vin.average_rate or vin.guessed_rate or FALLBACK_RATE)
        with av.open(str(dst), 'w', format='mp4' if dst.suffix != '.mkv' else 'matroska') as out:
            vout = out.add_stream('libx264', rate, options={'crf': str(CRF), 'preset': PRESET})
            vout.width, vout.height, vout.pix_fmt = *size, 'yuv420p'
            vout.codec_context.gop_size, vout.codec_context.thread_count = keyint, threads
            for frame in inp.decode(vin):
                image = transform(frame)
                image.pts, image.time_base = written, 1 / rate
                out.mux(vout.encode(image))
                written += 1
            out.mux(vout.encode(None))  # flush
    if written == 0:
        raise ValueError('source decodes to no frame')
    return written
