"""The embedded demo dataset: small mp4 clips (MPEG-4 Part 2, written by OpenCV, read by decord)
where a target's motion defines the class, among moving clutter, the situation DnA is meant for.

Each ``size × size`` clip of ``num_frames`` frames shows a red target square that stays put or
moves at constant speed along its class's axis (:data:`CLASSES`; the direction is random),
``num_distractors`` grey / coloured squares bouncing off the borders (passing over the target at
times) and Gaussian noise on a dark background. The classes are balanced in each split.

The generator knows where everything is: ``boxes.json`` holds, per clip, the target's box and
each distractor's box in every frame (the ground truth of :mod:`dna_mm.analysis.target_mass`).
How much the distractors resemble the target is a choice (:class:`MotionDatasetSpec`): its
colour, its size, its kind of motion. The defaults give the demo set, frame for frame the same
as before these options existed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..errors import ConfigError

CLASSES = ('still', 'horizontal', 'vertical', 'diagonal')
#: motion axes of each class; the sign of each axis is drawn per clip
_AXES = {'still': (0, 0), 'horizontal': (0, 1), 'vertical': (1, 0), 'diagonal': (1, 1)}
#: the target's colour (BGR, as OpenCV writes it)
TARGET_BGR = (40.0, 40.0, 230.0)
#: how a distractor may resemble the target: ``'demo'`` (the demo set's draw) or ``'target'``
SIMILARITY = {
    'distractor_color': ('demo', 'target'),
    'distractor_size': ('demo', 'target'),
    'distractor_motion': ('demo', 'target'),
}


@dataclass(frozen=True)
class MotionDatasetSpec:
    """Generation parameters (part of the cache key).

    The distractors' likeness to the target (``'demo'``: as in the demo set; ``'target'``: as the
    target): ``distractor_color`` grey / coloured but never as red as the target, or the
    target's red; ``distractor_size`` 4–6 pixels, or ``target_size``; ``distractor_motion``
    random direction at 0.6–1.5 px / frame, or constant ``speed`` along a class axis drawn per
    distractor (``still`` included), as a target of that class moves. All three ``'target'``
    makes a distractor a second target: the class is then ambiguous by construction. Every
    distractor bounces off the borders.
    """

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
    distractor_color: str = 'demo'
    distractor_size: str = 'demo'
    distractor_motion: str = 'demo'

    def __post_init__(self) -> None:
        for name, choices in SIMILARITY.items():
            if getattr(self, name) not in choices:
                raise ValueError(
                    f'MotionDatasetSpec.{name}: expected one of {choices}, got {getattr(self, name)!r}'
                )
        if self.num_distractors < 0:
            raise ValueError(f'MotionDatasetSpec.num_distractors: expected >= 0, got {self.num_distractors}')


def _clip(rng: np.random.Generator, label: int, spec: MotionDatasetSpec) -> tuple[np.ndarray, dict]:
    """``[T, S, S, 3]`` uint8 BGR frames of one clip of class ``label`` and its boxes:
    ``{'target': [T, 4], 'distractors': [D, T, 4]}``, integer pixel boxes ``(x0, y0, x1, y1)``
    (end exclusive) of what was drawn in each frame (a distractor drawn later covers the target
    where they overlap). The demo set's draws come first and in the same order whatever the
    options, so the defaults reproduce it exactly."""
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

    n = spec.num_distractors
    ty, tx = start(dy), start(dx)
    d_pos = rng.uniform(0, s - 5, size=(n, 2))
    angles = rng.uniform(0, 2 * np.pi, size=n)
    d_vel = np.stack([np.sin(angles), np.cos(angles)], 1) * rng.uniform(0.6, 1.5, (n, 1))
    d_col = rng.uniform(90, 200, size=(n, 3))
    d_col[:, 2] = np.minimum(d_col[:, 2], 120)  # distractors never as red as the target
    d_size = rng.integers(4, 7, size=n)
    if spec.distractor_color == 'target':
        d_col[:] = TARGET_BGR
    if spec.distractor_size == 'target':
        d_size[:] = k
    if spec.distractor_motion == 'target':  # [n, 2] (dy, dx): a class axis, random signs, the target's speed
        axes = np.array([_AXES[c] for c in CLASSES])[rng.integers(0, len(CLASSES), size=n)]
        d_vel = axes * rng.choice((-1, 1), size=(n, 2)) * spec.speed
    frames = np.full((t, s, s, 3), 20.0, np.float32)
    target = np.zeros((t, 4), np.int64)
    distractors = np.zeros((n, t, 4), np.int64)
    for i, f in enumerate(frames):  # f: a view of frame i
        y, x = int(round(ty + dy * spec.speed * i)), int(round(tx + dx * spec.speed * i))
        f[y : y + k, x : x + k] = TARGET_BGR
        target[i] = (x, y, x + k, y + k)
        for j in range(n):
            p = d_pos[j] + d_vel[j] * i
            p = np.abs(np.mod(p, 2 * (s - d_size[j])) - (s - d_size[j]))  # bounce
            a, b = int(p[0]), int(p[1])
            f[a : a + d_size[j], b : b + d_size[j]] = d_col[j]
            distractors[j, i] = (b, a, b + d_size[j], a + d_size[j])
        f += rng.normal(0, spec.noise_std, size=f.shape)
    boxes = dict(target=target, distractors=distractors)
    return np.clip(frames, 0, 255).astype(np.uint8), boxes


def motion_clips(
    spec: MotionDatasetSpec = MotionDatasetSpec(), rng: Optional[np.random.Generator] = None
) -> Iterator[tuple[str, str, int, np.ndarray, dict]]:
    """Every clip of ``spec`` in generation order: ``(split, file name, label, frames, boxes)``
    (:func:`_clip`); after each split, ``('list', split, 0, order, {})`` with the permutation
    ``order`` of the split's list file (drawn from the same generator, so it comes in its place).
    ``rng``: default, one seeded with ``spec.seed``."""
    rng = np.random.default_rng(spec.seed) if rng is None else rng
    for split, per_class in (('train', spec.train_per_class), ('test', spec.test_per_class)):
        count = 0
        for label, name in enumerate(CLASSES):
            for i in range(per_class):
                frames, boxes = _clip(rng, label, spec)
                yield split, f'{split}_{name}_{i:04d}.mp4', label, frames, boxes
                count += 1
        yield 'list', split, 0, rng.permutation(count), {}


def _write_mp4(path: Path, frames: np.ndarray, fps: int) -> None:
    import cv2

    h, w = frames.shape[1:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), fps, (w, h))
    if not writer.isOpened():
        raise RuntimeError(f'OpenCV cannot write mp4 ({path}); is opencv-python installed?')
    for frame in frames:
        writer.write(frame)
    writer.release()


def generator_key(*sources: str | os.PathLike) -> dict[str, str]:
    """What decides a generated set's bytes besides its spec: the SHA-256 of the generator's source
    files (any edit regenerates the set once) and the OpenCV version that encodes it."""
    import cv2

    digest = hashlib.sha256()
    for source in sources:
        digest.update(Path(source).read_bytes())
    return dict(source_sha256=digest.hexdigest(), opencv=cv2.__version__)


def ensure_generated(
    root: str | os.PathLike,
    spec: Any,
    classes: tuple,
    write: Callable[[Path, np.random.Generator], None],
    sources: tuple[str | os.PathLike, ...],
) -> Path:
    """``write(folder, rng)`` (``rng`` seeded with ``spec.seed``) unless ``root/meta.json`` records
    ``spec`` (a dataclass), ``classes`` and :func:`generator_key` of ``sources`` (the files whose
    code writes the set), then that record, last: it marks a complete set. A set cached under the
    same spec by an earlier version of the generator is therefore written again, not reused.

    The set is written in a new folder beside ``root`` and put in its place whole, so a run
    reading ``root`` while another process writes it again (another environment's OpenCV) reads
    the old set or the new one, never a file half written; an interrupted write leaves ``root``
    as it was. ``root`` is the generator's: a folder that holds anything but a generated set is
    refused (:class:`~dna_mm.errors.ConfigError`), not replaced."""
    root = Path(root)
    meta = dict(asdict(spec), classes=list(classes), generator=generator_key(*sources))
    recorded = _recorded(root)
    if recorded == meta:
        return root
    if recorded is None and root.is_dir() and any(root.iterdir()):
        raise ConfigError(
            f'{root}: not a generated set (no meta.json) and not empty; name a new or empty folder '
            'for the generated clips, or remove this one'
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f'.{root.name}.writing-', dir=root.parent))
    try:
        write(fresh, np.random.default_rng(spec.seed))
        (fresh / 'meta.json').write_text(json.dumps(meta, indent=1))
        old = fresh.with_name(fresh.name.replace('.writing-', '.old-'))
        try:
            os.replace(root, old)  # a folder is renamed whole
        except FileNotFoundError:
            old = None
        try:
            os.replace(fresh, root)
        except OSError:  # another process put its set there in between
            if _recorded(root) != meta:
                raise
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return root


def _recorded(root: Path) -> Optional[dict]:
    """The record of the set in ``root`` (``meta.json``), ``None`` without one."""
    try:
        return json.loads((root / 'meta.json').read_text())
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
        return None


def ensure_motion_dataset(root: str | os.PathLike, spec: MotionDatasetSpec = MotionDatasetSpec()) -> Path:
    """Write ``videos/*.mp4``, ``train.txt`` / ``test.txt`` (MMAction2 lists, paths relative to
    ``root/videos``), ``classes.txt`` and ``boxes.json`` under ``root`` unless
    :func:`ensure_generated` finds them made with ``spec``; returns ``root``.

    ``boxes.json``: ``{"frame_size": [width, height], "clips": {file name: {"target": [[x0, y0,
    x1, y1] per frame], "distractors": [[[x0, y0, x1, y1] per frame] per distractor]}}}``, pixels
    of the ``size × size`` frames, end exclusive (:func:`load_boxes` reads it)."""

    def write(root: Path, rng: np.random.Generator) -> None:
        (root / 'videos').mkdir(parents=True, exist_ok=True)
        lines, boxes = [], {}
        for split, rel, label, frames, clip_boxes in motion_clips(spec, rng):
            if split == 'list':  # rel: the split whose clips are done; frames: their list order
                (root / f'{rel}.txt').write_text(''.join(lines[j] + '\n' for j in frames))
                lines = []
                continue
            _write_mp4(root / 'videos' / rel, frames, spec.fps)
            lines.append(f'{rel} {label}')
            boxes[rel] = {key: value.tolist() for key, value in clip_boxes.items()}
        (root / 'boxes.json').write_text(json.dumps(dict(frame_size=[spec.size, spec.size], clips=boxes)))
        (root / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')

    return ensure_generated(root, spec, CLASSES, write, (__file__,))


def load_boxes(root: str | os.PathLike) -> tuple[dict[str, dict[str, np.ndarray]], tuple[int, int]]:
    """``root/boxes.json`` of :func:`ensure_motion_dataset`: (file name → ``{'target': [T, 4],
    'distractors': [D, T, 4]}`` int arrays ``(x0, y0, x1, y1)``, end exclusive; the frame size
    ``(width, height)``)."""
    path = Path(root) / 'boxes.json'
    if not path.is_file():
        raise FileNotFoundError(f'{path} does not exist (sets made by ensure_motion_dataset write it)')
    data = json.loads(path.read_text())
    clips = {}
    for name, clip in data['clips'].items():
        target = np.asarray(clip['target'], np.int64)  # [T, 4]
        distractors = np.asarray(clip['distractors'], np.int64).reshape(-1, len(target), 4)  # [D, T, 4]
        clips[name] = dict(target=target, distractors=distractors)
    width, height = data['frame_size']
    return clips, (width, height)
