#!/usr/bin/env python
"""Measure the data preparation on generated videos: keyframe interval vs decoding, tool throughput.

    python tools/benchmarks/benchmark_preparation.py keyint [--size 456x256] [--frames 300] \
        [--keyints 250 64 32 16 8 4] [--videos 3] [--clips 40]
    python tools/benchmarks/benchmark_preparation.py tool {resize,crops} --size 1920x1080 --frames 90 \
        [--videos 20] [--workers N]

``keyint``: ms per training clip (the configs' train pipeline up to its decode: 8 frames at 32)
and file size per keyframe interval, timed in turns in one run. ``tool``: runs
tools/data/resize_videos.py or tools/data/ntu60/person_crops.py on generated sources and
prints seconds per 1,000 videos with N workers. Numbers in docs/datasets/*.md come from here.
The work: ``dna_mm/benchmarks/preparation.py``.
"""

import argparse
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='what', required=True)
    k = sub.add_parser('keyint')
    k.add_argument('--size', default='456x256', help='source size, WIDTHxHEIGHT')
    k.add_argument('--frames', type=int, default=300)
    k.add_argument('--keyints', type=int, nargs='+', default=[250, 64, 32, 16, 8, 4])
    k.add_argument('--videos', type=int, default=3)
    k.add_argument('--clips', type=int, default=40, help='timed clips per keyframe interval')
    t = sub.add_parser('tool')
    t.add_argument('tool', choices=['resize', 'crops'])
    t.add_argument('--size', required=True, help='source size, e.g. 1920x1080')
    t.add_argument('--frames', type=int, required=True)
    t.add_argument('--videos', type=int, default=20)
    t.add_argument('--workers', type=int, default=None)  # default: every core this process may use
    args = p.parse_args()
    from dna_mm.benchmarks.preparation import keyint_sweep, time_tool
    from dna_mm.preparation.runner import default_workers
    from dna_mm.tools.cli import parse_size

    if args.what == 'tool' and args.workers is None:
        args.workers = default_workers()
    try:
        w, h = parse_size(args.size)
    except ValueError as err:
        p.error(str(err))
    if args.what == 'keyint':
        print(f'{w}x{h}, {args.frames} frames, {args.videos} videos, {args.clips} clips per keyint')
        print('keyint | CPU ms/clip | wall ms/clip | KiB/video | speed (CPU) | size')
        print('---|---|---|---|---|---')
        for r in keyint_sweep(w, h, args.frames, args.keyints, args.videos, args.clips):
            print(
                f'{r["keyint"]} | {r["cpu_ms"]:.1f} | {r["wall_ms"]:.1f} | {r["bytes"] / 1024:.0f} | '
                f'{r["speed_vs_first"]:.2f}x | {r["size_vs_first"]:.2f}x'
            )
    else:
        r = time_tool(args.tool, w, h, args.frames, args.videos, args.workers)
        print(
            f'{args.tool}: {args.videos} videos {r["size"]} x {args.frames} frames, {args.workers} workers: '
            f'{r["wall_s"]:.1f} s wall ({r["startup_s"]:.1f} s start-up)'
        )
        cpu = r['cpu_s_per_video']
        print(f'  wall: {r["s_per_1000"] / 60:.1f} min per 1,000 videos on {args.workers} workers')
        print(
            f'  CPU: {cpu:.2f} core-seconds per video = {1000 * cpu / 60:.0f} core-minutes per 1,000 videos'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
