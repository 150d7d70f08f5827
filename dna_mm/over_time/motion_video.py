"""A long video of the demo's motion classes whose class changes on a schedule: the known
timeline that ``tools/infer.py --over-time`` is shown and measured on (docs/inference.md).

Frames are the demo clips' (:mod:`.synthetic`) drawn at ``size`` instead of 32 pixels, every
length scaled by ``size / 32``, so that the demo model's ``Resize(32, 32)`` sees what it was
trained on: a red target square moving along its class's axis (or still) at one demo pixel a
frame, turning back at the borders, two smaller distractors bouncing in random directions,
Gaussian noise on a dark background. Motion is continuous across a class change (the target
only changes its axis). A 440 Hz tone can go with it (``tone``), to show that audio is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..synthetic.motion_clips import _AXES, CLASSES

#: the demo's target colour, RGB
TARGET_RGB = (230.0, 40.0, 40.0)


def mux_tone(container, sound, sent: int, until: float, amplitude: float = 0.2) -> int:
    """Mux a 440 Hz tone into the mono audio stream ``sound`` of the PyAV ``container``, in blocks
    of 1024 samples in the stream's own sample format (``fltp`` or ``s16``), from sample ``sent``
    until ``until`` samples are out; returns how many are."""
    import av

    rate, fmt = sound.rate, sound.codec_context.format.name
    while sent < until:
        samples = (amplitude * np.sin(2 * np.pi * 440 * (sent + np.arange(1024)) / rate)).astype(np.float32)
        if fmt.startswith('s16'):
            samples = (samples * 32767).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(samples[None], format=fmt, layout='mono')
        frame.sample_rate, frame.pts = rate, sent
        container.mux(sound.encode(frame))
        sent += 1024
    return sent


def motion_frames(
    schedule: Sequence[tuple[str, int]], size: int = 256, seed: int = 0
) -> Iterator[np.ndarray]:
    """``[size, size, 3]`` uint8 RGB frames: for each ``(class, frames)`` of ``schedule``, that
    many frames of that class (module docstring)."""
    rng = np.random.default_rng(seed)
    s = size / 32
    k = int(round(8 * s))  # the demo's target side
    pos = rng.uniform(0, size - k, 2)  # (y, x)
    sign = rng.choice((-1.0, 1.0), 2)
    d_size = (rng.integers(4, 7, 2) * s).astype(int)
    d_pos = rng.uniform(0, size - d_size.max(), (2, 2))
    angle = rng.uniform(0, 2 * np.pi, 2)
    d_vel = np.stack([np.sin(angle), np.cos(angle)], 1) * rng.uniform(0.6, 1.5, (2, 1)) * s
    d_col = rng.uniform(90, 200, (2, 3))
    d_col[:, 0] = np.minimum(d_col[:, 0], 120)  # never as red as the target
    for name, frames in schedule:
        axis = np.asarray(_AXES[name], dtype=np.float64)
        for _ in range(frames):
            img = np.full((size, size, 3), 20.0, np.float32)
            y, x = (int(round(v)) for v in pos)
            img[y : y + k, x : x + k] = TARGET_RGB
            for j in range(2):
                a, b = (int(v) for v in d_pos[j])
                img[a : a + d_size[j], b : b + d_size[j]] = d_col[j]
            img += rng.normal(0, 8, img.shape).astype(np.float32)
            yield np.clip(img, 0, 255).astype(np.uint8)
            step = pos + sign * axis * s
            for d in range(2):  # turn back at the borders
                if axis[d] and not 0 <= step[d] <= size - k:
                    sign[d] = -sign[d]
            pos = np.clip(pos + sign * axis * s, 0, size - k)
            d_pos += d_vel
            for j in range(2):
                for d in range(2):
                    if not 0 <= d_pos[j, d] <= size - d_size[j]:
                        d_vel[j, d] = -d_vel[j, d]
                        d_pos[j, d] = np.clip(d_pos[j, d], 0, size - d_size[j])


def cycle_schedule(seconds: float, change: float, fps: int, start: int = 0) -> list[tuple[str, int]]:
    """``(class, frames)`` for ``seconds`` of video, the class changing every ``change``
    seconds, cycling through :data:`~.synthetic.CLASSES` from the ``start``-th."""
    total, each = int(round(seconds * fps)), int(round(change * fps))
    out, done, c = [], 0, start
    while done < total:
        n = min(each, total - done)
        out.append((CLASSES[c % len(CLASSES)], n))
        done, c = done + n, c + 1
    return out


def write_motion_video(
    path: Path,
    schedule: Sequence[tuple[str, int]],
    fps: int = 25,
    size: int = 256,
    tone: bool = True,
    seed: int = 0,
) -> Path:
    """Encode :func:`motion_frames` to ``path`` (H.264, CRF 23), with an AAC tone as long as the
    video when ``tone``; returns ``path``."""
    import av

    rate = 16000
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), 'w') as container:
        video = container.add_stream('libx264', rate=fps)
        video.width = video.height = size
        video.pix_fmt, video.options = 'yuv420p', {'preset': 'veryfast', 'crf': '23'}
        audio = container.add_stream('aac', rate=rate) if tone else None
        if audio is not None:
            audio.layout = 'mono'
        sent = 0
        for i, img in enumerate(motion_frames(schedule, size, seed)):
            container.mux(video.encode(av.VideoFrame.from_ndarray(img, format='rgb24')))
            if audio is not None:
                sent = mux_tone(container, audio, sent, (i + 1) * rate / fps)
        container.mux(video.encode())
        if audio is not None:
            container.mux(audio.encode())
    return path
