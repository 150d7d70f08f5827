#!/usr/bin/env python
"""Re-encode a video tree so that the short side is N pixels (Kinetics-400: 256, as the paper's authors).

    python tools/data/resize_videos.py SRC_DIR OUT_DIR --short-side 256 \
        [--workers N] [--ext .mp4] [--keyint K]

Same relative layout under OUT_DIR, H.264 in .mp4 (PyAV's bundled FFmpeg), aspect kept, even
sides. Parallel with a progress bar; a second run skips outputs that exist and verify (decord
decodes them, size and frame count match the source); a killed run leaves only ``*.part``
files. Failures go to OUT_DIR/failed.txt and make the exit status 1. docs/datasets/kinetics400.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: ``dna_mm.preparation.encoding.DEFAULT_KEYINT`` (a test keeps them equal)
DEFAULT_KEYINT = 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='Re-encode a video tree (H.264) so that the short side is --short-side pixels; '
        'resumable, verified with decord, failures in OUT_DIR/failed.txt.'
    )
    p.add_argument('src_dir', metavar='SRC_DIR', type=Path)
    p.add_argument('out_dir', metavar='OUT_DIR', type=Path)
    p.add_argument('--short-side', type=int, default=256, help='short side of the output (default 256)')
    p.add_argument('--ext', default='.mp4', choices=('.mp4', '.mkv'), help='output container (default .mp4)')
    p.add_argument('--workers', type=int, default=None, help='processes (default: all cores)')
    p.add_argument(
        '--keyint',
        type=int,
        default=DEFAULT_KEYINT,
        help=f'max frames between keyframes (default {DEFAULT_KEYINT})',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    for name in ('keyint', 'workers'):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f'--{name} must be >= 1, got {value}')
    if args.short_side < 2 or args.short_side % 2:
        p.error(f'--short-side must be an even number >= 2, got {args.short_side}')
    return args


def resize(args: argparse.Namespace) -> int:
    from dna_mm.preparation.resize import resize_videos
    from dna_mm.preparation.runner import default_workers

    workers = args.workers or default_workers()
    return resize_videos(args.src_dir, args.out_dir, args.short_side, args.ext, args.keyint, workers, print)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('resize_videos.py', resize, args)


if __name__ == '__main__':
    sys.exit(main())
