"""Measurements behind the preparation defaults, on generated videos.

Run by ``tools/data/benchmark_preparation.py``:

* :func:`keyint_sweep`: for each keyframe interval, encode the same generated clips with the
  tools' encoder (:func:`~.encoding.encode`) and time what training does with them: the
  decoding steps of the configs' train pipeline (init → ``SampleFrames(clip_len=8,
  frame_interval=32, num_clips=1)`` → decode) on a random clip of a random file. The keyframe
  intervals are timed in turns (round robin, shuffled per round) so that load on the machine
  hits all of them alike.
* :func:`time_tool`: generate ``n`` source videos (and, for person crops, skeleton files),
  run the tool as a user runs it and report seconds per 1,000 videos.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np

from ..synthetic_video import camera_clip, write_video
from .encoding import encode, resize_to

REPO = Path(__file__).resolve().parents[3]


def _train_decode_steps() -> list:
    """The train pipeline's steps up to its decode (``configs/_base_/datasets/video_8x32.py``)."""
    from mmaction.registry import TRANSFORMS
    from mmengine.config import Config

    import dna_mm  # noqa: F401  (registers dna_mm's decord transforms)

    steps = []
    for step in Config.fromfile(str(REPO / 'configs/_base_/datasets/video_8x32.py')).train_pipeline:
        steps.append(TRANSFORMS.build(step))
        if 'Decode' in step['type']:
            return steps
    return steps


def keyint_sweep(
    width: int, height: int, frames: int, keyints: list[int], videos: int = 3, clips: int = 40, seed: int = 0
) -> list[dict]:
    """Per keyframe interval: median CPU and wall ms per training clip, bytes per video, ratios to the first.

    CPU time (all threads of this process) is the figure to compare on a machine shared with
    other work, where wall time also counts the waits for a core.
    """
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sources = []
        for v in range(videos):
            sources.append(root / f'src{v}.mp4')
            write_video(sources[-1], camera_clip(width, height, frames, seed=seed + v), codec='libx264')
        files: dict[int, list[Path]] = {}
        for k in keyints:
            files[k] = [root / f'k{k}_{v}.mp4' for v in range(videos)]
            for src, dst in zip(sources, files[k], strict=True):
                encode(src, dst, (width, height), resize_to(width, height), keyint=k, threads=1)
        cpu: dict[int, list[float]] = {k: [] for k in keyints}
        wall: dict[int, list[float]] = {k: [] for k in keyints}
        steps = _train_decode_steps()
        for _ in range(clips):
            v = int(rng.integers(videos))
            for k in rng.permutation(keyints):
                results = dict(filename=str(files[int(k)][v]), start_index=0, modality='RGB')
                start, start_cpu = time.perf_counter(), time.process_time()
                for step in steps:
                    results = step(results)
                cpu[int(k)].append(time.process_time() - start_cpu)
                wall[int(k)].append(time.perf_counter() - start)
                assert len(results['imgs']) == 8
        rows = []
        for k in keyints:
            size = sum(f.stat().st_size for f in files[k]) / videos
            rows.append(
                dict(
                    keyint=k,
                    cpu_ms=1000 * float(np.median(cpu[k])),
                    wall_ms=1000 * float(np.median(wall[k])),
                    bytes=size,
                )
            )
    base = rows[0]
    for row in rows:
        row['speed_vs_first'] = base['cpu_ms'] / row['cpu_ms']
        row['size_vs_first'] = row['bytes'] / base['bytes']
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
    """Generate ``videos`` sources, run ``resize`` (short side 256) or ``crops`` (224²) on them; timings."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        root = Path(tmp)
        src, out = root / 'videos', root / 'out'
        src.mkdir()
        rng = np.random.default_rng(0)
        for v in range(videos):
            clip = camera_clip(width, height, frames, seed=v)
            if tool == 'crops':
                name = f'S001C001P{v + 1:03d}R001A001'
                write_video(src / f'{name}_rgb.avi', clip, bit_rate=6_000_000)
                w, h = rng.uniform(200, 500), rng.uniform(500, 900)
                x0, y0 = rng.uniform(0, 1920 - w), rng.uniform(0, 1080 - h)
                box = (int(x0), int(y0), int(x0 + w), int(y0 + h))
                (root / 'skeletons').mkdir(exist_ok=True)
                (root / 'skeletons' / f'{name}.skeleton').write_text(_skeleton_text(frames, box, v))
            else:
                write_video(src / f'v{v:03d}.mp4', clip, codec='libx264')
        if tool == 'crops':
            skeletons = str(root / 'skeletons')
            tool_args = ['ntu60/person_crops.py', '--video-dir', str(src), '--skeleton-dir', skeletons]
            tool_args += ['--out-dir', str(out)]
        else:
            tool_args = ['resize_videos.py', str(src), str(out), '--short-side', '256']
        script = str(REPO / 'tools/data' / tool_args[0])
        wall, cpu = _run_timed([sys.executable, script, *tool_args[1:], '--workers', str(workers)])
        # the interpreter and package start-up is paid once per run, not per video
        startup, startup_cpu = _run_timed([sys.executable, script, '--help'])
    per_video = (wall - startup) / videos
    return dict(
        tool=tool,
        size=f'{width}x{height}',
        frames=frames,
        videos=videos,
        workers=workers,
        wall_s=wall,
        startup_s=startup,
        s_per_1000=1000 * per_video,
        cpu_s_per_video=(cpu - startup_cpu) / videos,
    )
