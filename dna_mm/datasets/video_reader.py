"""A video reader that decodes only what a clip needs: PyAV, from the keyframe before each frame.

:class:`KeyframeReader` answers what MMAction2's decoding steps ask of decord's ``VideoReader``
(``len``, ``get_avg_fps``, ``get_batch``) for less CPU time (docs/data_throughput.md). Its frame
``i`` is, exactly, the ``i``-th frame of :func:`frames_in_sequence`: the frames FFmpeg's
decoder puts out when the file is decoded from the start (docs/datasets/decoding.md). It
numbers them without decoding, by the presentation timestamps (pts) of the packets, read from
the container when it opens (packets an edit list hides are not frames; nor are those before
the first keyframe of a cut stream that the decoder does not put out). For frame indices in
increasing order, with ``key(t)`` the last keyframe at or before pts ``t`` (the fast path)::

    seek to key(t)   if t is behind the decoder or key(t) is ahead of it,
    decode forward to the frame of pts t, converting only that frame to RGB (at ``size``),

so each frame costs the frames from the nearest keyframe, as with decord. Seeking is checked,
never trusted: the demuxer must land at or before the keyframe in decode order (AVI and
MPEG-TS index decode timestamps: with B-frames the keyframe is sought by its dts), the frame at
the keyframe's pts must come out as a key frame, no frame from it on may be damaged (FFmpeg
conceals damage from what it decoded before), and the frame of pts ``t`` must come out (none
later first). A file that fails a check, or whose pts cannot number its frames (DivX packed
B-frames, repeated pts), is read by the exact path from then on: decode from the start, no
seek, and count the frames (a clip costs every frame up to its last one, and the start again
for an index below the previous one); :attr:`KeyframeReader.fallback` says why.

At the stored size the pixels are those of PyAV's ``to_ndarray(format='rgb24')``; at a
decode-time ``size``, swscale's bilinear filter (area-aware when it shrinks) is within about one
grey level of decord's filter graph. Display rotation is applied as decord applies it (``size``
is in display orientation). A file that cannot be read is a :class:`~dna_mm.errors.DataError`
naming it and what is wrong (empty, not a video, an MP4 without its index, no video stream,
truncated, packets without timestamps, a frame that does not decode, over ``time_limit``).
"""

from __future__ import annotations

import bisect
import io
import itertools
import math
import os
import struct
import time
from contextlib import contextmanager
from typing import Iterator, Optional, Union

import numpy as np

from ..errors import DataError

#: seconds that opening a file, or one ``get_batch``, may take before it is a DataError
TIME_LIMIT = 60.0
#: the start code of an MPEG-4 Part 2 picture (VOP), and a size below which a packet can only
#: be a not-coded one: DivX packed B-frames put one after each packet holding two pictures
VOP_START, N_VOP_SIZE = b'\x00\x00\x01\xb6', 24

Source = Union[str, io.IOBase]


class _NotExact(Exception):
    """Why seeking cannot give this file's frames exactly (the reader then decodes in sequence)."""


class _Deadline:
    """``check()`` raises a :class:`DataError` once ``limit`` seconds have passed since ``start``."""

    def __init__(self, name: str, limit: Optional[float]) -> None:
        self.name, self.limit, self.end = name, limit, None

    def start(self, what: str) -> None:
        self.what = what
        self.end = None if self.limit is None else time.monotonic() + self.limit

    def check(self) -> None:
        if self.end is not None and time.monotonic() > self.end:
            raise DataError(f'{self.name}: {self.what} took more than {self.limit:g} s (time_limit)')


def _byte_size(source: Source) -> Optional[int]:
    if isinstance(source, (str, os.PathLike)):
        return os.path.getsize(source)
    if isinstance(source, io.BytesIO):
        return source.getbuffer().nbytes
    return None


def _top_level_boxes(source: Source, limit: int = 1024) -> list[bytes]:
    """Types of the top-level ISO-BMFF boxes of ``source`` (8-byte headers, 64-bit sizes)."""
    f = open(source, 'rb') if isinstance(source, (str, os.PathLike)) else source
    try:
        f.seek(0, io.SEEK_END)
        end, offset, boxes = f.tell(), 0, []
        while offset + 8 <= end and len(boxes) < limit:
            f.seek(offset)
            size, kind = struct.unpack('>I4s', f.read(8))
            if size == 1:
                size = struct.unpack('>Q', f.read(8))[0]
            elif size == 0:
                size = end - offset
            if size < 8:
                break
            boxes.append(kind)
            offset += size
        return boxes
    finally:
        if f is not source:
            f.close()
        else:
            f.seek(0)


def _riff_sizes(source: Source) -> Optional[tuple[int, int]]:
    """``(bytes its RIFF header states, bytes there are)`` of a RIFF file (AVI), else ``None``."""
    f = open(source, 'rb') if isinstance(source, (str, os.PathLike)) else source
    try:
        head = f.read(12)
        f.seek(0, io.SEEK_END)
        size = f.tell()
    finally:
        f.close() if f is not source else f.seek(0)
    if len(head) < 12 or head[:4] != b'RIFF':
        return None
    return struct.unpack('<I', head[4:8])[0] + 8, size


def _why_unopenable(source: Source, err: Exception) -> str:
    """What is wrong with a file FFmpeg cannot open."""
    reason = getattr(err, 'strerror', None) or str(err)
    try:
        boxes, riff = _top_level_boxes(source), _riff_sizes(source)
    except (OSError, struct.error):
        boxes, riff = [], None
    if boxes[:1] == [b'ftyp'] and b'moov' not in boxes:
        return (
            'an MP4 / MOV file without its index (no moov box): cut off while it was written or '
            f'copied (FFmpeg: {reason})'
        )
    if riff is not None and riff[0] > riff[1]:
        return f'truncated: its RIFF header states {riff[0]} bytes, the file has {riff[1]} (FFmpeg: {reason})'
    return f'not a video file FFmpeg can read (FFmpeg: {reason})'


@contextmanager
def _ffmpeg_errors(
    where: str = '', what: str = 'damaged frame data', error: type[Exception] = DataError
) -> Iterator[None]:
    """FFmpeg's error in the block as one ``error``: ``'{where}{what} (FFmpeg: {reason})'`` (a
    :class:`DataError` naming the file, as ``where`` does, or :class:`_NotExact`)."""
    import av

    try:
        yield
    except av.FFmpegError as err:
        raise error(f'{where}{what} (FFmpeg: {err.strerror or err})') from None


def open_video(source: Source, name: str):
    """``av.open(source)`` for reading, its first video stream; FFmpeg's errors become a
    :class:`DataError` naming the file (``name``) and what is wrong. Returns ``(container,
    stream)``. (No FFmpeg ``timeout``: its interrupt callback takes the GIL on every read, about
    7 % of a small MPEG-4 AVI clip's decoding; FFmpeg bounds its probing by size.)"""
    import av

    if _byte_size(source) == 0:
        raise DataError(f'{name}: empty file (0 bytes)')
    try:
        container = av.open(source, metadata_errors='ignore')
    except (av.FFmpegError, UnicodeDecodeError) as err:
        raise DataError(f'{name}: {_why_unopenable(source, err)}') from None
    if not container.streams.video:
        kinds = ', '.join(s.type for s in container.streams) or 'none'
        container.close()
        raise DataError(f'{name}: no video stream (streams: {kinds})')
    return container, container.streams.video[0]


def _decode(packet) -> list:
    """The frames of one packet; FFmpeg's error as :class:`_NotExact`."""
    with _ffmpeg_errors(error=_NotExact):
        return packet.decode()


def _declared_seconds(stream) -> Optional[float]:
    """The video stream's own duration as its header states it (Matroska: the ``DURATION`` tag)."""
    if stream.duration is not None and stream.time_base:
        return float(stream.duration * stream.time_base)
    text = stream.metadata.get('DURATION') or stream.metadata.get('duration')
    try:
        h, m, s = text.split(':')
        return int(h) * 3600 + int(m) * 60 + float(s)
    except (AttributeError, ValueError):
        return None


def frames_in_sequence(source: Source, name: str = '<video>') -> tuple[list[Optional[int]], list[np.ndarray]]:
    """Every frame of the first video stream decoded from the start, no seek, in the order the
    decoder puts them out (presentation order): ``(pts, [H, W, 3] uint8 RGB frames)`` at the
    stored size, turned upright by the display rotation as FFmpeg shows them (:func:`upright_rgb`),
    with one decoding thread (FFmpeg conceals damaged data differently with slice or frame
    threads); the reference :class:`KeyframeReader` is held to. The pts increase along it,
    except where a container's timestamps are not its frames' (DivX packed B-frames): ordering
    by pts would then swap frames."""
    from av.video.reformatter import VideoReformatter

    container, stream = open_video(source, name)
    stream.thread_type, stream.thread_count = 'NONE', 1  # damaged data is concealed per thread layout
    with container, _ffmpeg_errors(f'{name}: '):
        convert = VideoReformatter()
        frames = [(f.pts, upright_rgb(f, None, convert)) for f in container.decode(stream)]
    return [f[0] for f in frames], [f[1] for f in frames]


def rotation_of(frame) -> int:
    """The display rotation of a decoded frame (0, 90, 180, 270: counter-clockwise, from its
    display matrix), as decord applies it."""
    return int(getattr(frame, 'rotation', 0) or 0) % 360


def upright_rgb(frame, size: Optional[tuple[int, int]] = None, reformatter=None) -> np.ndarray:
    """A decoded frame as ``[H, W, 3]`` uint8 RGB in display orientation, at ``size = (width,
    height)`` (display orientation; swscale's bilinear filter) or its own size (``None``).
    ``reformatter``: a PyAV ``VideoReformatter`` to reuse (one a reader)."""
    from av.video.reformatter import VideoReformatter

    rotation = rotation_of(frame)
    width, height = size or (None, None)
    if rotation in (90, 270) and size is not None:
        width, height = height, width  # scale in storage orientation, then rotate
    rgb = (
        (reformatter or VideoReformatter())
        .reformat(frame, width=width, height=height, format='rgb24', interpolation='BILINEAR')
        .to_ndarray()
    )
    # decord turns the picture by the display matrix: counter-clockwise by `rotation`
    return np.ascontiguousarray(np.rot90(rgb, rotation // 90)) if rotation else rgb


class KeyframeReader:
    """Random access to the frames of the first video stream of ``source``.

    Args:
        source: A path or a binary file object (a ``BytesIO`` of the file's bytes).
        size: ``(width, height)`` of the returned frames in display orientation (swscale's
            bilinear filter), or ``None`` for the stored size.
        num_threads: FFmpeg decoding threads (1: one core per dataloader worker).
        name: What errors call the video (its path).
        time_limit: Seconds that opening the file, and each :meth:`get_batch`, may take before
            a :class:`DataError` (``None``: no limit).

    Attributes:
        fallback: ``None`` while frames are read by seeking; once a check failed, why, and
            frames are read by decoding in sequence.
    """

    def __init__(
        self,
        source: Source,
        size: Optional[tuple[int, int]] = None,
        num_threads: int = 1,
        name: str = '<video>',
        time_limit: Optional[float] = TIME_LIMIT,
    ) -> None:
        from av.video.reformatter import VideoReformatter

        self.name, self.size, self.num_threads = name, size, num_threads
        self.fallback: Optional[str] = None
        self._source = source
        self._deadline = _Deadline(name, time_limit)
        self._deadline.start('opening and indexing it')
        self._open()
        self._index()
        self._next = None  # frame index the decoder puts out next (None: unknown, seek first)
        self._count = None  # in sequence: frames put out since the file was opened (None: reopen)
        self._floor = -math.inf  # pts from which a damaged frame means seeking is not exact
        self._by_dts = False  # this demuxer's seek lands on a keyframe's dts (AVI), learnt once
        self._reformatter = VideoReformatter()

    def _open(self) -> None:
        if isinstance(self._source, io.IOBase):
            self._source.seek(0)
        self._container, self._stream = open_video(self._source, self.name)
        self._stream.thread_count = self.num_threads
        self._stream.thread_type = 'NONE' if self.num_threads == 1 else 'AUTO'
        self._frames: Iterator = self._container.decode(self._stream)  # since the last seek / open

    def _index(self) -> None:
        """Demux every packet (no decoding): the frames' pts, the keyframes, the decode order."""
        pts, keys, position, dts, count, pictures = [], [], {}, {}, 0, 0
        mpeg4, packed, previous = self._stream.codec_context.name == 'mpeg4', False, None
        with _ffmpeg_errors(f'{self.name}: ', 'unreadable container data'):
            for packet in self._container.demux(self._stream):
                size, t = packet.size, packet.pts
                if size == 0 and t is None and packet.dts is None:
                    continue  # the demuxer's end-of-stream packet
                count += 1
                if count % 64 == 0:
                    self._deadline.check()
                if mpeg4 and size < N_VOP_SIZE and not packed and previous is not None:
                    packed = bytes(previous).count(VOP_START) > 1  # a placeholder after two pictures
                previous = packet
                if size == 0:
                    continue  # an empty chunk (a dropped frame): no picture
                if t is None:
                    raise DataError(f'{self.name}: a packet without a presentation timestamp (not indexable)')
                pictures += 1
                position[t] = pictures  # decode order
                if not packet.is_discard:  # an edit list leaves it out: decoded, never shown
                    pts.append(t)
                if packet.is_keyframe:
                    keys.append(t)
                    dts[t] = packet.dts
        self._deadline.check()
        if not pts:
            raise DataError(f'{self.name}: the video stream holds no frame')
        listed = self._stream.frames
        if listed > count:
            raise DataError(
                f'{self.name}: truncated (or damaged): its header lists {listed} frames, the file '
                f'holds {count}'
            )
        if previous.is_corrupt:  # read only in part
            raise DataError(f'{self.name}: truncated: the file ends inside its last frame\'s data')
        declared = None if listed else _declared_seconds(self._stream)  # no frame count: the duration
        rate = self._stream.average_rate or self._stream.guessed_rate if declared else None
        if declared and rate and self._stream.time_base:
            found = float((max(position) - min(position)) * self._stream.time_base) + 1 / float(rate)
            if declared - found > max(2 / float(rate), 0.02 * declared):  # 2 frames, 2 %
                raise DataError(
                    f'{self.name}: truncated: its header states {declared:.2f} s of video, the file '
                    f'holds {found:.2f} s'
                )
        self._keys = sorted(keys)  # pts of the keyframes
        first_key = min(keys, key=position.get) if keys else None  # in decode order
        if first_key is None or min(pts) < first_key:  # a stream cut before a keyframe
            pts = self._decodable(pts, first_key)
        self._pts = sorted(pts)  # frame index -> pts
        self._position, self._dts = position, dts  # pts -> decode order; keyframe pts -> dts
        self._first = min(position, key=position.get)  # pts of the first packet in decode order
        if packed:
            self.fallback = (
                'DivX packed B-frames (two pictures in one AVI chunk): the chunks\' timestamps are not '
                'their frames\''
            )
        elif len(position) < pictures:
            self.fallback = 'repeated presentation timestamps'

    def _decodable(self, pts: list[int], first_key: Optional[int]) -> list[int]:
        """``pts`` without the frames before ``first_key`` (the first keyframe in decode order)
        that the decoder does not put out: a stream cut without re-encoding starts with frames
        whose references were cut away (decoded from the start up to that keyframe, once)."""
        came_out = set()
        self._container.close()
        self._open()
        with _ffmpeg_errors(f'{self.name}: '):
            for frame in self._frames:
                self._deadline.check()
                came_out.add(frame.pts)
                if first_key is not None and frame.pts is not None and frame.pts >= first_key:
                    break
        return [t for t in pts if (first_key is not None and t >= first_key) or t in came_out]

    def __len__(self) -> int:
        return len(self._pts)

    @property
    def stored_size(self) -> tuple[int, int]:
        """``(width, height)`` of the frames as stored (before rotation or ``size``)."""
        return self._stream.codec_context.width, self._stream.codec_context.height

    def close(self) -> None:
        self._container.close()

    def get_avg_fps(self) -> float:
        rate = self._stream.average_rate or self._stream.guessed_rate
        return float(rate) if rate else 30.0

    def _rgb(self, frame) -> np.ndarray:
        """One decoded frame as ``[H, W, 3]`` uint8 RGB, at ``size`` in display orientation."""
        return upright_rgb(frame, self.size, self._reformatter)

    def _seek(self, key: int) -> None:
        """Seek so that the demuxer's next packet is the keyframe of pts ``key`` or one before it
        in decode order (by its pts, or its dts where the container indexes dts)."""
        want, dts = self._position[key], self._dts.get(key)
        targets = [key] if dts is None or dts >= key else [dts, key] if self._by_dts else [key, dts]
        for target in targets:
            self._container.seek(target, stream=self._stream, backward=True)  # flushes the decoder
            packets = self._container.demux(self._stream)
            first = next((p for p in packets if p.size), None)
            if first is not None and self._position.get(first.pts, want + 1) <= want:
                self._by_dts = target != key
                self._frames = itertools.chain(_decode(first), self._container.decode(self._stream))
                return
        raise _NotExact(f'seeking to the keyframe of pts {key} lands after it')

    def _read(self, target: int, key: Optional[int] = None):
        """The next decoded frame of pts ``target``; with ``key``, the frame of pts ``key`` on the
        way must be a key frame."""
        floor = self._floor
        with _ffmpeg_errors(error=_NotExact):
            for n, frame in enumerate(self._frames):  # the decoder's frames since the last seek
                if n % 16 == 15:
                    self._deadline.check()
                pts = frame.pts
                if pts is None:
                    raise _NotExact('a decoded frame without a timestamp')
                if key is not None and pts >= key:
                    if pts != key or not frame.key_frame:
                        raise _NotExact(
                            f'decoding from the keyframe of pts {key} gives first a frame of pts {pts} '
                            f'({"a" if frame.key_frame else "not a"} key frame)'
                        )
                    key = None
                if pts >= floor and frame.is_corrupt:  # concealed: from what came before
                    raise _NotExact(f'damaged frame data at pts {pts}: concealed from the frames before it')
                if pts == target:
                    return frame
                if pts > target:
                    raise _NotExact(f'the frame of pts {target} does not come out (pts {pts} first)')
        raise _NotExact(f'the stream ends before the frame of pts {target}')

    def _by_seeking(self, index: int):
        target = self._pts[index]
        before = bisect.bisect_right(self._keys, target)
        key = self._keys[before - 1] if before else None  # None: a stream opening mid-GOP
        # seek unless the decoder is on the way: behind the target, no keyframe in between
        if (
            self._next is None
            or index < self._next
            or (key is not None and bisect.bisect_left(self._pts, key) > self._next)  # a keyframe between
        ):
            self._seek(self._first if key is None else key)
            # frames before the keyframe may lack references (open GOP): their damage is expected
            self._floor = -math.inf if key is None else key
        else:
            key = None  # already on the way: no keyframe passes before the target
        shown = key is not None and self._pts[bisect.bisect_left(self._pts, key) % len(self._pts)] == key
        return self._read(target, key if shown else None)  # an edit list may hide the keyframe

    def _in_sequence(self, index: int):
        """The ``index``-th frame the decoder puts out from the start of the file."""
        if self._count is None or index < self._count:
            self._container.close()
            self._open()  # from the start, no seek
            self._count = 0
        with _ffmpeg_errors(f'{self.name}: frame {index} of {len(self)}: '):
            for frame in self._frames:
                self._count += 1
                if self._count % 16 == 0:
                    self._deadline.check()
                if self._count > index:
                    return frame
        raise DataError(f'{self.name}: frame {index} of {len(self)}: the decoder puts out only {self._count}')

    def _decode(self, index: int) -> np.ndarray:
        """Frame ``index``: by seeking while the checks pass, else decoded in sequence."""
        if self.fallback is None:
            try:
                frame = self._by_seeking(index)
                self._next = index + 1
                return self._rgb(frame)
            except _NotExact as why:
                self.fallback = str(why)
        return self._rgb(self._in_sequence(index))

    def get_batch(self, indices) -> np.ndarray:
        """Frames ``indices`` (increasing order is fastest), ``[T, H, W, 3]`` uint8 RGB."""
        indices = [int(i) for i in np.asarray(indices).reshape(-1)]
        for i in indices:
            if not 0 <= i < len(self):
                raise DataError(f'{self.name}: frame index {i} outside [0, {len(self)})')
        self._deadline.start(f'decoding frames {indices}')
        return np.stack([self._decode(i) for i in indices])
