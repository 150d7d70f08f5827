"""Hold a video reader to the reference: every frame decoded from the start with PyAV, no seek,
ordered by presentation timestamp (:func:`~.video_reader.frames_in_sequence`). Frame ``i`` of a
reader must be that list's ``i``-th frame, exactly, and the reader must count as many frames.
Behind ``tools/data/check_decoding.py``, which prints :func:`report`'s table (docs/datasets/decoding.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..datasets.video_reader import KeyframeReader, frames_in_sequence
from ..errors import DataError


def _decord(path: str):
    import decord

    return decord.VideoReader(path, num_threads=1)


#: reader name -> opener (path -> an object with ``len`` and ``get_batch``)
READERS: dict[str, Callable[[str], object]] = {
    'dna_mm': lambda path: KeyframeReader(path, name=path),
    'decord': _decord,
}


def access_patterns(frames: int, random_reads: int = 12, seed: int = 0) -> dict[str, list[list[int]]]:
    """The ``get_batch`` calls a reader is checked with: every frame in one increasing call;
    ``random_reads`` single frames in random order on one reader (backward and forward seeks);
    a clip wrapping around the video as ``SampleFrames`` makes it for a short one (8 frames,
    interval 32), in sampled (unsorted) order."""
    order = np.random.default_rng(seed).permutation(frames)[:random_reads]
    return {
        'increasing': [list(range(frames))],
        'random': [[int(i)] for i in order],
        'wrapped': [[(32 * j) % frames for j in range(8)]],
    }


@dataclass
class Check:
    """What a reader returned for one file: ``frames`` counted (``None``: it could not open it,
    ``error`` says why); per access pattern the ``(index, frame it returned, grey levels off)``
    of each wrong frame; ``max_diff`` over all frames compared."""

    reader: str
    frames: Optional[int] = None
    expected: int = 0
    wrong: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    max_diff: int = 0
    error: str = ''

    @property
    def exact(self) -> bool:
        return not self.error and self.frames == self.expected and not any(self.wrong.values())

    def summary(self) -> str:
        """One line: ``exact``, or what differs."""
        if self.error:
            return f'error: {self.error}'
        parts = [] if self.frames == self.expected else [f'{self.frames} frames, not {self.expected}']
        for pattern, wrong in self.wrong.items():
            if wrong:
                shown = ', '.join(
                    f'{i} gives {j}' if j != i else f'{i} off by up to {d}' for i, j, d in wrong[:3]
                )
                parts.append(f'{pattern}: {len(wrong)} wrong ({shown}{", ..." if len(wrong) > 3 else ""})')
        if not parts and self.max_diff:
            parts.append(f'max diff {self.max_diff}')
        return '; '.join(parts) or 'exact'


def _nearest(frame: np.ndarray, reference: list[np.ndarray]) -> int:
    """Index of the reference frame closest to ``frame`` (mean absolute difference)."""
    small = frame[::4, ::4].astype(np.int16)
    return int(np.argmin([np.abs(small - r[::4, ::4]).mean() for r in reference]))


def check_reader(
    path: Path, reader: str, reference: list[np.ndarray], patterns: dict[str, list[list[int]]]
) -> Check:
    """Read ``path`` with ``READERS[reader]`` in each access pattern (a new reader per pattern)
    and compare every frame with ``reference`` (its frames in sequence)."""
    check = Check(reader, expected=len(reference))
    try:
        check.frames = len(READERS[reader](str(path)))
        for pattern, calls in patterns.items():
            opened, wrong = READERS[reader](str(path)), []
            for call in calls:
                call = [i for i in call if i < check.frames]
                batch = opened.get_batch(call)
                batch = batch if isinstance(batch, np.ndarray) else batch.asnumpy()
                for i, frame in zip(call, batch, strict=True):
                    if frame.shape != reference[i].shape:
                        wrong.append((i, -1, 255))
                        continue
                    diff = int(np.abs(frame.astype(np.int16) - reference[i]).max())
                    check.max_diff = max(check.max_diff, diff)
                    if diff:
                        wrong.append((i, _nearest(frame, reference), diff))
            check.wrong[pattern] = wrong
    except Exception as err:  # a reader's own error (decord's DECORDError, FFmpeg's, dna_mm's)
        text = str(err).strip().splitlines()  # decord's: a C++ trace, its last line says why
        reason = re.sub(r'^\[[\d:]+\] \S+:\d+: ', '', text[-1]) if text else ''
        check.error = f'{type(err).__name__}: {reason}'[:200]
    return check


def check_file(path: Path, readers: tuple[str, ...] = ('dna_mm', 'decord')) -> tuple[int, list[Check]]:
    """The reference frame count of ``path`` and each reader's :class:`Check`."""
    _, reference = frames_in_sequence(str(path), name=str(path))
    patterns = access_patterns(len(reference))
    return len(reference), [check_reader(path, r, reference, patterns) for r in readers]


def describe(path: Path) -> str:
    """``codec pixel-format, container`` of the first video stream of ``path``."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return f'{stream.codec_context.name} {stream.format.name}, {container.format.name.split(",")[0]}'


def report(
    paths: list[Path], readers: tuple[str, ...], names: Optional[list[str]] = None
) -> tuple[str, bool]:
    """A markdown table, a row per file (``names`` label the rows), and whether the first reader
    was exact on every file the reference reads."""
    lines = [
        '| file | stream | frames | ' + ' | '.join(readers) + ' |',
        '|---|---|---|' + '---|' * len(readers),
    ]
    all_exact = True
    for label, path in zip(names or [str(p) for p in paths], paths, strict=True):
        try:
            count, checks = check_file(path, readers)
        except DataError as err:  # the reference cannot read it either
            lines.append(f'| {label} | unreadable | | {err} |' + ' |' * (len(readers) - 1))
            continue
        all_exact &= checks[0].exact
        cells = ' | '.join(c.summary() for c in checks)
        lines.append(f'| {label} | {describe(path)} | {count} | {cells} |')
    return '\n'.join(lines), all_exact
