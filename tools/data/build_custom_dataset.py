#!/usr/bin/env python
"""Your own videos to lists, label map and a fine-tuning config, in one command.

    python tools/data/build_custom_dataset.py SRC --out DIR [--base CONFIG] [--load-from CKPT|none]
        [--val-ratio 0.2] [--test-ratio 0] [--seed 0] [--no-flip] [--sample-by-time] [--workers N] [--debug]

SRC is a folder with one sub-folder of videos per class (or train/ val/ test/ folders of class
folders), or a CSV / list file of ``path,label`` lines (label a class name or an index). Writes
DIR/train.txt, DIR/val.txt (DIR/test.txt with --test-ratio), a stratified split with a fixed
seed; DIR/classes.txt, the label map; DIR/config.py, inheriting --base (default
configs/timesformer_dna_k400.py; any dna_mm or zoo config) with num_classes, the data root and a
recipe sized to the data (global batch, lr, epochs, warm-up) and the clip sampling fitted to the
clips' frame counts, starting from --load-from (default: checkpoints/timesformer_dna_k400.pth of
this checkout for a DnA TimeSformer base; none: from scratch, every pretrained initialisation of
the base cleared). --no-flip leaves the horizontal flip out of training (direction classes).
Clips of mixed frame rates get a note; --sample-by-time then samples frames a fixed number of
seconds apart (SampleFramesBySeconds) instead of a fixed number of frames.

Every video is checked once (decoded by the reader training uses), with a progress bar;
unreadable ones are printed (file and reason), listed in DIR/unreadable.txt and left out, and the
build goes on. A second run reuses the checks (DIR/video_check.jsonl) and checks only new or
changed files. A class folder without videos, or with none readable, is an error naming it
(one line, exit status 2; --debug prints the traceback); so is a DIR where the build would write
over an input (SRC as DIR/train.txt, --base DIR/config.py) or that holds the videos of SRC.
Then:

    python tools/train.py DIR/config.py
    python tools/test.py DIR/config.py work_dirs/config/best_*.pth
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BASE = 'timesformer_dna_k400.py'


def _ratio(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f'expected a ratio in [0, 1), got {text}')
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='Lists, label map and a fine-tuning config for your own videos (docs/datasets/custom.md)'
    )
    p.add_argument('src', help='a folder of class folders of videos, or a path,label list (.csv / .txt)')
    p.add_argument('--out', required=True, help='folder for train/val/test.txt, classes.txt, config.py')
    p.add_argument('--base', default=DEFAULT_BASE, help=f'config to inherit (default {DEFAULT_BASE})')
    p.add_argument(
        '--load-from',
        default='auto',
        help='initial weights: a checkpoint, none (from scratch), or auto (default: '
        "checkpoints/timesformer_dna_k400.pth for a DnATimeSformer base, else the base's own)",
    )
    p.add_argument('--val-ratio', type=_ratio, default=0.2, help='share of each class for val.txt (0.2)')
    p.add_argument('--test-ratio', type=_ratio, default=0.0, help='share of each class for test.txt (0)')
    p.add_argument('--seed', type=int, default=0, help='seed of the split (0)')
    p.add_argument(
        '--no-flip',
        dest='flip',
        action='store_false',
        help='no horizontal flip in training: for classes that depend on left and right',
    )
    p.add_argument(
        '--sample-by-time',
        action='store_true',
        help='clips mixing frame rates: sample frames a fixed number of seconds apart, not frames '
        '(the build proposes it when it sees mixed rates)',
    )
    p.add_argument(
        '--workers', type=int, default=len(os.sched_getaffinity(0)), help='processes checking videos'
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.val_ratio + args.test_ratio >= 1:
        p.error(f'--val-ratio + --test-ratio must be < 1, got {args.val_ratio + args.test_ratio}')
    if args.workers < 1:
        p.error(f'--workers must be >= 1, got {args.workers}')
    return args


def build(args: argparse.Namespace) -> int:
    from dna_mm.preparation.custom import BuildRequest, build_dataset

    request = BuildRequest(**{k: v for k, v in vars(args).items() if k != 'debug'})
    return build_dataset(request, REPO, print)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('build_custom_dataset.py', build, args)


if __name__ == '__main__':
    sys.exit(main())
