#!/usr/bin/env python
"""Build MMAction2 annotation lists for Toyota Smarthome (CS / CV1 / CV2), the published protocols.

    python tools/data/smarthome/build_annotations.py --video-dir DIR --out-dir OUT --protocol {CS,CV1,CV2}

Paths in the lists are relative to DIR; labels follow the shipped label maps
(dna_mm/datasets/label_maps). Every video suffix is taken, in any case (a re-encoded copy: the
found line counts each suffix when they mix). Prints per-split counts and the classes per split; a
file name that does not parse, or one clip found twice under DIR (a re-encoded copy beside it),
stops the build with a message naming it, as does an OUT that cannot be a folder.
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='Write MMAction2 VideoDataset lists for Toyota Smarthome (the published protocols).'
    )
    p.add_argument('--video-dir', required=True, help='folder with the videos (searched recursively)')
    p.add_argument('--out-dir', required=True, help='where train.txt / val.txt / test.txt go')
    p.add_argument('--protocol', required=True, type=str.upper, choices=['CS', 'CV1', 'CV2'])
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def build(args: argparse.Namespace) -> int:
    from dna_mm.datasets.protocols import build_annotations
    from dna_mm.tools.cli import output_folder

    return build_annotations(
        'smarthome',
        args.video_dir,
        args.out_dir,
        args.protocol,
        print,
        make_out_dir=lambda path: output_folder(path, '--out-dir'),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('build_annotations.py', build, args)


if __name__ == '__main__':
    sys.exit(main())
