"""The data preparation measured on generated videos: the work of
``tools/benchmarks/benchmark_preparation.py`` (the figures of ``docs/datasets/*.md``).

:func:`keyint_sweep`: the configs' decoding of a training clip per keyframe interval of the
preparation tools' encoder, the intervals timed in turns (:mod:`.timing`); :func:`time_tool`: a
preparation tool (``tools/data/resize_videos.py``, ``tools/data/ntu60/person_crops.py``) run as a
user runs it on generated sources, its seconds per 1,000 videos.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from ..config.build import read_config
from ..preparation.encoding import encode, resize_to
from ..synthetic.videos import camera_clip, write_video
from ..utils.mim_compat import mim_folder
from .timing import median_ms, time_in_turns

#: the configs' train pipeline whose decoding :func:`keyint_sweep` times (a shipped config)
TRAIN_PIPELINE = 'dna_mm::_base_/datasets/video_8x32.py'


def keyint_sweep(
    width: int, height: int, frames: int, keyints: list[int], videos: int = 3, clips: int = 40, seed: int = 0
) -> list[dict]:
    """Per keyframe interval: median CPU and wall ms per training clip, bytes per video, ratios to
    the first. ``videos`` generated clips are encoded with the preparation tools' encoder
    (:func:`dna_mm.preparation.encoding.encode`) at each interval; a clip is the
    decoding steps of the configs' train pipeline (init → ``SampleFrames(clip_len=8,
    frame_interval=32)`` → decode) on a random file, the intervals in turns (shuffled per round)."""
    from mmaction.registry import TRANSFORMS

    steps = []  # the train pipeline up to its decode
    for step in read_config(TRAIN_PIPELINE).train_pipeline:
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


def run_timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd``; its wall seconds and the CPU seconds (user + system) of it and its children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}')
    return wall, after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime


def skeleton_text(frames: int, box: tuple[int, int, int, int], seed: int) -> str:
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
    """Generate ``videos`` sources (and, for ``crops``, skeleton files), run the tool as a user runs
    it, ``resize`` (short side 256) or ``crops`` (224²); its timings, start-up apart."""

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
            (skeletons / f'{name}.skeleton').write_text(skeleton_text(frames, box, v))
        if tool == 'crops':
            args = ['ntu60/person_crops.py', '--video-dir', str(src), '--skeleton-dir', str(skeletons)]
            args += ['--out-dir', str(out)]
        else:
            args = ['resize_videos.py', str(src), str(out), '--short-side', '256']
        script = str(mim_folder('tools') / 'data' / args[0])
        wall, cpu = run_timed([sys.executable, script, *args[1:], '--workers', str(workers)])
        # the interpreter and package start-up is paid once per run, not per video (the tool's
        # --help answers before it imports the package: the start-up is the import of its module)
        module = 'person_crops' if tool == 'crops' else 'resize'
        startup, startup_cpu = run_timed([sys.executable, '-c', f'import dna_mm.preparation.{module}'])
    return dict(
        size=f'{width}x{height}',
        wall_s=wall,
        startup_s=startup,
        s_per_1000=1000 * (wall - startup) / videos,
        cpu_s_per_video=(cpu - startup_cpu) / videos,
    )
