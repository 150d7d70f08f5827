#!/usr/bin/env python
"""Test a recognizer and print top-1, top-5 and mean class accuracy.

    python tools/test.py CONFIG CHECKPOINT [--dump preds.csv|preds.pkl] [--work-dir DIR]
        [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]

``--dump x.csv`` writes one row per video (path, label, prediction, score, top-5);
``--dump x.pkl`` MMAction2's pickle of the raw predictions.
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import sys

from mmengine.config import Config, DictAction
from mmengine.runner import Runner

from dna_mm.apis import format_metrics, prepare_cfg, shutdown_distributed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Test an action recognizer (dna_mm)')
    p.add_argument('config', help='test config file path')
    p.add_argument('checkpoint', help='checkpoint file')
    p.add_argument('--work-dir', help='the dir to save the evaluation metrics')
    p.add_argument('--dump', type=str, help='per-video predictions: .csv or .pkl')
    p.add_argument('--cfg-options', nargs='+', action=DictAction,
                   help='override config settings, key=value')
    p.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
    p.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = p.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if not osp.isfile(args.checkpoint):
        sys.exit(f'test.py: checkpoint {args.checkpoint} does not exist')
    cfg = Config.fromfile(args.config)
    if args.dump is not None:
        if args.dump.endswith('.csv'):
            dump = dict(type='DumpPredictions', out_file_path=args.dump)
        elif args.dump.endswith(('.pkl', '.pickle')):
            dump = dict(type='DumpResults', out_file_path=args.dump)
        else:
            sys.exit(f'test.py: --dump must end in .csv or .pkl, got {args.dump}')
        evaluators = cfg.test_evaluator
        cfg.test_evaluator = [*(evaluators if isinstance(evaluators, (list, tuple))
                                else [evaluators]), dump]
    cfg.load_from = args.checkpoint
    cfg = prepare_cfg(cfg, args.config, args.launcher, args.work_dir, args.cfg_options)
    try:
        runner = Runner.from_cfg(cfg)
        metrics = runner.test()
        if runner.rank == 0:
            print(format_metrics(metrics), flush=True)
    finally:
        shutdown_distributed()
    return metrics


if __name__ == '__main__':
    main()
