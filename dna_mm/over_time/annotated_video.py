"""The annotated video: the input, frame for frame, with the model's predictions drawn on it.

:func:`write_annotated_video` decodes the input again in sequence (:class:`FrameStream`, at its
own size, upright), draws on every frame (:mod:`.overlay`) the top-k of the window whose cell
holds the frame (:func:`~.segments.cell_bounds`: the window nearest in time) and the strip of
the segments with a cursor, and encodes it with the input's frame timestamps: the same size
(shown size, upright; a small one enlarged, below), rate and length. H.264 (``libx264``, CRF
20) when PyAV's FFmpeg has it, MPEG-4 Part 2 otherwise. The first audio stream is copied packet
for packet when the output container takes its codec, else re-encoded to AAC; an input without
audio gives a video without.

A frame too small for the overlay to be readable on it (under 240 lines, or too narrow for its
longest line of text: :func:`~.overlay.enlargement`) is enlarged by the smallest whole factor
that makes it so, each pixel a square block (nearest neighbour: the frame is shown as it is,
only larger), before the overlay (and ``relevance``) is drawn at the enlarged size; said in one
line. An odd width or height (which 4:2:0 H.264 cannot hold) is padded by one pixel, repeating
the edge, and said so.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import ConfigError
from ..utils.files import atomic_path
from .frame_stream import FrameStream
from .overlay import Layout, annotate, enlargement, overlay_texts, strip_image
from .predictor import OverTime
from .segments import Segment, cell_bounds

_MP4_AUDIO = frozenset({'aac', 'mp3', 'ac3', 'eac3', 'alac', 'opus', 'flac', 'mp2'})
#: output suffix -> (FFmpeg's muxer, the audio codecs it takes as they are; None: any)
CONTAINERS = {
    '.mp4': ('mp4', _MP4_AUDIO),
    '.m4v': ('mp4', _MP4_AUDIO),
    '.mov': ('mov', _MP4_AUDIO | {'pcm_s16le', 'pcm_s24le', 'pcm_f32le'}),
    '.mkv': ('matroska', None),
}


def check_output(path: str) -> None:
    """A :class:`ConfigError` unless ``path`` ends in a suffix the writer takes."""
    if Path(path).suffix.lower() not in CONTAINERS:
        raise ConfigError(f'annotated video {path}: expected a {" / ".join(CONTAINERS)} file')


def _video_codec() -> str:
    import av

    try:
        av.codec.Codec('libx264', 'w')
        return 'libx264'
    except Exception:  # noqa: BLE001 (an FFmpeg build without x264)
        return 'mpeg4'


class _Writer:
    """The output container: the video stream opened at the first frame, audio copied or
    re-encoded, audio packets that come before the first frame held until then."""

    def __init__(self, path: Path, source: FrameStream, muxer: str, audio_ok: Optional[frozenset]) -> None:
        import av

        self.container = av.open(str(path), 'w', format=muxer)
        self.source, self.video, self.pending = source, None, []
        self.codec = _video_codec()
        self.audio, self.transcode = None, False
        template = source.audio_stream
        if template is not None:
            name = template.codec_context.name
            if audio_ok is None or name in audio_ok:
                self.audio = self.container.add_stream_from_template(template)
            else:
                self.transcode = True
                self.audio = self.container.add_stream(
                    'aac', rate=template.codec_context.sample_rate or 48000
                )
                self.audio.layout = 'stereo' if template.codec_context.channels >= 2 else 'mono'
        self.last_pts = None

    def open_video(self, width: int, height: int) -> None:
        src = self.source.video_stream
        rate = src.average_rate or src.guessed_rate or Fraction(30)
        self.video = self.container.add_stream(self.codec, rate=rate)
        self.video.width, self.video.height, self.video.pix_fmt = width, height, 'yuv420p'
        if self.codec == 'libx264':
            self.video.options = {'crf': '20', 'preset': 'veryfast'}
            if src.time_base:  # the input's clock: variable frame rates keep their timestamps
                self.video.codec_context.time_base = src.time_base
        self.time_base = self.video.codec_context.time_base
        for packet in self.pending:
            self.mux_audio(packet)
        self.pending = []

    def mux_audio(self, packet) -> None:
        if self.audio is None:
            return
        if self.video is None:  # the header is written with the first packet: every stream first
            self.pending.append(packet)
            return
        if self.transcode:
            for frame in packet.decode():
                frame.pts = None
                self.container.mux(self.audio.encode(frame))
        else:
            packet.stream = self.audio
            self.container.mux(packet)

    def encode(self, rgb: np.ndarray, seconds: float) -> None:
        import av

        frame = av.VideoFrame.from_ndarray(rgb, format='rgb24')
        pts = int(round(seconds / float(self.time_base)))
        if self.last_pts is not None and pts <= self.last_pts:
            pts = self.last_pts + 1  # two frames on one tick of the output clock
        frame.pts, frame.time_base, self.last_pts = pts, self.time_base, pts
        self.container.mux(self.video.encode(frame))

    def close(self) -> None:
        if self.video is not None:
            self.container.mux(self.video.encode(None))
        if self.audio is not None and self.transcode:
            self.container.mux(self.audio.encode(None))
        self.container.close()


def _enlarge(rgb: np.ndarray, factor: int) -> np.ndarray:
    """Each pixel of ``rgb`` a ``factor`` x ``factor`` block."""
    return rgb if factor == 1 else rgb.repeat(factor, axis=0).repeat(factor, axis=1)


def _even(rgb: np.ndarray) -> np.ndarray:
    h, w = rgb.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return rgb
    return np.pad(rgb, ((0, h % 2), (0, w % 2), (0, 0)), mode='edge')


def write_annotated_video(
    result: OverTime,
    segments: Sequence[Segment],
    out: str,
    topk: int = 3,
    names: Optional[Sequence[str]] = None,
    relevance: Optional[Callable[[int, int, tuple[int, int]], Optional[dict]]] = None,
    progress: Optional[Callable[[int], None]] = None,
) -> Path:
    """The annotated copy of ``result.video`` at ``out`` (module docstring); returns its path.

    Args:
        result: The windows (:meth:`OverTimePredictor.run`).
        segments: The segments the strip shows.
        out: ``.mp4``, ``.m4v``, ``.mov`` or ``.mkv``.
        topk: Classes listed on each frame.
        names: Class names (default ``class i``).
        relevance: ``(window, frame index, (w, h)) -> {branch: [H, W] map}`` or ``None``, for an
            overlay of where the model looks.
        progress: Called with each frame's index once it is written.
    """
    check_output(out)
    windows = result.windows
    bounds = cell_bounds([w.start for w in windows], [w.end for w in windows], result.duration)
    tops = [w.top(topk) for w in windows]
    texts = overlay_texts(tops, names, result.duration)
    layout, strip, padded, factor, size = None, None, False, 1, None
    muxer, audio_ok = CONTAINERS[Path(out).suffix.lower()]
    with atomic_path(out) as tmp:
        holder: dict = {}
        source = FrameStream(
            result.video, None, extra='audio', on_packet=lambda p: holder['writer'].mux_audio(p)
        )
        writer = holder['writer'] = _Writer(tmp, source, muxer, audio_ok)
        try:
            for frame in source:
                rgb = frame.rgb()
                if writer.video is None:
                    size = rgb.shape[1], rgb.shape[0]
                    factor = enlargement(*size, texts)
                    rgb = _enlarge(rgb, factor)
                    even = _even(rgb)
                    padded = even.shape != rgb.shape
                    layout = Layout.for_frame(rgb.shape[1], rgb.shape[0], texts)
                    strip = strip_image(rgb.shape[1], layout, segments, result.duration, names)
                    writer.open_video(even.shape[1], even.shape[0])
                else:
                    rgb = _enlarge(rgb, factor)
                k = int(np.clip(np.searchsorted(bounds, frame.time, side='right') - 1, 0, len(windows) - 1))
                maps = relevance(k, frame.index, (rgb.shape[1], rgb.shape[0])) if relevance else None
                drawn = annotate(rgb, frame.time, tops[k], strip, result.duration, layout, names, maps)
                writer.encode(_even(drawn), frame.time)
                if progress is not None:
                    progress(frame.index)
        finally:
            writer.close()
            source.close()
    if factor > 1:
        w, h = size
        big = f'{w * factor + (w * factor) % 2}x{h * factor + (h * factor) % 2}'
        print(
            f'note: {result.video} is {w}x{h}, too small for a readable overlay: {out} is {big}, '
            f'enlarged {factor}x (each pixel a {factor}x{factor} block)'
            + (', padded by one pixel to an even size' if padded else ''),
            flush=True,
        )
    elif padded:
        print(f'note: {result.video} has an odd width or height; {out} is padded by one pixel', flush=True)
    return Path(out)
