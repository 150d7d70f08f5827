"""Generated source videos for the preparation tests and benchmarks (no dataset needed).

:func:`camera_clip` imitates camera footage closely enough for encoder and decoder timings: a
smooth random texture panned by a few pixels per frame, objects moving over it and light
sensor noise (flat synthetic frames encode and decode far faster than real ones).
:func:`write_video` encodes any frames with PyAV: ``mpeg4`` in ``.avi`` as NTU RGB+D ships,
``libx264`` in ``.mp4`` as Kinetics downloads and Smarthome.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator, Optional

import av
import numpy as np


def write_video(
    path: Path,
    frames: Iterable[np.ndarray],
    fps: int = 30,
    codec: str = 'mpeg4',
    bit_rate: Optional[int] = None,
) -> int:
    """Encode ``[H, W, 3]`` uint8 RGB frames (all one size) to ``path``; returns the frame count."""
    count = 0
    with av.open(str(path), 'w') as container:
        stream = None
        for image in frames:
            if stream is None:
                stream = container.add_stream(codec, rate=Fraction(fps))
                stream.height, stream.width = image.shape[:2]
                stream.pix_fmt = 'yuv420p'
                if bit_rate:
                    stream.bit_rate = bit_rate
                if codec == 'libx264':
                    stream.options = {'preset': 'veryfast', 'crf': '23'}
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format='rgb24')))
            count += 1
        if stream is not None:
            container.mux(stream.encode(None))
    return count


def camera_clip(width: int, height: int, frames: int, seed: int = 0) -> Iterator[np.ndarray]:
    """``frames`` RGB frames ``[height, width, 3]``: panned texture, moving boxes, sensor noise."""
    import cv2

    rng = np.random.default_rng(seed)
    pan = 2 * frames + 8  # the texture is wider than the frame by the pan's travel
    coarse = rng.uniform(0, 255, size=(max(2, height // 24), max(2, (width + pan) // 24), 3)).astype(
        np.float32
    )
    texture = cv2.resize(coarse, (width + pan, height), interpolation=cv2.INTER_CUBIC)
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


def box_clip(width: int, height: int, frames: int, box: tuple[int, int, int, int]) -> Iterator[np.ndarray]:
    """Dark frames with the same white rectangle ``box = (x0, y0, x1, y1)`` (end exclusive) in each."""
    x0, y0, x1, y1 = box
    image = np.full((height, width, 3), 16, np.uint8)
    image[y0:y1, x0:x1] = 255
    for _ in range(frames):
        yield image
