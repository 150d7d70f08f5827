"""The frames of a video one at a time, from the start, in the order FFmpeg's decoder puts them
out: the reader of long videos, whose memory does not grow with their length.

:class:`FrameStream` decodes in sequence, never seeks, and holds nothing once a frame is
handed on. A frame is a :class:`StreamFrame`: its index (frame ``i`` is frame ``i`` of
:class:`~dna_mm.datasets.video_reader.KeyframeReader` and of
:func:`~dna_mm.datasets.video_reader.frames_in_sequence`), its time in seconds from the first
frame (its own presentation timestamp, so a variable frame rate keeps its times), and its RGB
pixels, converted only when asked for (upright, as FFmpeg shows it, at the size ``resize``
chooses): a caller that uses one frame in 32 pays for the decoding of the others, not their
conversion.

The source may also be live (:func:`is_live`): ``-`` (a container such as MPEG-TS on standard
input), a URL FFmpeg reads (``udp://``, ``rtsp://``, ``http://``, ...) or a camera
(``/dev/video0``, Video4Linux2). A live stream has no length; it ends when its data ends (a pipe
closed, a server hanging up) or when no data came for ``timeout`` seconds (UDP never says it is
done): :attr:`FrameStream.ended` then says which.

Packets of the other streams (``extra='audio'``) are handed to ``on_packet`` as they come, for
a writer that copies them (:mod:`dna_mm.over_time.annotated_video`).
"""

from __future__ import annotations

import io
import select
import sys
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np

from ..datasets.video_reader import _declared_seconds, _ffmpeg_errors, open_video, rotation_of, upright_rgb
from ..errors import DataError

#: seconds without data after which a live stream counts as ended
LIVE_TIMEOUT = 10.0
#: FFmpeg's probing of a live stream before the first frame (its defaults: 5 MB, 5 s)
LIVE_PROBE = {'probesize': '65536', 'analyzeduration': '500000'}
#: ``(display width, display height) -> (width, height)`` to convert frames at, or ``None``
Resize = Callable[[tuple[int, int]], Optional[tuple[int, int]]]


@dataclass
class StreamInfo:
    """What the container says of its video stream, before any frame is decoded.

    Attributes:
        name: What messages call the video.
        fps: The average frame rate (FFmpeg's ``avg_frame_rate``, else its guess, else 30).
        duration: Seconds of video the header states, ``None`` when it does not (a stream).
        frames: Frames the header lists (0: not listed).
        time_base: The stream's time base (seconds per pts unit).
        audio: Whether the file also holds an audio stream.
        stream_duration: Seconds the video stream's own header states (not the container's,
            which an audio track may make longer), ``None`` when it states none.
    """

    name: str
    fps: float
    duration: Optional[float]
    frames: int
    time_base: float
    audio: bool
    stream_duration: Optional[float] = None


def is_live(source: str) -> bool:
    """Whether ``source`` is a stream rather than a file: ``-``, a URL, a ``/dev/`` device."""
    return source == '-' or '://' in source or source.startswith('/dev/')


class TimedPipe(io.RawIOBase):
    """A pipe whose reads end (an end of file, :attr:`timed_out` set) after ``timeout`` seconds
    without data: FFmpeg's own ``timeout`` interrupts its protocols' reads, not a Python file's."""

    def __init__(self, pipe, timeout: float) -> None:
        super().__init__()
        self.pipe, self.timeout, self.timed_out = pipe, timeout, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        ready, _, _ = select.select([self.pipe], [], [], self.timeout)
        if not ready:
            self.timed_out = True
            return 0
        return self.pipe.readinto(buffer)


def _stdin(timeout: float):
    """Standard input, unbuffered (a read returns what the pipe holds, not a full buffer), its
    reads timed (:class:`TimedPipe`) where it is a file descriptor."""
    raw = getattr(sys.stdin.buffer, 'raw', sys.stdin.buffer)
    try:
        raw.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return raw
    return TimedPipe(raw, timeout)


def no_data(timeout: float) -> str:
    """Why a live stream ended or did not open: ``timeout`` seconds went by without data."""
    return f'no data for {timeout:g} s (the timeout of a stream)'


def open_live(source: str, timeout: float = LIVE_TIMEOUT, pipe=None):
    """``(container, video stream)`` of a live ``source`` (:func:`is_live`; ``-`` is read from
    ``pipe``, default standard input); a stream FFmpeg cannot open is a :class:`DataError` naming
    it, and saying so when no data came in ``timeout`` seconds."""
    import av

    probe = dict(LIVE_PROBE)  # little probing: the first window comes without waiting seconds
    if source == '-' and pipe is None:
        pipe = _stdin(timeout)
    try:
        if pipe is not None:
            container = av.open(pipe, 'r', options=probe, timeout=timeout)
        elif source.startswith('/dev/'):
            container = av.open(source, 'r', format='v4l2', options=probe, timeout=timeout)
        else:
            container = av.open(source, 'r', options=probe, timeout=timeout)
    except (av.FFmpegError, OSError) as err:
        name = 'standard input' if source == '-' else source
        if isinstance(err, av.ExitError) or getattr(pipe, 'timed_out', False):  # FFmpeg's timeout, or ours
            raise DataError(f'{name}: {no_data(timeout)}') from None
        raise DataError(
            f'{name}: FFmpeg cannot open it as a stream ({getattr(err, "strerror", None) or err})'
        ) from None
    if not container.streams.video:
        container.close()
        raise DataError(f'{source}: no video stream')
    return container, container.streams.video[0]


class StreamFrame:
    """One decoded frame: ``index``, ``time`` (seconds from the first frame), ``pts`` (the
    stream's timestamp, ``None`` if it had none) and :meth:`rgb`."""

    __slots__ = ('index', 'time', 'pts', '_frame', '_size', '_rgb')

    def __init__(self, index: int, time: float, pts: Optional[int], frame, size) -> None:
        self.index, self.time, self.pts = index, time, pts
        self._frame, self._size, self._rgb = frame, size, None

    def rgb(self) -> np.ndarray:
        """``[H, W, 3]`` uint8 RGB, upright, at the stream's conversion size (converted once)."""
        if self._rgb is None:
            self._rgb = upright_rgb(self._frame, self._size)
            self._frame = None  # the decoder's buffer goes back as soon as the pixels are out
        return self._rgb


class FrameStream:
    """The frames of the first video stream of ``source``, in sequence (iterate once).

    Args:
        source: A video file.
        resize: Chooses the conversion size from the display size of the first frame (``None``:
            every frame at its own size).
        name: What errors call the video (default ``source``).
        extra: ``'audio'`` also demuxes the first audio stream and hands its packets to
            ``on_packet`` (the stream itself is :attr:`audio_stream`).
        on_packet: Called with each packet of the ``extra`` stream, in file order.

    A file that cannot be opened or decoded is a :class:`~dna_mm.errors.DataError` naming it.
    """

    def __init__(
        self,
        source: str,
        resize: Optional[Resize] = None,
        name: Optional[str] = None,
        extra: Optional[str] = None,
        on_packet: Optional[Callable] = None,
        timeout: float = LIVE_TIMEOUT,
    ) -> None:
        if extra not in (None, 'audio'):
            raise ValueError(f"FrameStream: extra must be None or 'audio', got {extra!r}")
        self.live = is_live(str(source))
        self.name = name or ('<stdin>' if source == '-' else str(source))
        self.ended: Optional[str] = None  # a live stream: why it ended
        self._timeout = timeout
        self._pipe = _stdin(timeout) if source == '-' else None
        if self.live:
            self._container, self._stream = open_live(str(source), timeout, self._pipe)
        else:
            self._container, self._stream = open_video(source, self.name)
        self._stream.thread_type = 'AUTO'  # frame threads: in sequence, order and pixels are exact
        audio = self._container.streams.audio
        self.audio_stream = audio[0] if extra == 'audio' and audio else None
        self._resize, self._on_packet = resize, on_packet
        rate = self._stream.average_rate or self._stream.guessed_rate
        duration = None
        if self._stream.duration is not None and self._stream.time_base:
            duration = float(self._stream.duration * self._stream.time_base)
        elif self._container.duration:
            duration = self._container.duration / 1e6  # AV_TIME_BASE
        self.info = StreamInfo(
            name=self.name,
            fps=float(rate) if rate else 30.0,
            duration=duration,
            frames=int(self._stream.frames or 0),
            time_base=float(self._stream.time_base or 0),
            audio=bool(audio),
            stream_duration=None if self.live else _declared_seconds(self._stream),
        )
        self.video_stream = self._stream

    def __enter__(self) -> FrameStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._container.close()

    def _decoded(self) -> Iterator:
        """The video stream's decoded frames, the ``extra`` stream's packets handed on."""
        streams = [self._stream] + ([self.audio_stream] if self.audio_stream is not None else [])
        for packet in self._container.demux(*streams):
            if packet.stream is self._stream:
                yield from packet.decode()
            elif self._on_packet is not None and packet.dts is not None:
                self._on_packet(packet)

    def _live_decoded(self) -> Iterator:
        """:meth:`_decoded` of a live stream: its end, or a read error (a timeout, a server
        gone), ends it, and :attr:`ended` says which."""
        import av

        try:
            yield from self._decoded()
            self.ended = 'the stream ended'
        except av.ExitError:  # FFmpeg's timeout
            self.ended = f'the stream stopped: {no_data(self._timeout)}'
        except av.FFmpegError as err:
            self.ended = f'the stream stopped: {err.strerror or err}'
        if getattr(self._pipe, 'timed_out', False):
            self.ended = f'the stream stopped: {no_data(self._timeout)}'

    def __iter__(self) -> Iterator[StreamFrame]:
        size, first, index = None, None, 0
        with _ffmpeg_errors(f'{self.name}: '):
            for frame in self._live_decoded() if self.live else self._decoded():
                seconds = frame.time
                if index == 0:
                    w, h = frame.width, frame.height
                    shown = (h, w) if rotation_of(frame) in (90, 270) else (w, h)
                    size = self._resize(shown) if self._resize is not None else None
                    first = seconds
                if seconds is None or first is None:  # no timestamps: the average rate
                    seconds, first = index / self.info.fps, 0.0
                yield StreamFrame(index, seconds - first, frame.pts, frame, size)
                index += 1
        if index == 0:
            raise DataError(f'{self.name}: the video stream holds no frame')
