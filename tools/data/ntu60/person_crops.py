#!/usr/bin/env python
"""NTU RGB+D 60 person-centric crops from the skeleton files (what the paper's authors trained on).

    python tools/data/ntu60/person_crops.py --video-dir V --skeleton-dir S --out-dir O \
        [--size 224] [--margin 0.1] [--workers N] [--missing {full,skip}]

Writes O/SsssCcccPpppRrrrAaaa.mp4 (size x size): every frame cut to the square box of all
skeleton joints (+ margin) and resized. Samples without a usable skeleton: whole frame
(--missing full, listed in O/full_frame.txt) or left out (skip, O/left_out.txt). Resumable and
verified like tools/data/resize_videos.py; failures in O/failed.txt, exit status 1.
Then: tools/data/ntu60/build_annotations.py --video-dir O. docs/datasets/ntu60.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: ``dna_mm.preparation.encoding.DEFAULT_KEYINT`` (a test keeps them equal)
DEFAULT_KEYINT = 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='NTU RGB+D person-centric crops from the skeleton files: square box of all joints '
        '(+ margin), every frame cut to it and resized; resumable, verified with decord.'
    )
    p.add_argument('--video-dir', required=True, type=Path, help='the *_rgb.avi files (searched recursively)')
    p.add_argument(
        '--skeleton-dir', required=True, type=Path, help='the .skeleton files (searched recursively)'
    )
    p.add_argument('--out-dir', required=True, type=Path, help='where SsssCcccPpppRrrrAaaa.mp4 go')
    p.add_argument('--size', type=int, default=224, help='side of the square output (default 224)')
    p.add_argument(
        '--margin', type=float, default=0.1, help='added on each side, fraction of the box (default 0.1)'
    )
    p.add_argument(
        '--missing',
        choices=('full', 'skip'),
        default='full',
        help='sample without a usable skeleton: whole frame resized (full, default) or left out (skip)',
    )
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
    if args.size < 2 or args.size % 2:
        p.error(f'--size must be an even number >= 2, got {args.size}')
    if args.margin < 0:
        p.error(f'--margin must be >= 0, got {args.margin}')
    return args


def crop(args: argparse.Namespace) -> int:
    from dna_mm.preparation.person_crops import make_person_crops
    from dna_mm.preparation.runner import default_workers

    return make_person_crops(
        args.video_dir,
        args.skeleton_dir,
        args.out_dir,
        args.size,
        args.margin,
        args.missing,
        args.keyint,
        args.workers or default_workers(),
        print,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('person_crops.py', crop, args)


if __name__ == '__main__':
    sys.exit(main())
