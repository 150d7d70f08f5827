"""The person-centric crop window: a joint box, enlarged, made square, kept inside the frame.

For a box ``(x0, y0, x1, y1)`` with ``w = x1 - x0``, ``h = y1 - y0`` and margin ``m``:

* enlarge by ``m w`` left and right and ``m h`` above and below;
* square around its centre ``(cx, cy)``, side ``s = max((1 + 2m) w, (1 + 2m) h)`` (at least 1 px);
* per axis, shift the square inside ``[0, W)`` / ``[0, H)`` where ``s`` fits, else clip it to
  the frame (the window is then the whole frame along that axis and no longer square).
"""

from __future__ import annotations

import math

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


def _place(centre: float, side: float, limit: int) -> tuple[int, int]:
    """Integer interval ``[a, b)`` of length ``ceil(side)`` around ``centre``, moved into ``[0, limit)``."""
    length = max(1, math.ceil(side))
    if length >= limit:
        return 0, limit
    start = int(round(centre - length / 2))
    start = min(max(start, 0), limit - length)
    return start, start + length


def square_window(box: Box, frame_size: tuple[int, int], margin: float) -> tuple[int, int, int, int]:
    """Pixel window ``(x0, y0, x1, y1)`` (end exclusive) to crop for ``box`` in a ``(W, H)`` frame."""
    if margin < 0:
        raise ValueError(f'margin must be >= 0, got {margin}')
    x0, y0, x1, y1 = box
    width, height = frame_size
    side = (1 + 2 * margin) * max(x1 - x0, y1 - y0)
    ax, bx = _place((x0 + x1) / 2, side, width)
    ay, by = _place((y0 + y1) / 2, side, height)
    return ax, ay, bx, by
