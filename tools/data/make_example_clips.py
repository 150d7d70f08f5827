#!/usr/bin/env python
"""Write a folder of example clips shaped like a user's own videos, to try the custom-dataset
workflow (docs/datasets/custom.md) on.

    python tools/data/make_example_clips.py OUT [--per-class 12] [--size 160x120] [--seed 0]

One class folder per camera move over a still picture (``pan left``, ``pan right``, ``tilt up``,
``tilt down``, ``zoom in``, ``zoom out``; one folder renamed ``zoom arrière`` as a user's language
might have it), 32-48 frames a clip at 8 fps, in the formats cameras and phones write: mostly
H.264 ``.mp4`` (some in a sub-folder), MJPEG and MPEG-4 Part 2 ``.avi``, an H.264 ``.MOV`` and a
VP9 ``.webm``; plus what a real folder holds besides: a truncated ``.mp4``, an empty ``.mp4`` and
a ``notes.txt``. The same seed writes the same clips.
"""

from __future__ import annotations

import argparse
import sys


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected WIDTHxHEIGHT, e.g. 160x120, got {text!r}') from None
    if w < 32 or h < 32 or w % 2 or h % 2:
        raise argparse.ArgumentTypeError(f'width and height must be even and at least 32, got {text!r}')
    return w, h


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Example clips shaped like your own videos (camera moves)')
    p.add_argument('out', help='folder to write (class folders inside)')
    p.add_argument('--per-class', type=int, default=12, help='clips a class (default 12)')
    p.add_argument('--size', type=_size, default=(160, 120), help='WIDTHxHEIGHT (default 160x120)')
    p.add_argument('--seed', type=int, default=0, help='seed of the pictures and lengths (default 0)')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.per_class < 6:
        p.error(f'--per-class must be >= 6 (one clip of each format a class), got {args.per_class}')
    return args


#: the container / codec of clip ``i`` of a class (the rest: H.264 .mp4)
FORMATS = {0: ('.avi', 'mjpeg'), 1: ('.avi', 'mpeg4'), 2: ('.MOV', 'libx264'), 3: ('.webm', 'libvpx-vp9')}
#: class folder names: the moves, one as another language writes it
FOLDERS = {'zoom out': 'zoom arrière'}


def write(args: argparse.Namespace) -> int:
    from pathlib import Path

    import numpy as np

    from dna_mm.synthetic.videos import CAMERA_MOVES, camera_move_clip, write_video
    from dna_mm.tools.cli import output_folder

    output_folder(args.out, 'OUT')
    out, (width, height) = Path(args.out), args.size
    rng = np.random.default_rng(args.seed)
    written, mp4s = 0, []
    for c, move in enumerate(CAMERA_MOVES):
        folder = out / FOLDERS.get(move, move)
        for i in range(args.per_class):
            suffix, codec = FORMATS.get(i, ('.mp4', 'libx264'))
            sub = folder / 'phone' if i >= args.per_class - 2 else folder  # a sub-folder, as exported
            frames = camera_move_clip(move, width, height, int(rng.integers(32, 49)), seed=1000 * c + i)
            mp4s.append(write_video(sub / f'clip {i:02d}{suffix}', frames, fps=8, codec=codec))
            written += 1
    whole = next(p for p in mp4s if p.suffix == '.mp4').read_bytes()  # the first class's first .mp4
    (out / next(iter(CAMERA_MOVES)) / 'clip 99 (truncated).mp4').write_bytes(whole[: len(whole) // 3])
    (out / 'tilt up' / 'clip 98 (empty).mp4').write_bytes(b'')
    (out / 'tilt up' / 'notes.txt').write_text('shot on the balcony, 8 fps\n', encoding='utf-8')
    print(
        f'wrote {written} clips in {len(CAMERA_MOVES)} class folders under {out}, '
        'plus a truncated, an empty and a text file'
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('make_example_clips.py', write, args)  # an OUT that cannot be written: one line


if __name__ == '__main__':
    sys.exit(main())
