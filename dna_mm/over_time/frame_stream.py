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

Damaged data does not end a file: as FFmpeg's own command line does, a packet that does not
decode is passed over and decoding goes on. A packet FFmpeg cannot decode, or that its demuxer
or decoder marks corrupt, starts a :class:`Gap`, and so does data a Matroska or AVI demuxer
reads on past without a word (:data:`SKIPPED_BYTES` between two packets); the frames the decoder
puts out after it are left out until a key frame decoded from a packet after the damaged one
(those between are reconstructed from damaged or missing references: they decode, but show wrong
pixels; a key frame decoded before the damage and put out after it, late by the decoder's
reordering, does not end it: the frames decoded after it may refer to the damaged ones), whose
frame is the first after the gap and carries it (:attr:`StreamFrame.gap`);
:attr:`FrameStream.gaps` lists them. Damage that no key frame follows ends the frames where it
starts (:attr:`FrameStream.damaged_to_end` says so; the last packet of a file cut off in the
middle of it is such damage). A read error of the file itself (FFmpeg's demuxer, which
resynchronises on damaged data of the usual containers, gives up) ends the frames where it
happened, the decoder's buffered frames put out first: :attr:`FrameStream.ended` says where.
Frames are decoded on one thread, so that the same file gives the same gaps on every run. A file
that opens but gives no frame, or that cannot be opened at all, is an
:class:`UnreadableVideoError`.
"""

from __future__ import annotations

import io
import select
import sys
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np

from ..datasets.video_reader import _declared_seconds, _ffmpeg_errors, open_video, rotation_of, upright_rgb
from ..errors import DataError

#: seconds without data after which a live stream counts as ended
LIVE_TIMEOUT = 10.0
#: frames a file's frames are handed on late, beyond the decoder's reordering (module docstring)
HOLD_BACK = 2
#: containers whose FFmpeg demuxer passes over data it cannot read as packets and reads on
SKIPPING_DEMUXERS = ('matroska,webm', 'avi')
#: bytes between two packets of such a container beyond its own headers (a few dozen): passed over
SKIPPED_BYTES = 1024
#: bytes of an AVI chunk's header (its id and size): its index gives where a chunk starts, its
#: packet where the data does
AVI_CHUNK_HEADER = 8
#: packets decoded and not yet put out that a stream keeps track of (far more than any reordering)
MAX_PENDING = 1024
#: FFmpeg's probing of a live stream before the first frame (its defaults: 5 MB, 5 s)
LIVE_PROBE = {'probesize': '65536', 'analyzeduration': '500000'}
#: ``(display width, display height) -> (width, height)`` to convert frames at, or ``None``
Resize = Callable[[tuple[int, int]], Optional[tuple[int, int]]]


class UnreadableVideoError(DataError):
    """A video file that cannot be read at all: not a video, no video stream, no frame that
    decodes (named, with what is wrong). A broken input, not a mistake in the arguments:
    ``tools/infer.py`` reports it as a video it cannot decode (status 1)."""


@dataclass(frozen=True)
class Gap:
    """Seconds of a file whose frames are left out: damaged data and the frames the decoder
    reconstructs from it up to the next key frame (module docstring).

    Attributes:
        start: The end of the last good frame before it (0 at the start of the file).
        end: The time of the first good frame after it.
        why: What the first damaged data in it was, as FFmpeg said (``damaged frame data
            (FFmpeg: Invalid data found when processing input)``).
    """

    start: float
    end: float
    why: str

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


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
    stream's timestamp, ``None`` if it had none), ``gap`` (the :class:`Gap` just before it, else
    ``None``) and :meth:`rgb`. After a gap, ``index`` counts the frames the gap's seconds hold at
    the average rate."""

    __slots__ = ('index', 'time', 'pts', 'gap', '_frame', '_size', '_rgb')

    def __init__(
        self, index: int, time: float, pts: Optional[int], frame, size, gap: Optional[Gap] = None
    ) -> None:
        self.index, self.time, self.pts, self.gap = index, time, pts, gap
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

    A file that cannot be opened, or gives no frame, is an :class:`UnreadableVideoError` naming
    it (a live stream's: a :class:`~dna_mm.errors.DataError`); damaged data on the way is a
    :class:`Gap` in :attr:`gaps`, or the end of the frames when no key frame follows it
    (:attr:`damaged_to_end`); a read error of the file ends its frames too (:attr:`ended`).
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
        self.ended: Optional[str] = None  # why the frames ended early: a live stream's end, a read error
        self.gaps: list[Gap] = []  # damaged data left out, in time order
        self.damaged_to_end: Optional[str] = None  # damage no key frame follows: where, and what
        self._timeout = timeout
        self._pipe = _stdin(timeout) if source == '-' else None
        if self.live:
            self._container, self._stream = open_live(str(source), timeout, self._pipe)
        else:
            try:
                self._container, self._stream = open_video(source, self.name)
            except DataError as err:
                raise UnreadableVideoError(str(err)) from None
        # one decoding thread: with frame threads FFmpeg reports a damaged packet's error some packets
        # later, and conceals it by timing, so gaps and frames would differ from run to run
        self._stream.thread_type, self._stream.thread_count = 'NONE', 1
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
        self._first: Optional[float] = None  # the stream's time of the first frame (or damaged packet)
        self._last_good: Optional[float] = None  # seconds of the last intact frame decoded
        self._last_out: Optional[float] = None  # seconds of the last frame handed on
        self._seen = 0.0  # seconds: the end of the last frame or packet read
        self._damage: Optional[str] = None  # while frames are left out: what the damaged data was
        self._unhealed: Optional[str] = None  # damage since the last frame handed on: its gap's why
        self._read_error: Optional[str] = None  # a file's read error (FFmpeg's words)
        self._packets = 0  # video packets demuxed so far: the decoding order
        self._order: dict[int, int] = {}  # pts -> its packet's place in the decoding order, until decoded
        self._damaged_packet = 0  # the place of the last damaged packet in the decoding order
        # a file's frames are handed on HOLD_BACK (+ the decoder's reordering) frames late: damage found
        # in a packet drops them too (decoded from the packets before it, where the damage may begin)
        reorder = int(getattr(self._stream.codec_context, 'has_b_frames', 0) or 0)
        self._hold = 0 if self.live else HOLD_BACK + reorder
        self._held: deque = deque()  # (frame, seconds) decoded intact, not yet handed on

    @property
    def read_to(self) -> float:
        """Seconds to which the data was read: the end of the last frame decoded or damaged
        packet, whether handed on or left out."""
        return self._seen

    def __enter__(self) -> FrameStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._container.close()

    def _clock(self, seconds: Optional[float], count: int) -> float:
        """Seconds from the first frame of a frame (or packet) at ``seconds`` of the stream's
        clock; without a timestamp, ``count`` frames at the average rate."""
        if self._first is None:
            self._first = 0.0 if seconds is None else seconds
        return count / self.info.fps if seconds is None else seconds - self._first

    def _damaged(self, why: str, packet=None) -> None:
        """Damaged data (``why``, FFmpeg's words) in ``packet``, or in the frame just decoded:
        frames are left out from here until a key frame, and those held back with them (module
        docstring)."""
        if packet is not None and packet.pts is not None and packet.time_base:
            at = self._clock(float(packet.pts * packet.time_base), 0)
            self._seen = max(self._seen, at + 1 / self.info.fps)
        self._damaged_packet = self._packets
        self._damage = self._damage or why
        self._unhealed = self._unhealed or why
        self._held.clear()

    def _recovers(self, frame, seconds: float, packet: Optional[int]) -> bool:
        """Whether ``frame`` (at ``seconds``, decoded from the ``packet``-th packet, ``None`` when
        not known) ends the damage: an intact key frame decoded after the last damaged packet and
        shown after the last intact frame (the decoder's references are whole again from it)."""
        key = frame.key_frame or getattr(frame.pict_type, 'name', '') == 'I'
        later = self._last_good is None or seconds > self._last_good
        decoded_after = packet is None or packet > self._damaged_packet
        return key and not frame.is_corrupt and later and decoded_after

    def _packet_of(self, frame) -> Optional[int]:
        """The place in the decoding order of the packet ``frame`` was decoded from (by its pts;
        ``None`` without one)."""
        return None if frame.pts is None else self._order.pop(frame.pts, None)

    def _gap_start(self) -> float:
        """Seconds: the end of the last frame handed on (0 before the first)."""
        return 0.0 if self._last_out is None else self._last_out + 1 / self.info.fps

    def _decoded(self) -> Iterator:
        """The video stream's decoded frames, the ``extra`` stream's packets handed on; a packet
        that does not decode, or that the demuxer marks corrupt, is noted (:meth:`_damaged`) and
        decoding goes on; a file's read error ends it (the decoder's frames put out first)."""
        import av

        streams = [self._stream] + ([self.audio_stream] if self.audio_stream is not None else [])
        # a demuxer that reads on past damaged data (Matroska, AVI) passes it over without a word:
        # every stream's packets are read, in file order, and a stretch between them is the damage
        skips = not self.live and self._container.format.name in SKIPPING_DEMUXERS
        packets = self._container.demux() if skips else self._container.demux(*streams)
        end = None  # the file offset where the last packet read ends
        counted = self._avi_frame_numbers() if skips else {}
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.FFmpegError as err:
                if self.live:
                    raise  # a live stream's end (_live_decoded)
                self._read_error = f'FFmpeg: {err.strerror or err}'
                yield from self._flush()
                return
            if skips and packet.pos is not None and packet.pos >= 0:
                if end is not None and packet.pos - end > SKIPPED_BYTES:
                    why = f"damaged data ({packet.pos - end} bytes FFmpeg's demuxer passed over)"
                    self._damaged(why, packet)
                end = packet.pos + packet.size
            if packet.stream is not self._stream:
                if self._on_packet is not None and packet.stream in streams and packet.dts is not None:
                    self._on_packet(packet)
                continue
            self._packets += 1
            number = counted.get(packet.pos)
            if number is not None and packet.dts is not None and number != packet.dts:
                shift = number - packet.dts  # frames the demuxer passed over uncounted
                packet.dts, packet.pts = number, None if packet.pts is None else packet.pts + shift
            if packet.pts is not None:
                self._order[packet.pts] = self._packets
                if len(self._order) > MAX_PENDING:  # pts no frame came out for (damaged packets)
                    del self._order[next(iter(self._order))]
            if packet.is_corrupt:
                self._damaged("damaged data (a packet FFmpeg's demuxer marks corrupt)", packet)
            try:
                frames = packet.decode()
            except av.FFmpegError as err:
                self._damaged(f'damaged frame data (FFmpeg: {err.strerror or err})', packet)
                continue
            yield from frames

    def _avi_frame_numbers(self) -> dict[int, int]:
        """An AVI's frame numbers by the file offset of their packets, from its index: its demuxer
        numbers the frames as it reads them, and goes on counting from the last one it read after
        data it passed over (the later frames' times would come early by the frames lost)."""
        if self._container.format.name != 'avi':
            return {}
        return {e.pos + AVI_CHUNK_HEADER: e.timestamp for e in self._stream.index_entries}

    def _flush(self) -> list:
        """The frames the decoder still holds (after a read error ended the packets)."""
        import av

        try:
            frames = self._stream.decode(None)
        except av.FFmpegError:
            return []
        for frame in frames:
            frame.time_base = self._stream.time_base  # a flush names none: no time without it
        return frames

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
        sized, size, index = False, None, -1  # index: of the last frame handed on
        with _ffmpeg_errors(f'{self.name}: '):
            for frame in self._live_decoded() if self.live else self._decoded():
                seconds = self._clock(frame.time, index + 1 + len(self._held))
                self._seen = max(self._seen, seconds + 1 / self.info.fps)
                packet = self._packet_of(frame)
                if frame.is_corrupt:
                    self._damaged("damaged frame data (a frame FFmpeg's decoder marks corrupt)")
                if self._damage is not None and not self._recovers(frame, seconds, packet):
                    continue  # reconstructed from damaged references: left out
                self._damage, self._last_good = None, seconds
                if not sized:  # the conversion size, from the first intact frame
                    w, h = frame.width, frame.height
                    shown = (h, w) if rotation_of(frame) in (90, 270) else (w, h)
                    sized, size = True, self._resize(shown) if self._resize is not None else None
                self._held.append((frame, seconds))
                while len(self._held) > self._hold:
                    index = yield from self._hand_on(index, size)
            while self._held:
                index = yield from self._hand_on(index, size)
        self._end(index >= 0)

    def _hand_on(self, index: int, size) -> Iterator[StreamFrame]:
        """Hand on the oldest held frame (the one after frame ``index``), with the gap before it
        if there is one; returns its index."""
        frame, seconds = self._held.popleft()
        gap = None
        if self._unhealed is not None:
            start = self._gap_start()
            gap = Gap(start, max(start, seconds), self._unhealed)
            self.gaps.append(gap)
            self._unhealed = None
            index += round(gap.seconds * self.info.fps)  # the frames the gap holds
        self._last_out = seconds
        yield StreamFrame(index + 1, seconds, frame.pts, frame, size, gap)
        return index + 1

    def _end(self, any_frame: bool) -> None:
        """At the end of the frames: damage no key frame followed, a read error; no frame at
        all is an :class:`UnreadableVideoError` (a live stream's: a ``DataError``)."""
        if self._unhealed is not None:  # no intact key frame came after it
            self.damaged_to_end = f'{self._unhealed} from {self._gap_start():.1f} s to the end of the file'
        if self._read_error is not None:
            self.ended = f'the file cannot be read past {self._seen:.1f} s ({self._read_error})'
        if any_frame:
            return
        error = DataError if self.live else UnreadableVideoError
        why = self._unhealed or (self._read_error and f'a read error ({self._read_error})')
        if why:
            raise error(f'{self.name}: no frame decodes: {why}')
        raise error(f'{self.name}: the video stream holds no frame')
