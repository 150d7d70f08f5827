#!/usr/bin/env python
"""Check ImageNet-1K as you have it, count its images per class, and write the lists MMPretrain
reads (docs/datasets/imagenet.md).

    python tools/data/imagenet/check_imagenet.py data/imagenet [--devkit ILSVRC2012_devkit_t12]
        [--splits train val] [--no-decode] [--workers N] [--debug]

ROOT holds train/<wnid>/*.JPEG and val/ as class folders, or flat (ILSVRC2012_val_*.JPEG, labelled
by --devkit), or MMPretrain's meta/{train,val}.txt. Prints, per split, how it was read, the image
count and the images per class (smallest, largest; classes without an image are named); decodes
every image (unless --no-decode) and names each unreadable file in one line, with the reason,
in ROOT/meta/unreadable.txt too; writes meta/<split>.txt for a split read from folders or the
devkit, without the unreadable images (training then reads the rest). Exit status 1 when an
image is unreadable or a class is empty, 2 for a layout it cannot read (one line; --debug: the
traceback).
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Check ImageNet-1K, count its classes, write MMPretrain lists')
    p.add_argument('root', help='data/imagenet: train/, val/ (and meta/)')
    p.add_argument('--devkit', help='ILSVRC2012_devkit_t12, for a flat val/ folder')
    p.add_argument('--splits', nargs='+', default=['train', 'val'], choices=['train', 'val'])
    p.add_argument('--no-decode', action='store_true', help='count only; do not decode every image')
    p.add_argument('--workers', type=int, default=len(os.sched_getaffinity(0)), help='processes decoding')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error(f'--workers must be >= 1, got {args.workers}')
    return args


def check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dna_mm.preparation.imagenet import class_ids, read_split, unreadable_images, write_lists

    root = Path(args.root)
    wnids = class_ids(root)
    print(f'{root}: {len(wnids)} classes (train/ folders)')
    splits = [read_split(root, s, wnids, Path(args.devkit) if args.devkit else None) for s in args.splits]
    status = 0
    for split in splits:
        empty = [wnids[i] for i, n in enumerate(split.per_class) if n == 0]
        print(
            f'{split.name}: {len(split.samples)} images from {split.source}; per class '
            f'{min(split.per_class)}-{max(split.per_class)}'
            + (f'; no image: {", ".join(empty[:10])}{" ..." if len(empty) > 10 else ""}' if empty else '')
        )
        status = status or int(bool(empty))
    problems: dict[str, str] = {}
    if not args.no_decode:
        paths = [str(root / p) for split in splits for p, _ in split.samples]
        problems = unreadable_images(paths, args.workers)
        for path, why in sorted(problems.items()):
            print(f'unreadable: {path}: {why}')
        listed = root / 'meta' / 'unreadable.txt'
        if problems:
            listed.parent.mkdir(parents=True, exist_ok=True)
            listed.write_text(''.join(f'{p}\t{w}\n' for p, w in sorted(problems.items())), encoding='utf-8')
        print(f'decoded {len(paths)} images: {len(problems)} unreadable')
        status = status or int(bool(problems))
    skip = {str(Path(p).relative_to(root)) for p in problems}  # left out of the lists
    for path in write_lists(root, splits, skip):
        print(f'wrote {path}')
    return status


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('check_imagenet.py', check, args)


if __name__ == '__main__':
    sys.exit(main())
