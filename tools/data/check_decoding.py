#!/usr/bin/env python
"""Check that video readers return the right frames: each reader against every frame decoded in
sequence (PyAV, ordered by presentation timestamp), in increasing, random and wrapped access.

    python tools/data/check_decoding.py VIDEO [VIDEO ...] [--readers dna_mm decord]
    # the codec / container matrix of docs/datasets/decoding.md (generated files)
    python tools/data/check_decoding.py --kinds [KIND ...] [--out-dir DIR]

Prints a table (a row per file: frame count, and per reader `exact` or what differs); exit
status 1 if dna_mm's reader (the first of --readers) is not exact on a readable file. The
generated files are written by :mod:`dna_mm.preparation.video_kinds`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: the readers of ``dna_mm.preparation.decoding_check.READERS`` (a test keeps them equal)
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
    """``args.videos`` and the generated files of ``args.kinds`` (``[]``: all; ``None``: none),
    kept in ``args.out_dir`` (default: a temporary folder), checked with each of ``args.readers``;
    prints the table and returns the exit status."""
    import tempfile

    from dna_mm.preparation.decoding_check import report
    from dna_mm.preparation.video_kinds import kind_names, write_kinds
    from dna_mm.tools.cli import user_file

    kinds = [] if args.kinds is None else kind_names(args.kinds)
    paths = [Path(user_file(str(v), 'video')) for v in args.videos]
    names = [str(v) for v in paths]
    with tempfile.TemporaryDirectory(prefix='dna_mm_decoding_') as tmp:
        written = write_kinds(kinds, args.out_dir or Path(tmp), print)
        paths += written.values()
        names += [f'{kind} ({path.name})' for kind, path in written.items()]
        table, exact = report(paths, tuple(args.readers), names)
    print(table)
    return 0 if exact else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('check_decoding.py', check, args)


if __name__ == '__main__':
    sys.exit(main())
