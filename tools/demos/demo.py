#!/usr/bin/env python
"""The embedded default: generate the synthetic motion set (once), train, test, report.

    python tools/demos/demo.py                       # TimeSformer-DnA
    python tools/demos/demo.py --attn dna softmax    # DnA and the softmax baseline, same data

Each run goes through ``tools/train.py`` and ``tools/test.py`` with
``configs/timesformer_dna_demo.py`` (the commands are printed, their progress lines shown as
they come, the log file named), so what the demo shows is exactly what a user runs on a real
dataset.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the runs' commands run here (config-relative paths)

#: the shipped members' short names, ``dna_mm.models.attention.short_names()`` (a test keeps them equal)
ATTENTIONS = ('softmax', 'dna', 'diff', 'cog')
CONFIG = 'configs/timesformer_dna_demo.py'


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--attn',
        nargs='+',
        default=['dna'],
        choices=ATTENTIONS,
        help='attention(s) to train and test (temporal and spatial)',
    )
    p.add_argument('--data-root', default='data/demo')
    p.add_argument('--work-dir', default='work_dirs/demo')
    p.add_argument(
        '--epochs',
        type=int,
        default=None,
        help='override the config\'s epochs (the cosine schedule, validation and '
        'checkpoint intervals follow)',
    )
    args = p.parse_args(argv)
    from dna_mm.config import format_metrics
    from dna_mm.synthetic.motion_clips import CLASSES, ensure_motion_dataset
    from dna_mm.utils.tool_runs import demo_options, train_then_test

    t0 = time.time()
    root = ensure_motion_dataset(REPO / args.data_root)
    print(f'demo data: {root} ({len(CLASSES)} classes, chance = {100 / len(CLASSES):.0f}%)')
    results = {}
    for attn in args.attn:
        work_dir = f'{args.work_dir}/{attn}'
        opts = demo_options(attn, args.data_root, args.epochs)
        metrics, secs = train_then_test(CONFIG, work_dir, opts, f'{work_dir}/predictions.csv', REPO)
        results[attn] = (metrics, secs)
        print(f'[{attn}] {format_metrics(metrics)}  ({secs:.0f} s)', flush=True)
    print('\nSummary (synthetic motion set, test split):')
    for attn, (metrics, secs) in results.items():
        top1, mca = (f'{100 * metrics[k]:.2f}' if k in metrics else '?' for k in ('acc/top1', 'acc/mean1'))
        print(f'  {attn:8s} top-1 {top1:>6s}%   mCA {mca:>6s}%   ({secs:.0f} s train + test)')
    print(f'total {time.time() - t0:.0f} s')


if __name__ == '__main__':
    main()
