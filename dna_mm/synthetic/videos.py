"""Generated videos for the data benchmarks and tests, encoded by :func:`write_video`; the frames
imitate camera footage closely enough for codec timings (flat frames code far faster):
:func:`camera_clip` (preparation benchmark and tests), :func:`panning_clip` (data-throughput
benchmark), :func:`box_clip` (person-crop tests), :func:`camera_move_clip` (custom-set tests and
the walk-through of docs/datasets/custom.md: a camera panning, tilting or zooming over a still
picture, classes that depend on direction); :func:`pack_bframes` rewrites an MPEG-4 Part 2 AVI
as DivX 5 and XviD write B-frames (the data-throughput benchmark's NTU-like files).
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator, Optional

import numpy as np

from ..datasets.video_reader import VOP_START

#: libx264's frame threads: fixed, for files that are the same bytes on every machine and every
#: run (with FFmpeg's default threading, x264's output differs with the cores it is given)
X264_THREADS = 4
#: x264's switch for the same output on every CPU: its assembly takes other approximations on
#: other processors (an AMD EPYC and an Intel Xeon wrote different files from the same frames)
X264_CPU_INDEPENDENT = 'cpu-independent=1'


def write_video(
    path: Path,
    frames: Iterable[np.ndarray],
    fps: int = 30,
    codec: str = 'mpeg4',
    bit_rate: Optional[int] = None,
    keyint: Optional[int] = None,
    b_frames: Optional[int] = None,
) -> Path:
    """Encode ``[H, W, 3]`` uint8 RGB frames (all one size) to ``path`` with PyAV's FFmpeg;
    returns ``path``. ``codec``: ``mpeg4`` (MPEG-4 Part 2 as NTU RGB+D ships, at ``bit_rate``
    bit/s, FFmpeg's default when ``None``), ``libx264`` (CRF 23, preset veryfast, as Kinetics
    and dna_mm's preparation tools), or any other FFmpeg encoder PyAV has (``mjpeg``,
    ``libvpx-vp9``, ...) with its defaults. ``keyint``: keyframe interval (``None``: the encoder's, 12
    for mpeg4, 250 for libx264). ``b_frames``: B-frames between references (``None``: the
    encoder's, none for mpeg4, 3 for libx264)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), 'w') as container:
        stream = None
        for image in frames:
            if stream is None:
                stream = container.add_stream(codec, rate=Fraction(fps))
                pix_fmt = 'yuvj420p' if codec == 'mjpeg' else 'yuv420p'  # MJPEG: full range
                stream.height, stream.width, stream.pix_fmt = *image.shape[:2], pix_fmt
                options = {}
                if codec == 'libx264':
                    options = {'preset': 'veryfast', 'crf': '23', 'x264-params': X264_CPU_INDEPENDENT}
                if bit_rate:
                    stream.bit_rate = bit_rate
                if b_frames is not None:
                    stream.codec_context.max_b_frames = b_frames
                if keyint is not None:
                    stream.codec_context.gop_size = keyint
                    if codec == 'libx264':
                        options.update(keyint_min=str(keyint), sc_threshold='0')
                stream.options = options
                if codec == 'libx264':  # and on its threads: the same file on every machine
                    context = stream.codec_context
                    context.thread_count, context.thread_type = X264_THREADS, 'FRAME'
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format='rgb24')))
        if stream is not None:
            container.mux(stream.encode(None))
    return path


def _vop_type(data: bytes) -> int:
    """The coding type of the first picture (VOP) in MPEG-4 Part 2 ``data``: 0 I, 1 P, 2 B."""
    start = data.find(VOP_START)
    return data[start + 4] >> 6 if start >= 0 else -1


def _not_coded(b_vop: bytes, increment_bits: int) -> bytes:
    """A not-coded P picture (N-VOP) with the timing of ``b_vop``: the placeholder DivX writes
    after a packed pair (ISO/IEC 14496-2 6.2.5: coding type, modulo time base, marker, time
    increment, marker, ``vop_coded = 0``, stuffing to the byte)."""
    bits = ''.join(f'{byte:08b}' for byte in b_vop[4:16])
    end = bits.index('0', 2) + 1  # modulo_time_base: ones, then a zero
    header = '01' + bits[2:end] + '1' + bits[end + 1 : end + 1 + increment_bits] + '1' + '0'
    header += '0' + '1' * (-(len(header) + 1) % 8)
    return VOP_START + int(header, 2).to_bytes(len(header) // 8, 'big')


def pack_bframes(src: Path, dst: Path) -> Path:
    """Rewrite the MPEG-4 Part 2 AVI ``src`` (one B-frame between references) with its B-frames
    packed, as DivX 5 and XviD write them: each B-frame goes into the chunk of the reference
    before it in decode order, an N-VOP fills its own chunk, and the user data carries DivX's
    packed flag (``DivX503b1393p``). FFmpeg decodes it frame for frame as ``src``; the AVI's
    timestamps (one per chunk) are then no longer the frames'."""
    import av

    user_data = b'\x00\x00\x01\xb2DivX503b1393p'
    with av.open(str(src)) as source:
        stream = source.streams.video[0]
        rate, extradata = stream.average_rate, stream.codec_context.extradata
        width, height = stream.codec_context.width, stream.codec_context.height
        packets = [(bytes(p), p.is_keyframe) for p in source.demux(stream) if p.size]
    increment_bits = max(1, (int(rate.numerator) - 1).bit_length())  # vop_time_increment_resolution = fps
    chunks, i = [], 0
    while i < len(packets):
        data, key = packets[i]
        if key:  # the packed flag in the headers before each keyframe's picture
            start = data.find(VOP_START)
            data = data[:start] + user_data + data[start:]
        if _vop_type(data) in (0, 1) and i + 1 < len(packets) and _vop_type(packets[i + 1][0]) == 2:
            chunks += [
                (data + packets[i + 1][0], key),
                (_not_coded(packets[i + 1][0], increment_bits), False),
            ]
            i += 2
        else:
            chunks.append((data, key))
            i += 1
    with av.open(str(dst), 'w') as target:
        out = target.add_stream('mpeg4', rate=rate)
        out.width, out.height, out.codec_context.codec_tag = width, height, 'DX50'
        out.codec_context.extradata = extradata
        for n, (data, key) in enumerate(chunks):
            packet = av.Packet(data)
            packet.pts = packet.dts = n
            packet.time_base, packet.is_keyframe, packet.stream = 1 / rate, key, out
            target.mux(packet)
    return dst


def _smooth_texture(rng: np.random.Generator, low: float, high: float, width: int, height: int) -> np.ndarray:
    """``[height, width, 3]`` float32: uniform values in ``[low, high)`` on a grid of about 24-pixel
    cells (at least 2 x 2), interpolated bicubically."""
    import cv2

    grid = rng.uniform(low, high, size=(max(2, height // 24), max(2, width // 24), 3))
    return cv2.resize(grid.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)


def camera_clip(width: int, height: int, frames: int, seed: int = 0) -> Iterator[np.ndarray]:
    """``frames`` RGB frames ``[height, width, 3]``: panned texture, moving boxes, sensor noise."""
    rng = np.random.default_rng(seed)
    pan = 2 * frames + 8  # the texture is wider than the frame by the pan's travel
    texture = _smooth_texture(rng, 0, 255, width + pan, height)
    texture += rng.normal(0, 12, size=texture.shape).astype(np.float32)  # fine detail
    noise = [rng.normal(0, 3, size=(height, width, 3)).astype(np.float32) for _ in range(4)]
    boxes = rng.uniform(0, 1, size=(3, 4))  # x, y, vx, vy as fractions
    colours = rng.uniform(40, 255, size=(3, 3))
    side = max(2, min(width, height) // 6)
    for t in range(frames):
        frame = texture[:, 2 * t : 2 * t + width] + noise[t % len(noise)]
        for (bx, by, vx, vy), colour in zip(boxes, colours, strict=True):
            x = int((bx + (vx - 0.5) * 0.02 * t) % 1 * (width - side))
            y = int((by + (vy - 0.5) * 0.02 * t) % 1 * (height - side))
            frame[y : y + side, x : x + side] = colour
        yield np.clip(frame, 0, 255).astype(np.uint8)


def panning_clip(width: int, height: int, frames: int = 90, seed: int = 0) -> Iterator[np.ndarray]:
    """``frames`` RGB frames ``[height, width, 3]``: a smooth random texture with mid frequencies
    panning 2 px down and 1 px sideways per frame, three coloured blobs moving on their own, and
    Gaussian noise (sigma 4), so the encoder has real motion and residuals to code."""
    rng = np.random.default_rng(seed)
    pad = 2 * frames + 8  # the background is larger than the frame by the pan's travel
    background = _smooth_texture(rng, 40, 215, width + pad, height + pad)
    yy, xx = np.mgrid[0 : height + pad, 0 : width + pad]
    background += 20 * np.sin(xx / 7.0)[..., None] * np.cos(yy / 11.0)[..., None]  # mid frequencies
    background = np.clip(background, 0, 255).astype(np.uint8)
    noise = [rng.normal(0, 4, size=(height, width, 3)).astype(np.int16) for _ in range(3)]
    blobs = rng.uniform(0.1, 0.9, size=(3, 2)) * (height, width)
    speed = rng.uniform(-1, 1, size=(3, 2)) * max(width, height) / 200
    colours = rng.integers(0, 256, size=(3, 3))
    side = max(4, min(width, height) // 5)
    for t in range(frames):
        frame = background[2 * t : 2 * t + height, t : t + width].astype(np.int16)
        for (y, x), (vy, vx), c in zip(blobs, speed, colours, strict=True):
            cy, cx = int(y + vy * t) % height, int(x + vx * t) % width
            frame[cy : cy + side, cx : cx + side // 2] = c
        frame += noise[t % len(noise)]
        yield np.clip(frame, 0, 255).astype(np.uint8)


#: camera moves of :func:`camera_move_clip`: (x, y) travel in units of the margin, zoom sign
CAMERA_MOVES = {
    'pan left': (-1, 0, 0),
    'pan right': (1, 0, 0),
    'tilt up': (0, -1, 0),
    'tilt down': (0, 1, 0),
    'zoom in': (0, 0, 1),
    'zoom out': (0, 0, -1),
}


def still_picture(width: int, height: int, seed: int = 0) -> np.ndarray:
    """``[height, width, 3]`` uint8: a smooth random scene with edges and blobs at several scales,
    a stand-in for a photograph (detail everywhere, so every camera move shows)."""
    import cv2

    rng = np.random.default_rng(seed)
    picture = _smooth_texture(rng, 30, 225, width, height)
    for _ in range(12):  # objects: filled ellipses of random size and colour
        centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        axes = (
            int(rng.integers(width // 30 + 2, width // 6 + 3)),
            int(rng.integers(height // 30 + 2, height // 6 + 3)),
        )
        cv2.ellipse(
            picture, centre, axes, float(rng.uniform(0, 180)), 0, 360, rng.uniform(0, 255, 3).tolist(), -1
        )
    picture += rng.normal(0, 6, size=picture.shape).astype(np.float32)  # texture
    return np.clip(picture, 0, 255).astype(np.uint8)


def camera_move_clip(move: str, width: int, height: int, frames: int, seed: int = 0) -> Iterator[np.ndarray]:
    """``frames`` RGB frames ``[height, width, 3]`` of a camera moving over :func:`still_picture`:
    ``move`` one of :data:`CAMERA_MOVES` (a pan or tilt crosses a quarter of the frame, a zoom
    goes between the whole picture and its central 60 %)."""
    import cv2

    dx, dy, zoom = CAMERA_MOVES[move]
    margin_x, margin_y = width // 4, height // 4
    picture = still_picture(width + 2 * margin_x, height + 2 * margin_y, seed)
    for t in range(frames):
        f = t / max(1, frames - 1)  # 0 -> 1 over the clip
        if zoom:
            scale = 1 - 0.4 * (f if zoom > 0 else 1 - f)  # share of the picture in view
            w, h = int(picture.shape[1] * scale), int(picture.shape[0] * scale)
            x0, y0 = (picture.shape[1] - w) // 2, (picture.shape[0] - h) // 2
        else:
            w, h = width, height
            x0 = margin_x + int(round(dx * margin_x * (2 * f - 1)))
            y0 = margin_y + int(round(dy * margin_y * (2 * f - 1)))
        view = picture[y0 : y0 + h, x0 : x0 + w]
        yield cv2.resize(view, (width, height), interpolation=cv2.INTER_AREA)


def box_clip(width: int, height: int, frames: int, box: tuple[int, int, int, int]) -> Iterator[np.ndarray]:
    """Dark frames with the same white rectangle ``box = (x0, y0, x1, y1)`` (end exclusive) in each."""
    x0, y0, x1, y1 = box
    image = np.full((height, width, 3), 16, np.uint8)
    image[y0:y1, x0:x1] = 255
    for _ in range(frames):
        yield image
