#!/usr/bin/env python
"""The embedded default: generate the synthetic motion set (once), train, test, report.

    python tools/demo.py                       # TimeSformer-DnA
    python tools/demo.py --attn dna softmax    # DnA and the softmax baseline, same data

Each run goes through ``tools/train.py`` and ``tools/test.py`` with
``configs/timesformer_dna_demo.py`` (the commands are printed), so what the demo shows is
exactly what a user runs on a real dataset.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from dna_mm.datasets.synthetic import CLASSES, ensure_motion_dataset

REPO = Path(__file__).resolve().parents[1]
CONFIG = 'configs/timesformer_dna_demo.py'


def run(cmd: list[str]) -> str:
    print('$ ' + shlex.join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], file=sys.stderr)
        sys.exit(f'demo: command failed with exit code {proc.returncode}')
    return proc.stdout


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--attn',
        nargs='+',
        default=['dna'],
        choices=['dna', 'softmax', 'diff', 'cog'],
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

    t0 = time.time()
    root = ensure_motion_dataset(REPO / args.data_root)
    print(f'demo data: {root} ({len(CLASSES)} classes, chance = {100 / len(CLASSES):.0f}%)')
    results = {}
    for attn in args.attn:
        work_dir = f'{args.work_dir}/{attn}'
        opts = [f'model.backbone.temporal_attn={attn}', f'model.backbone.spatial_attn={attn}']
        for split, ann in (('train', 'train'), ('val', 'test'), ('test', 'test')):
            opts += [
                f'{split}_dataloader.dataset.ann_file={args.data_root}/{ann}.txt',
                f'{split}_dataloader.dataset.data_prefix.video={args.data_root}/videos',
            ]
        if args.epochs:  # the schedule's end, val and checkpoint intervals move with it
            opts += [f'train_cfg.max_epochs={args.epochs}']
        start = time.time()
        run(
            [
                sys.executable,
                'tools/train.py',
                CONFIG,
                '--work-dir',
                work_dir,
                '--seed',
                '0',
                '--cfg-options',
                *opts,
            ]
        )
        ckpt = (REPO / work_dir / 'last_checkpoint').read_text().strip()
        out = run(
            [
                sys.executable,
                'tools/test.py',
                CONFIG,
                ckpt,
                '--work-dir',
                work_dir,
                '--dump',
                f'{work_dir}/predictions.csv',
                '--cfg-options',
                *opts,
            ]
        )
        line = next(ln for ln in out.splitlines() if ln.startswith('Test results:'))
        results[attn] = (line, time.time() - start)
        print(f'[{attn}] {line}  ({time.time() - start:.0f} s)', flush=True)
    print('\nSummary (synthetic motion set, test split):')
    for attn, (line, secs) in results.items():
        nums = dict(re.findall(r'(top-1|mCA): ([\d.]+)', line))
        print(
            f'  {attn:8s} top-1 {nums.get("top-1", "?"):>6s}%   mCA {nums.get("mCA", "?"):>6s}%   '
            f'({secs:.0f} s train + test)'
        )
    print(f'total {time.time() - t0:.0f} s')


if __name__ == '__main__':
    main()
