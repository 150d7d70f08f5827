#!/usr/bin/env python
"""Write a long video of the demo's motion classes whose class changes on a schedule: the known
timeline to try ``tools/infer.py --over-time`` on (docs/inference.md).

    python tools/data/make_long_video.py OUT.mp4 [--minutes 4] [--change 60] [--fps 25] [--size 256]
        [--no-audio] [--seed 0]

The class (``still``, ``horizontal``, ``vertical``, ``diagonal``, in turn) changes every
``--change`` seconds; H.264 at ``--size`` x ``--size``, a 440 Hz AAC tone unless ``--no-audio``.
The schedule is printed. The same seed writes the same video.
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='A long motion video with a known timeline')
    p.add_argument('out', help='the .mp4 to write')
    p.add_argument('--minutes', type=float, default=4.0, help='length (default 4)')
    p.add_argument('--change', type=float, default=60.0, help='seconds between class changes (default 60)')
    p.add_argument('--fps', type=int, default=25, help='frame rate (default 25)')
    p.add_argument('--size', type=int, default=256, help='width and height (even, >= 32; default 256)')
    p.add_argument('--no-audio', action='store_true', help='no audio track')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if not args.out.lower().endswith(('.mp4', '.mkv', '.mov')):
        p.error(f'OUT must end in .mp4, .mkv or .mov, got {args.out}')
    if not args.minutes > 0 or not args.change > 0 or args.fps < 1:
        p.error(
            f'--minutes, --change and --fps must be positive, got {args.minutes}, {args.change}, {args.fps}'
        )
    if args.size < 32 or args.size % 2:
        p.error(f'--size must be even and at least 32, got {args.size}')
    return args


def write(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dna_mm.over_time.motion_video import cycle_schedule, write_motion_video
    from dna_mm.tools.cli import output_file

    output_file(args.out, 'OUT')
    schedule = cycle_schedule(60 * args.minutes, args.change, args.fps)
    write_motion_video(Path(args.out), schedule, args.fps, args.size, not args.no_audio, args.seed)
    start = 0
    for name, frames in schedule:
        print(f'{start / args.fps:8.2f} - {(start + frames) / args.fps:8.2f} s  {name}')
        start += frames
    print(
        f'wrote {args.out}: {start} frames, {start / args.fps:.1f} s at {args.fps} fps, '
        f'{args.size}x{args.size}'
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('make_long_video.py', write, args)  # an OUT that cannot be written: one line


if __name__ == '__main__':
    sys.exit(main())
