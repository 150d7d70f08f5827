"""Check a prepared video the way training reads it: decord decodes its first and last frame,
they are ``W x H``, and its frame count is close to the source's (:func:`frames_match`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def frames_match(frames: int, expected: int) -> bool:
    """``|frames - expected| <= max(2, 1 % of expected)``."""
    return abs(frames - expected) <= max(2, 0.01 * expected)


def verify_video(path: Path, size: tuple[int, int], frames: int) -> Optional[str]:
    """``None`` if decord reads ``path`` at ``size = (W, H)`` with about ``frames`` frames, else why not."""
    import decord

    try:
        reader = decord.VideoReader(str(path), num_threads=1)
        count = len(reader)
        if count == 0:
            return 'decord reads no frame'
        batch = reader.get_batch([0, count - 1]).asnumpy()  # [2, H, W, 3]
    except Exception as err:  # decord raises its own DECORDError and RuntimeError
        return f'decord cannot read it: {str(err).splitlines()[0] if str(err) else type(err).__name__}'
    height, width = batch.shape[1:3]
    if (width, height) != tuple(size):
        return f'size {width}x{height}, expected {size[0]}x{size[1]}'
    if not frames_match(count, frames):
        return f'{count} frames, the source has {frames}'
    return None
