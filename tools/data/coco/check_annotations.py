#!/usr/bin/env python
"""Check a COCO instance-segmentation annotation file against its images.

    python tools/data/coco/check_annotations.py \
        --ann-file data/coco/annotations/instances_val2017.json \
        --image-dir data/coco/val2017 [--check-sizes] [--show 5]

Reports images missing on disk (and, with ``--check-sizes``, unreadable files or sizes that
differ from the JSON), boxes that are empty or outside the image, malformed polygons / RLEs,
unknown image or category ids, duplicate ids and categories, each with the JSON location of
the first few cases and the total; prints the annotations per category. Exits 1 when anything
is wrong, 2 when the file cannot be read as COCO JSON.
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--ann-file', required=True, help='COCO instances JSON')
    p.add_argument('--image-dir', help='directory the file_name entries are relative to')
    p.add_argument(
        '--check-sizes',
        action='store_true',
        help='read every image and compare its size with the JSON (slow)',
    )
    p.add_argument('--show', type=int, default=5, help='examples shown per problem')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def check(args: argparse.Namespace) -> int:
    from dna_mm.preparation.coco_check import check_coco

    report = check_coco(args.ann_file, args.image_dir, args.check_sizes)
    print(report.format(args.show))
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('check_annotations.py', check, args)


if __name__ == '__main__':
    sys.exit(main())
