#!/usr/bin/env python
"""Write the features a trained recognizer computes for videos, one ``.npy`` per video or one file.

    python tools/extract_features.py CONFIG CHECKPOINT --videos LIST|DIR --out DIR
        [--level pooled|pre-head|tokens] [--per video|clip] [--single-file] [--video-root DIR]
        [--workers N] [--launcher {none,pytorch,slurm}] [--partial-load] [--cfg-options k=v ...] [--debug]
    # several GPUs, the usual launcher:
    python -m torch.distributed.run --nproc_per_node 8 tools/extract_features.py ... --launcher pytorch

``--videos`` is a folder (its videos, recursively) or a list (one path per line; MMAction2's
``path label`` lists work, with ``--video-root`` for the folder their paths are relative to).
Each video goes through the config's test pipeline (``test_dataloader.dataset.pipeline``, or
the top-level ``test_pipeline`` when ``--cfg-options`` changes that one; its clips x crops are
the views) and the recognizer's ``extract_feat`` (``model.test_cfg.max_testing_views`` bounds
memory). Levels
(dna_mm.apis.features): ``pooled`` (default) the classifier's input, for TimeSformer the CLS token
after the last norm, ``[views, C]``; ``pre-head`` what the recognizer hands its head;
``tokens`` every token after the backbone's final norm, ``[views, 1 + P*T, C]``. ``--per video``
(default) averages the views, ``--per clip`` keeps them.

DIR/<video name relative to the folder / video root>.npy per video, DIR/index.csv (row, video,
file, shape) and DIR/features.json (the settings; a resumed run must match them; written with
the first features, so a run refused or stopped before them leaves nothing that refuses its rerun). With
``--single-file``: DIR/features.npy ``[N, ...]`` whose rows index.csv names (assembled from
DIR/parts/, the per-video files a run resumes from). A run stopped at any point resumes at the
first video without its file. Unreadable videos are printed (file and
reason) and listed in DIR/unreadable.txt; the others go on, and the exit status is then 1. A
mistake in the input is one line and exit status 2 (``--debug``: the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mmengine.config import Config

#: ``dna_mm.apis.features.LEVELS`` and ``PER`` (a test keeps them equal)
LEVELS = ('pooled', 'pre-head', 'tokens')
PER = ('video', 'clip')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Extract video features with a dna_mm recognizer')
    p.add_argument('config', help='config file')
    p.add_argument('checkpoint', help='checkpoint: local file, URL or mmengine prefix')
    p.add_argument('--videos', required=True, help='a folder of videos or a list of videos (.txt)')
    p.add_argument('--out', required=True, help='output folder')
    p.add_argument('--video-root', help="folder the paths of a list are relative to (default: the list's)")
    p.add_argument('--level', choices=LEVELS, default='pooled', help='which features (default pooled)')
    p.add_argument(
        '--per', choices=PER, default='video', help='average the views (video) or keep them (clip)'
    )
    p.add_argument('--single-file', action='store_true', help='one features.npy with index.csv')
    p.add_argument(
        '--workers', type=int, help="decoding processes (default: the config's test_dataloader.num_workers)"
    )
    p.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none')
    p.add_argument('--local_rank', '--local-rank', type=int, default=0)
    p.add_argument('--partial-load', action='store_true', help='accept a checkpoint that does not match')
    p.add_argument(
        '--cfg-options', nargs='+', metavar='KEY=VALUE', help='override config settings, key=value'
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.workers is not None and args.workers < 0:
        p.error(f'--workers must be >= 0, got {args.workers}')
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def extract(args: argparse.Namespace) -> int:
    import dna_mm  # noqa: F401  (registers the models, safe checkpoint loading)
    from dna_mm.apis.inference import collect_videos
    from dna_mm.config.build import read_config
    from dna_mm.config.check import check_config
    from dna_mm.config.prepare import shutdown_distributed
    from dna_mm.engine.distributed import start_distributed
    from dna_mm.errors import UserError
    from dna_mm.tools.cli import output_file, user_file

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UserError(f'--out {args.out} is a file, not a folder')
    output_file(os.path.join(args.out, 'features.json'), '--out')  # under a file, or not writable
    cfg = read_config(args.config, args.cfg_options)
    check_config(cfg, 'test')
    user_file(args.checkpoint, 'checkpoint')
    videos = collect_videos(args.videos, args.video_root)
    rank, world, device = start_distributed(args.launcher)
    try:
        return extract_all(args, cfg, videos, rank, world, device)
    finally:
        shutdown_distributed()


def extract_all(
    args: argparse.Namespace, cfg: Config, videos: list[str], rank: int, world: int, device: str
) -> int:
    """This rank's share, then on rank 0: the unreadable list, the index (and the single file)."""
    import torch.distributed as dist

    from dna_mm.apis.features import FeatureStore, run_extraction
    from dna_mm.apis.inference import load_recognizer, test_pipeline_of

    root = args.videos if os.path.isdir(args.videos) else (args.video_root or str(Path(args.videos).parent))
    settings = dict(
        config=str(Path(args.config).resolve()),
        checkpoint=args.checkpoint,
        level=args.level,
        per=args.per,
        cfg_options=args.cfg_options or {},
    )
    store = FeatureStore(args.out, root, settings, args.single_file)
    model = load_recognizer(cfg, args.checkpoint, device, partial=args.partial_load)
    loader = cfg.get('test_dataloader') or {}
    workers = args.workers if args.workers is not None else min(int(loader.get('num_workers', 0)), 4)
    pipeline = test_pipeline_of(cfg, args.cfg_options)
    found = run_extraction(model, pipeline, videos, store, args.level, args.per, rank, world, workers)
    shards = [found]
    if world > 1:
        shards = [None] * world
        dist.all_gather_object(shards, found)
    if rank != 0:
        return 0
    failed = {video: why for shard in shards for video, why in shard.items()}
    readable = [v for v in videos if v not in failed and store.done(v)]
    store.write_index(readable)  # the folder and its settings file too, when no feature was written
    listed = Path(args.out) / 'unreadable.txt'
    if failed:
        listed.write_text(''.join(f'{v}\t{why}\n' for v, why in failed.items()), encoding='utf-8')
    else:
        listed.unlink(missing_ok=True)
    single = store.assemble(readable) if args.single_file else None
    where = f'{single} (rows: index.csv)' if single else f'{store.parts}/ (index.csv)'
    print(f'{args.level} features per {args.per} of {len(readable)} of {len(videos)} videos: {where}')
    if failed:
        print(f'{len(failed)} unreadable, listed in {listed}:', file=sys.stderr)
        for video, why in list(failed.items())[:20]:
            print(f'  {video}: {why}', file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('extract_features.py', extract, args)


if __name__ == '__main__':
    sys.exit(main())
