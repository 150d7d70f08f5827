#!/usr/bin/env python
"""Check that video readers return the right frames: each reader against every frame decoded in
sequence (PyAV, ordered by presentation timestamp), in increasing, random and wrapped access.

    python tools/data/check_decoding.py VIDEO [VIDEO ...] [--readers dna_mm decord]
    # the codec / container matrix of docs/datasets/decoding.md (generated files)
    python tools/data/check_decoding.py --kinds [KIND ...] [--out-dir DIR]

Prints a table (a row per file: frame count, and per reader `exact` or what differs); exit
status 1 if dna_mm's reader (the first of --readers) is not exact on a readable file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: the readers of ``dna_mm.datasets.decoding_check.READERS`` (a test keeps them equal)
READERS = ('decord', 'dna_mm')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='Compare video readers with every frame decoded in sequence (PyAV, ordered by '
        'presentation timestamp): frame count and frames, in increasing, random and wrapped access.'
    )
    p.add_argument('videos', nargs='*', type=Path, help='video files (each is decoded into memory)')
    p.add_argument(
        '--kinds', nargs='*', metavar='KIND', help='generated files of these kinds (none given: all)'
    )
    p.add_argument('--readers', nargs='+', default=['dna_mm', 'decord'], choices=READERS)
    p.add_argument('--out-dir', type=Path, help='keep the generated files here (default: a temporary folder)')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if not args.videos and args.kinds is None:
        p.error('give video files or --kinds')
    return args


def check(args: argparse.Namespace) -> int:
    from dna_mm.datasets.decoding_check import check_decoding

    return check_decoding(args.videos, args.kinds, args.readers, args.out_dir)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.apis.cli import run_tool

    return run_tool('check_decoding.py', check, args)


if __name__ == '__main__':
    sys.exit(main())
