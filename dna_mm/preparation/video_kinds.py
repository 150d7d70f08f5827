"""The kinds of video files real datasets hold, written small by PyAV's bundled encoders, and
broken files of each way a download or a copy goes wrong: the inputs the readers and the
preparation tools are checked on (``tools/data/check_decoding.py --kinds``,
``tests/preparation/test_decoding_matrix.py``, docs/datasets/decoding.md).

Kinetics from YouTube is H.264 mp4 (with B-frames, open GOPs, fragmented or faststart), VP9
webm, AV1 in mp4 / webm; phones add HEVC, variable frame rate, 10-bit and audio before video;
older action datasets are MPEG-4 Part 2 (XviD) AVIs with B-frames, MJPEG, MPEG-2 program
streams; clips cut without re-encoding carry an MP4 edit list. PyAV's wheel has no XviD
encoder: FFmpeg's own MPEG-4 Part 2 encoder with B-frames and the ``XVID`` fourcc writes the same
syntax, and :func:`~dna_mm.synthetic.videos.pack_bframes` rewrites its output into DivX 5
/ XviD's "packed bitstream" (a B-frame in the chunk of the reference before it).

Writing VP9 needs PyAV loaded before decord in the process (the test suite's ``conftest`` imports
it first): decord loads its own, older libvpx into the global symbol scope, and PyAV's libvpx-vp9
encoder then fails to open ("ABI version mismatch"). Decoding is not affected (FFmpeg's own VP9
decoder).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from dna_mm.errors import ConfigError

from ..synthetic.videos import X264_CPU_INDEPENDENT, pack_bframes, panning_clip

X264 = {'preset': 'veryfast', 'crf': '23', 'x264-params': X264_CPU_INDEPENDENT}
#: SVT-AV1's fastest preset on one core (its default takes a thread pool sized by the cores)
SVT_AV1 = {'preset': '12', 'g': '8', 'svtav1-params': 'lp=1'}


@dataclass(frozen=True)
class VideoKind:
    """One kind of file: ``file`` name (its extension picks the container), encoder ``codec``
    and its ``options``, ``pix_fmt``, size, frames; ``container`` options (movflags, ...);
    ``context`` codec-context attributes (``max_b_frames``, ``gop_size``); ``tag`` a fourcc;
    ``vfr``: irregular frame durations; ``audio_first``: an AAC stream before the video;
    ``cut``: copied without re-encoding from frame ``cut`` on (an MP4 edit list); ``packed``:
    B-frames packed as DivX 5 / XviD write them
    (:func:`~dna_mm.synthetic.videos.pack_bframes`)."""

    file: str
    codec: str
    options: dict = field(default_factory=dict)
    pix_fmt: str = 'yuv420p'
    size: tuple[int, int] = (96, 64)
    frames: int = 40
    container: dict = field(default_factory=dict)
    context: dict = field(default_factory=dict)
    tag: Optional[str] = None
    vfr: bool = False
    audio_first: bool = False
    cut: Optional[int] = None
    packed: bool = False


def _h264(**options) -> dict:
    return {**X264, 'g': '8', **options}


#: name -> kind; the first ones are what the common datasets hold
KINDS: dict[str, VideoKind] = {
    'h264_bframes': VideoKind('h264_bframes.mp4', 'libx264', _h264()),  # x264's 3 B-frames
    'h264_open_gop': VideoKind(
        'h264_open_gop.mp4',
        'libx264',
        {**X264, 'x264-params': f'keyint=8:min-keyint=8:scenecut=0:open-gop=1:{X264_CPU_INDEPENDENT}'},
    ),
    'h264_mkv': VideoKind('h264.mkv', 'libx264', _h264()),
    'h264_mkv_no_cues': VideoKind('h264_no_cues.mkv', 'libx264', _h264(), container={'live': '1'}),
    'h264_fragmented': VideoKind(
        'h264_fragmented.mp4',
        'libx264',
        _h264(),
        container={'movflags': 'frag_keyframe+empty_moov+default_base_moof'},
    ),
    'h264_faststart': VideoKind(
        'h264_faststart.mp4', 'libx264', _h264(), container={'movflags': 'faststart'}
    ),
    'h264_odd_size': VideoKind('h264_odd_size.mp4', 'libx264', _h264(), size=(70, 46)),
    'h264_yuv444': VideoKind('h264_yuv444.mp4', 'libx264', _h264(), pix_fmt='yuv444p', size=(71, 45)),
    'h264_10bit': VideoKind('h264_10bit.mp4', 'libx264', _h264(), pix_fmt='yuv420p10le'),
    'h264_vfr': VideoKind('h264_vfr.mp4', 'libx264', _h264(), vfr=True),
    'h264_audio_first': VideoKind('h264_audio_first.mp4', 'libx264', _h264(), audio_first=True),
    'h264_short': VideoKind('h264_short.mp4', 'libx264', _h264(), frames=3),
    'h264_edit_list': VideoKind('h264_edit_list.mp4', 'libx264', _h264(), cut=11),
    'h264_ts': VideoKind('h264.ts', 'libx264', _h264()),
    'hevc': VideoKind(
        'hevc.mp4', 'libx265', {'preset': 'ultrafast', 'x265-params': 'keyint=8:log-level=none'}
    ),
    'vp9_webm': VideoKind(
        'vp9.webm',
        'libvpx-vp9',
        {'deadline': 'realtime', 'cpu-used': '8', 'g': '8', 'auto-alt-ref': '1', 'lag-in-frames': '8'},
    ),
    'av1_mp4': VideoKind('av1.mp4', 'libsvtav1', SVT_AV1),
    'av1_webm': VideoKind('av1.webm', 'libsvtav1', SVT_AV1),
    'mpeg4_avi': VideoKind('mpeg4.avi', 'mpeg4', context={'gop_size': 12}),
    'mpeg4_bframes_avi': VideoKind(
        'xvid_bframes.avi', 'mpeg4', context={'gop_size': 12, 'max_b_frames': 2}, tag='XVID'
    ),
    'mpeg4_packed_avi': VideoKind(
        'divx_packed.avi', 'mpeg4', context={'gop_size': 12, 'max_b_frames': 1}, tag='DX50', packed=True
    ),
    'mjpeg_full_range': VideoKind('mjpeg.avi', 'mjpeg', pix_fmt='yuvj420p', size=(71, 45)),
    'mpeg2_ps': VideoKind('mpeg2.mpg', 'mpeg2video', context={'gop_size': 12, 'max_b_frames': 2}),
}

#: AV1 encoders PyAV's wheels may bundle, in the order tried
AV1_ENCODERS = ('libsvtav1', 'libaom-av1', 'librav1e')


def encoder(kind: VideoKind) -> Optional[str]:
    """The bundled encoder that writes ``kind`` (for AV1 the first of :data:`AV1_ENCODERS`
    present), or ``None`` if this PyAV has none."""
    import av

    names = AV1_ENCODERS if kind.codec in AV1_ENCODERS else (kind.codec,)
    return next((name for name in names if name in av.codecs_available), None)


def _vfr_timestamps(frames: int, seed: int = 0) -> list[int]:
    """Milliseconds: frame durations drawn from 20-60 ms (a phone's variable rate)."""
    steps = np.random.default_rng(seed).integers(20, 61, size=frames)
    return [int(t) for t in np.concatenate([[0], np.cumsum(steps[:-1])])]


def encode(kind: VideoKind, path: Path) -> Path:
    """Encode ``kind``'s frames to ``path`` (as it is before a cut or packing); returns ``path``."""
    import av

    codec = encoder(kind)
    if codec is None:
        raise RuntimeError(f'{kind.file}: PyAV has no {kind.codec} encoder')

    width, height = kind.size
    with av.open(str(path), 'w', options=dict(kind.container)) as container:
        audio = container.add_stream('aac', rate=16000) if kind.audio_first else None
        stream = container.add_stream(codec, rate=Fraction(30), options=dict(kind.options))
        stream.width, stream.height, stream.pix_fmt = width, height, kind.pix_fmt
        stream.codec_context.thread_count = 1  # a few frames: threads cost more than they give
        for name, value in kind.context.items():
            setattr(stream.codec_context, name, value)
        if kind.tag:
            stream.codec_context.codec_tag = kind.tag
        stamps = _vfr_timestamps(kind.frames) if kind.vfr else None
        if stamps:
            stream.codec_context.time_base = Fraction(1, 1000)
        if audio is not None:  # two seconds of silence, muxed before the first video packet
            samples = av.AudioFrame.from_ndarray(
                np.zeros((1, 32000), np.float32), format='fltp', layout='mono'
            )
            samples.sample_rate, samples.pts = 16000, 0
            for packet in [*audio.encode(samples), *audio.encode(None)]:
                container.mux(packet)
        for i, image in enumerate(panning_clip(width, height, kind.frames)):
            frame = av.VideoFrame.from_ndarray(image, format='rgb24')
            if stamps:
                frame.pts, frame.time_base = stamps[i], Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def copy_from(src: Path, dst: Path, start: int) -> Path:
    """Copy ``src``'s video packets without re-encoding from frame ``start`` on, as a cut with
    ``ffmpeg -ss T -c copy`` does: the packets from the keyframe before it are kept, timestamps
    shifted so that frame ``start`` is at 0; the MP4 muxer writes the lead-in as an edit list
    (its frames are decoded, not shown)."""
    import av

    with av.open(str(src)) as source, av.open(str(dst), 'w') as target:
        stream = source.streams.video[0]
        out = target.add_stream_from_template(stream)
        packets = [p for p in source.demux(stream) if p.size]
        shown = sorted(p.pts for p in packets)[start]
        begin = max(i for i, p in enumerate(packets) if p.is_keyframe and p.pts <= shown)
        for packet in packets[begin:]:
            packet.pts -= shown
            packet.dts = None if packet.dts is None else packet.dts - shown
            packet.stream = out
            target.mux(packet)
    return dst


def write_kind(name: str, folder: Path) -> Path:
    """Write kind ``name`` of :data:`KINDS` into ``folder``; returns its path. A
    ``RuntimeError`` if PyAV bundles no encoder for it."""
    kind = KINDS[name]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / kind.file
    if kind.cut is None and not kind.packed:
        return encode(kind, path)
    plain = encode(kind, folder / f'plain_{kind.file}')
    if kind.packed:
        pack_bframes(plain, path)
    else:
        copy_from(plain, path, kind.cut)
    plain.unlink()
    return path


def kind_names(asked: Sequence[str]) -> list[str]:
    """The kinds ``asked`` for (none: all of :data:`KINDS`); a
    :class:`~dna_mm.errors.ConfigError` naming an unknown one."""
    unknown = [k for k in asked if k not in KINDS]
    if unknown:
        raise ConfigError(f'unknown kind(s) {", ".join(unknown)}; known: {", ".join(KINDS)}')
    return list(asked) or list(KINDS)


def write_kinds(names: Sequence[str], folder: Path, echo: Callable[[str], object]) -> dict[str, Path]:
    """Write kinds ``names`` of :data:`KINDS` into ``folder``; a kind this PyAV has no encoder
    for is said with ``echo`` and left out. Returns name -> path."""
    written = {}
    for name in names:
        if encoder(KINDS[name]) is None:
            echo(f'{name}: not written, PyAV has no {KINDS[name].codec} encoder')
            continue
        written[name] = write_kind(name, folder)
    return written


#: broken file name -> what the readers must say is wrong (a regular expression)
BROKEN = {
    'moov_lost.mp4': 'an MP4 / MOV file without its index \\(no moov box\\)',
    'truncated.mp4': 'truncated \\(or damaged\\): its header lists 40 frames, the file holds \\d+',
    'truncated.mkv': 'truncated: its header states 1.33 s of video, the file holds',
    'truncated.avi': 'truncated \\(or damaged\\): its header lists 40 frames, the file holds \\d+',
    'cut_in_header.avi': 'truncated: its RIFF header states \\d+ bytes, the file has \\d+',
    'empty.mp4': 'empty file \\(0 bytes\\)',
    'audio_only.mp4': 'no video stream \\(streams: audio\\)',
    'garbage.mp4': 'not a video file FFmpeg can read',
    'text.avi': 'not a video file FFmpeg can read',
}


def write_broken(folder: Path) -> dict[str, Path]:
    """The files of :data:`BROKEN` in ``folder``: the start of whole files (a download or copy
    cut off), or written; returns name -> path."""
    import av

    made = {name: folder / name for name in BROKEN}
    for name, whole, kept in (
        ('moov_lost.mp4', 'h264_bframes', 0.5),  # the index (moov) is written last: lost
        ('truncated.mp4', 'h264_faststart', 0.5),  # the index first: frames lost
        ('truncated.mkv', 'h264_mkv', 0.5),
        ('truncated.avi', 'mpeg4_avi', 0.75),  # AVI's headers take 8 of these 11 kB
        ('cut_in_header.avi', 'mpeg4_avi', 0.25),
    ):
        data = write_kind(whole, folder / 'whole').read_bytes()
        made[name].write_bytes(data[: int(len(data) * kept)])
    made['empty.mp4'].write_bytes(b'')
    with av.open(str(made['audio_only.mp4']), 'w') as container:
        stream = container.add_stream('aac', rate=16000)
        samples = av.AudioFrame.from_ndarray(np.zeros((1, 16000), np.float32), format='fltp', layout='mono')
        samples.sample_rate, samples.pts = 16000, 0
        for packet in [*stream.encode(samples), *stream.encode(None)]:
            container.mux(packet)
    made['garbage.mp4'].write_bytes(np.random.default_rng(0).bytes(50_000))
    made['text.avi'].write_bytes(b'these are not the frames you are looking for\n' * 500)
    return made
