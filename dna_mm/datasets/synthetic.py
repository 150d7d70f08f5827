"""The embedded demo dataset: small mp4 clips (MPEG-4 Part 2, written by OpenCV, read by decord)
where a target's motion defines the class, among moving clutter, the situation DnA is meant for.

Each ``size × size`` clip of ``num_frames`` frames shows a red target square that stays put or
moves at constant speed along its class's axis (:data:`CLASSES`; the direction is random),
``num_distractors`` grey / coloured squares bouncing off the borders (passing over the target at
times) and Gaussian noise on a dark background. The classes are balanced in each split.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

CLASSES = ('still', 'horizontal', 'vertical', 'diagonal')
#: motion axes of each class; the sign of each axis is drawn per clip
_AXES = {'still': (0, 0), 'horizontal': (0, 1), 'vertical': (1, 0), 'diagonal': (1, 1)}


@dataclass(frozen=True)
class MotionDatasetSpec:
    """Generation parameters (part of the cache key)."""

    train_per_class: int = 96
    test_per_class: int = 16
    num_frames: int = 16
    size: int = 32
    target_size: int = 8
    speed: float = 1.0
    num_distractors: int = 2
    noise_std: float = 8.0
    fps: int = 8
    seed: int = 0
    version: int = 2


def _clip(rng: np.random.Generator, label: int, spec: MotionDatasetSpec) -> np.ndarray:
    """``[T, S, S, 3]`` uint8 BGR frames of one clip of class ``label``."""
    t, s, k = spec.num_frames, spec.size, spec.target_size
    ay, ax = _AXES[CLASSES[label]]
    dy, dx = ay * rng.choice((-1, 1)), ax * rng.choice((-1, 1))
    travel = spec.speed * (t - 1)
    lo, hi = 0.0, s - k - 1.0

    def start(d: int) -> float:  # leave room to travel along the motion axis
        if d > 0:
            return rng.uniform(lo, max(lo, hi - travel))
        if d < 0:
            return rng.uniform(min(hi, lo + travel), hi)
        return rng.uniform(lo, hi)

    ty, tx = start(dy), start(dx)
    d_pos = rng.uniform(0, s - 5, size=(spec.num_distractors, 2))
    angles = rng.uniform(0, 2 * np.pi, size=spec.num_distractors)
    d_vel = np.stack([np.sin(angles), np.cos(angles)], 1) * rng.uniform(0.6, 1.5, (spec.num_distractors, 1))
    d_col = rng.uniform(90, 200, size=(spec.num_distractors, 3))
    d_col[:, 2] = np.minimum(d_col[:, 2], 120)  # distractors never as red as the target
    d_size = rng.integers(4, 7, size=spec.num_distractors)
    frames = np.full((t, s, s, 3), 20.0, np.float32)
    for i, f in enumerate(frames):  # f: a view of frame i
        y, x = int(round(ty + dy * spec.speed * i)), int(round(tx + dx * spec.speed * i))
        f[y : y + k, x : x + k] = (40.0, 40.0, 230.0)  # BGR red
        for j in range(spec.num_distractors):
            p = d_pos[j] + d_vel[j] * i
            p = np.abs(np.mod(p, 2 * (s - d_size[j])) - (s - d_size[j]))  # bounce
            a, b = int(p[0]), int(p[1])
            f[a : a + d_size[j], b : b + d_size[j]] = d_col[j]
        f += rng.normal(0, spec.noise_std, size=f.shape)
    return np.clip(frames, 0, 255).astype(np.uint8)


def _write_mp4(path: Path, frames: np.ndarray, fps: int) -> None:
    import cv2

    h, w = frames.shape[1:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), fps, (w, h))
    if not writer.isOpened():
        raise RuntimeError(f'OpenCV cannot write mp4 ({path}); is opencv-python installed?')
    for frame in frames:
        writer.write(frame)
    writer.release()


def ensure_generated(
    root: str | os.PathLike, spec: Any, classes: tuple, write: Callable[[Path, np.random.Generator], None]
) -> Path:
    """``write(root, rng)`` (``rng`` seeded with ``spec.seed``) unless ``root/meta.json`` records
    ``spec`` (a dataclass) and ``classes``, then that record, last: it marks a complete set."""
    root, meta = Path(root), dict(asdict(spec), classes=list(classes))
    if not (root / 'meta.json').is_file() or json.loads((root / 'meta.json').read_text()) != meta:
        write(root, np.random.default_rng(spec.seed))
        (root / 'meta.json').write_text(json.dumps(meta, indent=1))
    return root


def ensure_motion_dataset(root: str | os.PathLike, spec: MotionDatasetSpec = MotionDatasetSpec()) -> Path:
    """Write ``videos/*.mp4``, ``train.txt`` / ``test.txt`` (MMAction2 lists, paths relative to
    ``root/videos``) and ``classes.txt`` under ``root`` unless :func:`ensure_generated` finds
    them made with ``spec``; returns ``root``."""

    def write(root: Path, rng: np.random.Generator) -> None:
        (root / 'videos').mkdir(parents=True, exist_ok=True)
        for split, per_class in (('train', spec.train_per_class), ('test', spec.test_per_class)):
            lines = []
            for label, name in enumerate(CLASSES):
                for i in range(per_class):
                    rel = f'{split}_{name}_{i:04d}.mp4'
                    _write_mp4(root / 'videos' / rel, _clip(rng, label, spec), spec.fps)
                    lines.append(f'{rel} {label}')
            order = rng.permutation(len(lines))
            (root / f'{split}.txt').write_text(''.join(lines[j] + '\n' for j in order))
        (root / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')

    return ensure_generated(root, spec, CLASSES, write)
