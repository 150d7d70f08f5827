#!/usr/bin/env python
"""Your own videos to lists, label map and a fine-tuning config, in one command.

    python tools/data/build_custom_dataset.py SRC --out DIR [--base CONFIG] [--load-from CKPT|none]
        [--val-ratio 0.2] [--test-ratio 0] [--seed 0] [--workers N] [--debug]

SRC is a folder with one sub-folder of videos per class (or train/ val/ test/ folders of class
folders), or a CSV / list file of ``path,label`` lines (label a class name or an index). Writes
DIR/train.txt, DIR/val.txt (DIR/test.txt with --test-ratio), a stratified split with a fixed
seed; DIR/classes.txt, the label map; DIR/config.py, inheriting --base (default
configs/timesformer_dna_k400.py; any dna_mm or zoo config) with num_classes, the data root and a
recipe sized to the data (global batch, lr, epochs, warm-up), starting from --load-from (default:
checkpoints/timesformer_dna_k400.pth for a DnA TimeSformer base; none: from scratch).

Every video is checked once (decoded by the reader training uses), with a progress bar;
unreadable ones are printed (file and reason), listed in DIR/unreadable.txt and left out, and the
build goes on. A second run reuses the checks (DIR/video_check.jsonl) and checks only new or
changed files. A class folder without videos, or with none readable, is an error naming it
(one line, exit status 2; --debug prints the traceback). Then:

    python tools/train.py DIR/config.py
    python tools/test.py DIR/config.py work_dirs/config/best_*.pth
"""

from __future__ import annotations

import sys
from pathlib import Path

from dna_mm.datasets.custom import build_cli

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    return build_cli(argv, 'timesformer_dna_k400.py', REPO / 'configs')


if __name__ == '__main__':
    sys.exit(main())
