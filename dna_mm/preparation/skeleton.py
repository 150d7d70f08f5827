"""NTU RGB+D ``.skeleton`` files (Kinect v2 text export) → the box of the colour-frame joints.

Format (whitespace-separated, one record per line)::

    <frame count>
    per frame:  <body count>
      per body: <bodyID> <clipedEdges> <handLeftConfidence> <handLeftState>
                <handRightConfidence> <handRightState> <isRestricted> <leanX> <leanY> <trackingState>
                <joint count>
        per joint: <x> <y> <z> <depthX> <depthY> <colorX> <colorY>
                   <orientationW> <orientationX> <orientationY> <orientationZ> <trackingState>

``colorX``, ``colorY`` are pixels of the 1920x1080 RGB frame. A frame may have no body, a body
no joint. The box spans every joint of every body of every frame whose colour coordinates are
both finite and non-zero (Kinect writes 0 for a joint it could not map).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator, Optional

from .geometry import Box

#: size of the frame ``colorX`` / ``colorY`` refer to
COLOR_FRAME = (1920, 1080)
BODY_FIELDS = 10
JOINT_FIELDS = 12
COLOR_X, COLOR_Y = 5, 6


class SkeletonError(ValueError):
    """A ``.skeleton`` file that does not follow the format; the message names file and line."""

    def __init__(self, path: Path, line: int, reason: str):
        super().__init__(f'{path}, line {line}: {reason}')


def color_joints(path: Path) -> Iterator[tuple[float, float]]:
    """``(colorX, colorY)`` of every joint of every body of every frame, in file order; a
    :class:`SkeletonError` (file and line) where the file departs from the format or ends before
    its declared frames, bodies or joints."""
    lines = enumerate(path.read_text(errors='replace').splitlines(), start=1)
    records = ((no, line.split()) for no, line in lines if line.strip())
    last = 0

    def fields(what: str, count: int) -> list[str]:
        nonlocal last
        try:
            last, values = next(records)
        except StopIteration:
            raise SkeletonError(path, last + 1, f'file ends where {what} was expected') from None
        if len(values) != count:
            raise SkeletonError(path, last, f'{what}: expected {count} values, found {len(values)}')
        return values

    def count(what: str) -> int:
        (value,) = fields(what, 1)
        if not value.isdigit():
            raise SkeletonError(path, last, f'{what}: expected a count, found {value!r}')
        return int(value)

    for frame in range(1, count('frame count') + 1):
        for _ in range(count(f'body count of frame {frame}')):
            fields(f'body record of frame {frame}', BODY_FIELDS)
            for _ in range(count(f'joint count of frame {frame}')):
                what = f'joint record of frame {frame}'
                values = fields(what, JOINT_FIELDS)
                try:
                    joint = [float(v) for v in values]
                except ValueError:
                    raise SkeletonError(path, last, f'{what}: expected {JOINT_FIELDS} numbers') from None
                yield joint[COLOR_X], joint[COLOR_Y]
    extra = next(records, None)
    if extra is not None:
        raise SkeletonError(path, extra[0], 'unexpected data after the last declared frame')


def joint_box(path: Path) -> Optional[Box]:
    """Box ``(x0, y0, x1, y1)`` of the valid colour-frame joints in ``path``; ``None`` if there are
    none or the file is missing or empty; a :class:`SkeletonError` if it is malformed."""
    if not path.is_file() or not path.read_bytes().strip():
        return None
    x0 = y0 = math.inf
    x1 = y1 = -math.inf
    for x, y in color_joints(path):
        if math.isfinite(x) and math.isfinite(y) and x != 0 and y != 0:
            x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
    return None if x0 == math.inf else (x0, y0, x1, y1)
