#!/usr/bin/env python
"""Write the features a trained recognizer computes for videos, one ``.npy`` per video or one file.

    python tools/extract_features.py CONFIG CHECKPOINT --videos LIST|DIR --out DIR
        [--level pooled|pre-head|tokens] [--per video|clip] [--single-file | --over-time [--stride S]]
        [--overwrite] [--video-root DIR] [--workers N] [--launcher {none,pytorch,slurm}] [--partial-load]
        [--cfg-options k=v ...] [--debug]
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
(default) averages the views, ``--per clip`` keeps them. One clip of a long video stands for all
of it (a note names such videos): ``--over-time`` slides the clip along each video every
``--stride`` seconds (default: half a clip's span), as ``tools/infer.py --over-time`` does, and
gives one row per window, ``[W, ...]``, with the windows' start and end seconds beside it.

DIR/<video name relative to the folder / video root>.npy per video (two videos of one stem keep
their suffix: a.avi.npy, a.mp4.npy), with ``--over-time`` its windows in
DIR/<name>.windows.csv (window, start, end); DIR/index.csv (row, video, file, shape[, windows])
and DIR/features.json (the settings: a digest of the model and test pipeline, of the
checkpoint, the level, views and windows; a resumed run must match them, else it is refused:
``--overwrite`` replaces what is there). With ``--single-file``: DIR/features.npy ``[N, ...]``
whose rows index.csv names (assembled from DIR/parts/, the per-video files a run resumes from).
A run stopped at any point resumes at the first video without its file (or with a file older
than the video). Unreadable videos are printed (file and reason) and listed in
DIR/unreadable.txt; the others go on, and the exit status is then 1. A mistake in the input is
one line and exit status 2 (``--debug``: the traceback).
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
        '--over-time',
        action='store_true',
        help='slide the clip along each video: one row per window, with its times (DIR/NAME.windows.csv)',
    )
    p.add_argument(
        '--stride',
        type=float,
        metavar='SECONDS',
        help='--over-time: seconds between windows (default: half a clip)',
    )
    p.add_argument('--overwrite', action='store_true', help='replace the features already in --out')
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
    if args.over_time and args.single_file:
        p.error(
            '--over-time gives each video its own number of windows: one file per video, not --single-file'
        )
    if args.stride is not None and not args.over_time:
        p.error('--stride is the step of --over-time\'s windows: add --over-time')
    if args.stride is not None and not 0 < args.stride < float('inf'):
        p.error(f'--stride must be a positive number of seconds, got {args.stride}')
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
    if isinstance(cfg.get('test_dataloader'), dict):
        cfg.test_dataloader.batch_size = 1  # one video at a time here (max_testing_views needs it)
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

    from dna_mm.apis.features import FeatureStore, extraction_settings, run_extraction
    from dna_mm.apis.inference import LONG, load_recognizer, test_pipeline_of

    root = args.videos if os.path.isdir(args.videos) else (args.video_root or str(Path(args.videos).parent))
    pipeline = test_pipeline_of(cfg, args.cfg_options)
    windows = (args.stride or 'half a clip') if args.over_time else None
    settings = extraction_settings(
        cfg.model, pipeline, args.config, args.checkpoint, root, args.level, args.per, windows
    )
    store = FeatureStore(
        args.out, root, videos, settings, args.single_file, args.over_time, overwrite=args.overwrite
    )
    model = load_recognizer(cfg, args.checkpoint, device, partial=args.partial_load)
    if args.overwrite:  # once the model loaded: a refused checkpoint leaves the old features
        if rank == 0:
            store.clear()
        if world > 1:
            dist.barrier()
    loader = cfg.get('test_dataloader') or {}
    workers = args.workers if args.workers is not None else min(int(loader.get('num_workers', 0)), 4)
    found = run_extraction(
        model,
        pipeline,
        videos,
        store,
        args.level,
        args.per,
        rank,
        world,
        workers,
        args.over_time,
        args.stride,
    )
    shards = [found]
    if world > 1:
        shards = [None] * world
        dist.all_gather_object(shards, found)
    if rank != 0:
        return 0
    failed = {video: why for shard in shards for video, why in shard.unreadable.items()}
    long = {video: seconds for shard in shards for video, seconds in shard.long.items()}
    readable = [v for v in videos if v not in failed and store.done(v)]
    store.write_index(readable)  # the folder and its settings file too, when no feature was written
    listed = Path(args.out) / 'unreadable.txt'
    if failed:
        listed.write_text(''.join(f'{v}\t{why}\n' for v, why in failed.items()), encoding='utf-8')
    else:
        listed.unlink(missing_ok=True)
    single = store.assemble(readable) if args.single_file else None
    where = f'{single} (rows: index.csv)' if single else f'{store.parts}/ (index.csv)'
    per = 'window' if args.over_time else args.per
    print(f'{args.level} features per {per} of {len(readable)} of {len(videos)} videos: {where}')
    if long:
        video, (seconds, clip) = max(long.items(), key=lambda item: item[1][0])
        many = f'{len(long)} videos last' if len(long) > 1 else 'a video lasts'
        print(
            f'note: {many} more than {LONG} clips of the test views, and one row of features stands for '
            f'each (the longest, {video}: {seconds:.1f} s, a clip {clip:.2f} s); --over-time gives a row '
            'per window along each video',
            file=sys.stderr,
        )
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
