#!/usr/bin/env python
"""Measure the data preparation on generated videos: keyframe interval vs decoding, tool throughput.

    python tools/data/benchmark_preparation.py keyint [--size 456x256] [--frames 300] \
        [--keyints 250 64 32 16 8 4] [--videos 3] [--clips 40]
    python tools/data/benchmark_preparation.py tool {resize,crops} --size 1920x1080 --frames 90 \
        [--videos 20] [--workers N]

``keyint``: ms per training clip (the configs' train pipeline up to its decode: 8 frames at 32)
and file size per keyframe interval, timed in turns in one run. ``tool``: runs
tools/data/resize_videos.py or tools/data/ntu60/person_crops.py on generated sources and
prints seconds per 1,000 videos with N workers. Numbers in docs/datasets/*.md come from here.
"""

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]


def keyint_sweep(
    width: int, height: int, frames: int, keyints: list[int], videos: int = 3, clips: int = 40, seed: int = 0
) -> list[dict]:
    """Per keyframe interval: median CPU and wall ms per training clip, bytes per video, ratios to
    the first. ``videos`` generated clips are encoded with the preparation tools' encoder
    (:func:`dna_mm.datasets.preparation.encoding.encode`) at each interval; a clip is the
    decoding steps of the configs' train pipeline (init → ``SampleFrames(clip_len=8,
    frame_interval=32)`` → decode) on a random file, the intervals in turns (shuffled per round)."""
    import numpy as np
    from mmaction.registry import TRANSFORMS
    from mmengine.config import Config

    import dna_mm  # noqa: F401  (registers dna_mm's decord transforms)
    from dna_mm.datasets.preparation.encoding import encode, resize_to
    from dna_mm.datasets.synthetic_video import camera_clip, write_video
    from dna_mm.utils.timing import median_ms, time_in_turns

    steps = []  # the train pipeline up to its decode
    for step in Config.fromfile(str(REPO / 'configs/_base_/datasets/video_8x32.py')).train_pipeline:
        steps.append(TRANSFORMS.build(step))
        if 'Decode' in step['type']:
            break
    rng = np.random.default_rng(seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = {k: [root / f'k{k}_{v}.mp4' for v in range(videos)] for k in keyints}
        for v in range(videos):
            src = write_video(
                root / f'src{v}.mp4', camera_clip(width, height, frames, seed + v), codec='libx264'
            )
            for k in keyints:
                encode(src, files[k][v], (width, height), resize_to(width, height), keyint=k, threads=1)
        video: dict = {}  # the round's video

        def order(r: int, keys: list[int]) -> list[int]:  # a random video, the intervals shuffled
            video['v'] = int(rng.integers(videos))
            return [int(k) for k in rng.permutation(keys)]

        def clip(k: int) -> Callable[[], int]:
            def decode() -> int:
                results = dict(filename=str(files[k][video['v']]), start_index=0, modality='RGB')
                for step in steps:
                    results = step(results)
                return len(results['imgs'])

            return decode

        times = time_in_turns({k: clip(k) for k in keyints}, clips, order=order)
        for k in keyints:
            assert all(s.value == 8 for s in times[k])
            size = sum(f.stat().st_size for f in files[k]) / videos
            cpu, wall = median_ms(times[k], 'cpu'), median_ms(times[k])
            rows.append(dict(keyint=k, cpu_ms=cpu, wall_ms=wall, bytes=size))
    for row in rows:
        row['speed_vs_first'] = rows[0]['cpu_ms'] / row['cpu_ms']
        row['size_vs_first'] = row['bytes'] / rows[0]['bytes']
    return rows


def _run_timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd``; its wall seconds and the CPU seconds (user + system) of it and its children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}')
    return wall, after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime


def _skeleton_text(frames: int, box: tuple[int, int, int, int], seed: int) -> str:
    """A ``.skeleton`` file with one 25-joint body whose colour coordinates fill ``box`` (1920x1080)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = box
    lines = [str(frames)]
    for _ in range(frames):
        lines += ['1', '72057594037931101 0 1 1 1 1 0 0.1 0.2 2', '25']
        for _ in range(25):
            cx, cy = rng.uniform(x0, x1), rng.uniform(y0, y1)
            lines.append(f'0.1 0.2 3.0 250.5 200.5 {cx:.3f} {cy:.3f} 0.9 0.01 0.02 0.03 2')
    return '\n'.join(lines) + '\n'


def time_tool(
    tool: str,
    width: int,
    height: int,
    frames: int,
    videos: int,
    workers: int,
    work_dir: Optional[Path] = None,
) -> dict:
    """Generate ``videos`` sources (and, for ``crops``, skeleton files), run the tool as a user runs
    it, ``resize`` (short side 256) or ``crops`` (224²); its timings, start-up apart."""
    import numpy as np

    from dna_mm.datasets.synthetic_video import camera_clip, write_video

    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        src, out, skeletons = root / 'videos', root / 'out', root / 'skeletons'
        src.mkdir()
        skeletons.mkdir()
        rng = np.random.default_rng(0)
        for v in range(videos):
            clip = camera_clip(width, height, frames, seed=v)
            if tool != 'crops':
                write_video(src / f'v{v:03d}.mp4', clip, codec='libx264')
                continue
            name = f'S001C001P{v + 1:03d}R001A001'
            write_video(src / f'{name}_rgb.avi', clip, bit_rate=6_000_000)
            w, h = rng.uniform(200, 500), rng.uniform(500, 900)
            x0, y0 = rng.uniform(0, 1920 - w), rng.uniform(0, 1080 - h)
            box = (int(x0), int(y0), int(x0 + w), int(y0 + h))
            (skeletons / f'{name}.skeleton').write_text(_skeleton_text(frames, box, v))
        if tool == 'crops':
            args = ['ntu60/person_crops.py', '--video-dir', str(src), '--skeleton-dir', str(skeletons)]
            args += ['--out-dir', str(out)]
        else:
            args = ['resize_videos.py', str(src), str(out), '--short-side', '256']
        script = str(REPO / 'tools/data' / args[0])
        wall, cpu = _run_timed([sys.executable, script, *args[1:], '--workers', str(workers)])
        # the interpreter and package start-up is paid once per run, not per video (the tool's
        # --help answers before it imports the package: the start-up is the import of its module)
        module = 'person_crops' if tool == 'crops' else 'resize'
        startup, startup_cpu = _run_timed(
            [sys.executable, '-c', f'import dna_mm.datasets.preparation.{module}']
        )
    return dict(
        size=f'{width}x{height}',
        wall_s=wall,
        startup_s=startup,
        s_per_1000=1000 * (wall - startup) / videos,
        cpu_s_per_video=(cpu - startup_cpu) / videos,
    )


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
    from dna_mm.apis.cli import parse_size
    from dna_mm.datasets.preparation.runner import default_workers

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
