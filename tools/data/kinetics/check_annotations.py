#!/usr/bin/env python
"""Check Kinetics-400 lists as MMAction2 ships them (``class/youtubeid_000000_000010.mp4 label``).

    python tools/data/kinetics/check_annotations.py \
        --ann-file data/kinetics400/kinetics400_val_list_videos.txt \
        --video-dir data/kinetics400/videos_val [--label-map label_map_k400.txt]

Reports files missing on disk (the first few and the total), labels outside the label map and
malformed lines; exits 1 when anything is wrong. The lists are used as they are.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SHOW = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--ann-file', required=True)
    p.add_argument('--video-dir', required=True)
    p.add_argument('--label-map', help='one class name per line (default: the shipped K400 map)')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def check(args: argparse.Namespace) -> int:
    from dna_mm.datasets.protocols import check_video_list, label_map
    from dna_mm.tools.cli import user_file

    if args.label_map:
        classes = Path(user_file(args.label_map, '--label-map')).read_text().splitlines()
    else:
        classes = label_map('label_map_k400')
    classes = [c for c in classes if c.strip()]
    report = check_video_list(user_file(args.ann_file, '--ann-file'), args.video_dir, len(classes))
    print(f'{args.ann_file}: {report.entries} entries, {len(classes)} classes')
    for title, items in (
        ('missing on disk', report.missing),
        (f'labels outside [0, {len(classes)})', report.bad_labels),
        ('malformed lines', report.malformed),
    ):
        if items:
            print(f'{title}: {len(items)}')
            for item in items[:SHOW]:
                print(f'  {item}')
            if len(items) > SHOW:
                print(f'  ... ({len(items) - SHOW} more)')
    print('OK' if report.ok else 'problems found')
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('check_annotations.py', check, args)


if __name__ == '__main__':
    sys.exit(main())
