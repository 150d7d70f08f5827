#!/usr/bin/env python
"""Throughput of a config's data path: its pipeline in one process (decode and transforms timed
apart, beside MMAction2's stock decord pipeline) and its DataLoader per worker count.

    python tools/benchmarks/benchmark_data.py CONFIG [--split train] [--num-clips N]
        [--workers W [W ...]] [--synthetic WxH [WxH ...]] [--clips-per-s-per-gpu 200]
        [--frames 90] [--codec {mpeg4,h264}] [--keyint K] [--bframes B] [--container {mp4,avi}] [--packed]
        [--compare TYPE [TYPE ...]] [--cfg-options k=v ...]
    # the table of docs/data_throughput.md (synthetic videos, no dataset needed)
    python tools/benchmarks/benchmark_data.py configs/timesformer_dna_ntu60.py --num-clips 30 \\
        --synthetic 1920x1080 1280x720 960x540 640x480 340x256 224x224 --workers 0 2

Without ``--synthetic`` it reads the config's own list (``{split}_dataloader``). With it, it
writes ``--videos`` synthetic videos per size (``--frames`` frames at 30 fps; MPEG-4 Part 2
at 0.1 bit per pixel, about NTU RGB+D's 1080p rate, or H.264 CRF 23 as dna_mm's preparation
tools write it; ``--keyint`` sets the keyframe interval, ``--bframes`` the B-frames between
references, ``--container`` mp4 or avi) to a temporary folder that is removed afterwards.
``stock`` is the same pipeline with MMAction2's ``DecordInit`` / ``DecordDecode`` in place of
dna_mm's ``ScaledPyAVInit`` (or ``ScaledDecordInit``) / ``SortedDecordDecode`` (the baseline,
measured in the same run, clip by clip on the same frames); ``--compare TYPE`` times the
config's pipeline with its opening transform's type replaced by ``TYPE`` too (another reader:
``ScaledDecordInit``, or one a module in ``custom_imports`` registers, named with
``--cfg-options``). ``clips/s per core`` is one clip
per CPU second of the process; ``workers per GPU`` divides ``--clips-per-s-per-gpu`` (a model's
training rate) by it. The work: ``dna_mm/benchmarks/data.py``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Throughput of a config's data pipeline and DataLoader")
    p.add_argument('config', help='config file')
    p.add_argument('--split', default='train', choices=['train', 'val', 'test'], help='which dataloader')
    p.add_argument('--num-clips', type=int, default=20, help='clips timed per pipeline and per loader')
    p.add_argument('--workers', type=int, nargs='*', default=[], help='DataLoader worker counts to time')
    p.add_argument('--synthetic', nargs='+', metavar='WxH', help='time synthetic videos of these sizes')
    p.add_argument('--clips-per-s-per-gpu', type=float, default=200.0, help="a GPU's training rate")
    p.add_argument('--frames', type=int, default=90, help='frames per synthetic video')
    p.add_argument('--codec', default='mpeg4', choices=['mpeg4', 'h264'], help='synthetic video codec')
    p.add_argument('--keyint', type=int, default=None, help='synthetic keyframe interval (encoder default)')
    p.add_argument('--bframes', type=int, default=None, help='synthetic B-frames between references')
    p.add_argument('--container', default='mp4', choices=['mp4', 'avi'], help='synthetic video container')
    p.add_argument(
        '--packed', action='store_true', help='synthetic DivX packed B-frames (mpeg4, avi, --bframes 1)'
    )
    p.add_argument('--videos', type=int, default=2, help='synthetic videos per size')
    p.add_argument(
        '--compare', nargs='+', default=[], metavar='TYPE', help='also time these opening transforms'
    )
    p.add_argument('--no-baseline', action='store_true', help="skip MMAction2's stock pipeline")
    p.add_argument(
        '--cfg-options', nargs='+', metavar='KEY=VALUE', help='override config settings, key=value'
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.num_clips < 1:
        p.error(f'--num-clips must be at least 1, got {args.num_clips}')
    if any(w < 0 for w in args.workers):
        p.error(f'--workers must be >= 0, got {args.workers}')
    if args.packed and (args.codec, args.container, args.bframes) != ('mpeg4', 'avi', 1):
        p.error('--packed needs --codec mpeg4 --container avi --bframes 1')
    return args


def benchmark(args: argparse.Namespace) -> None:
    from dna_mm.benchmarks.data import benchmark_config, format_report
    from dna_mm.config.build import read_config
    from dna_mm.errors import ConfigError
    from dna_mm.tools.cli import parse_size

    try:
        sizes = [parse_size(s) for s in args.synthetic or []]
    except ValueError as err:
        raise ConfigError(str(err)) from None
    cfg = read_config(args.config, args.cfg_options)  # a module in custom_imports registers its transforms
    with tempfile.TemporaryDirectory(prefix='dna_mm_bench_data_') as tmp:
        rows = benchmark_config(
            cfg,
            split=args.split,
            num_clips=args.num_clips,
            workers=args.workers,
            sizes=sizes,
            gpu_rate=args.clips_per_s_per_gpu,
            tmp_dir=Path(tmp),
            baseline=not args.no_baseline,
            compare=args.compare,
            num_videos=args.videos,
            num_frames=args.frames,
            codec=args.codec,
            keyint=args.keyint,
            bframes=args.bframes,
            container=args.container,
            packed=args.packed,
        )
    print(f'\n{args.config}, {args.split} pipeline, {args.num_clips} clips per measurement (medians)\n')
    print(format_report(rows, args.clips_per_s_per_gpu))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    run_tool('benchmark_data.py', benchmark, args)


if __name__ == '__main__':
    main()
