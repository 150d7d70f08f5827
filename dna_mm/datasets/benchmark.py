"""Throughput of the data path (``tools/analysis/benchmark_data.py``: :func:`benchmark_config`)
and the measurements behind the preparation defaults (``tools/data/benchmark_preparation.py``:
:func:`keyint_sweep`, :func:`time_tool`), on the config's data or generated videos.

Pipelines are timed in this process, clip by clip, in wall time and in CPU time of the process
(all its threads): the figure to compare on a machine shared with other work, where wall time
also counts the waits for a core. ``clips/s per core`` is ``1 / (CPU seconds per clip)``: what
one dataloader worker on one free core delivers; ``workers per GPU`` is
``ceil(gpu_rate / clips/s per core)``.
"""

from __future__ import annotations

import copy
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import ConfigError
from .preparation.encoding import encode, resize_to
from .synthetic_video import camera_clip, panning_clip, write_video

REPO = Path(__file__).resolve().parents[2]
#: transforms replaced by MMAction2's own to get the stock pipeline (the baseline)
STOCK = {
    'ScaledPyAVInit': 'DecordInit',
    'ScaledDecordInit': 'DecordInit',
    'SortedDecordDecode': 'DecordDecode',
}


def parse_size(text: str) -> tuple[int, int]:
    """``'1920x1080'`` → ``(1920, 1080)``; a clear ``ValueError`` otherwise."""
    try:
        w, h = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise ValueError(f'size {text!r}: expected WIDTHxHEIGHT, e.g. 1920x1080') from None
    if w < 16 or h < 16:
        raise ValueError(f'size {text!r}: width and height must be at least 16')
    return w, h


def write_video_set(
    out_dir: Path,
    size: tuple[int, int],
    num_videos: int,
    num_entries: int,
    num_frames: int = 90,
    codec: str = 'mpeg4',
    keyint: Optional[int] = None,
) -> Path:
    """``num_videos`` :func:`~dna_mm.datasets.synthetic_video.panning_clip` videos of ``size`` at
    30 fps in ``out_dir`` and an MMAction2 list (``out_dir/list.txt``, label 0) with
    ``num_entries`` lines cycling over them; returns the list's path. ``codec``: ``mpeg4``
    (MPEG-4 Part 2 at 0.1 bit per pixel, about NTU RGB+D's 1080p bit rate) or ``h264`` (libx264,
    CRF 23, as dna_mm's preparation tools write it); ``keyint``: keyframe interval."""
    names = [f'{size[0]}x{size[1]}_{i}.mp4' for i in range(num_videos)]
    bit_rate = None if codec == 'h264' else int(0.1 * size[0] * size[1] * 30)
    codec = 'libx264' if codec == 'h264' else codec
    for i, name in enumerate(names):
        write_video(out_dir / name, panning_clip(*size, num_frames, seed=i), 30, codec, bit_rate, keyint)
    ann = out_dir / 'list.txt'
    ann.write_text(''.join(f'{names[i % num_videos]} 0\n' for i in range(num_entries)))
    return ann


def stock_pipeline(pipeline: Sequence[dict]) -> list[dict]:
    """The pipeline with dna_mm's decoding transforms replaced by MMAction2's (``DecordInit`` with
    its defaults, ``DecordDecode``): the data path as MMAction2 ships it."""
    stock = []
    for step in pipeline:
        step = copy.deepcopy(dict(step))
        if step['type'] in STOCK:
            kept = {'io_backend'} if step['type'].endswith('Init') else {'mode'}
            step = {'type': STOCK[step['type']], **{k: v for k, v in step.items() if k in kept}}
        stock.append(step)
    return stock


def time_pipeline(
    dataset: Any, pipelines: dict[str, Any], num_clips: int, warmup: int = 1, seed: int = 0
) -> dict[str, dict]:
    """Run each pipeline (name → mmengine ``Compose`` or list of transforms) on ``num_clips``
    samples of ``dataset`` (``get_data_info``, cycling over its list), taking turns clip by clip
    with the same NumPy random state (the same frames and crops) and alternating which goes first
    (load drift hits them alike); the first ``warmup`` clips are not counted. Per pipeline: median
    ms per clip, ``decode_ms`` (up to and including the ``*Decode`` transform) / ``transforms_ms``
    (after it) in CPU time, ``cpu_ms`` / ``wall_ms`` (the whole pipeline), ``clips_per_core`` and
    the ``shape`` of the packed ``inputs``."""
    steps = {name: list(getattr(p, 'transforms', p)) for name, p in pipelines.items()}
    times: dict[str, list] = {name: [] for name in pipelines}  # per clip: decode CPU, rest CPU, wall
    shapes = {}
    for i in range(warmup + num_clips):
        info = dataset.get_data_info(i % len(dataset))
        order = list(steps.items())
        for name, transforms in order if i % 2 else order[::-1]:  # alternate who goes first
            np.random.seed(seed + i)
            results = copy.deepcopy(info)
            cut = next((j + 1 for j, t in enumerate(transforms) if type(t).__name__.endswith('Decode')), 0)
            w0, c0 = time.perf_counter(), time.process_time()
            for t in transforms[:cut]:
                results = t(results)
            c1 = time.process_time()
            for t in transforms[cut:]:
                results = t(results)
            if i >= warmup:
                times[name].append((c1 - c0, time.process_time() - c1, time.perf_counter() - w0))
                inputs = results.get('inputs') if isinstance(results, dict) else None
                shapes[name] = tuple(inputs.shape) if inputs is not None else None
    timings = {}
    for name, clips in times.items():
        decode, rest, wall = np.asarray(clips).T
        cpu_ms = 1000 * float(np.median(decode + rest))
        timings[name] = dict(
            decode_ms=1000 * float(np.median(decode)),
            transforms_ms=1000 * float(np.median(rest)),
            cpu_ms=cpu_ms,
            wall_ms=1000 * float(np.median(wall)),
            clips_per_core=1000 / cpu_ms,
            shape=shapes[name],
        )
    return timings


def time_dataloader(loader_cfg: dict, num_workers: int, num_clips: int, seed: int = 0) -> float:
    """Clips/s through the DataLoader built from ``loader_cfg`` with ``num_workers`` workers: the
    batches after the first (worker start-up excluded) until ``num_clips`` clips were read."""
    from mmengine.runner import Runner

    cfg = copy.deepcopy(loader_cfg)
    cfg.update(num_workers=num_workers, persistent_workers=False)
    if num_workers == 0:
        cfg.pop('prefetch_factor', None)
    clips, start = 0, None
    for batch in Runner.build_dataloader(cfg, seed=seed):
        if start is None:
            start = time.perf_counter()
            continue
        clips += len(batch['inputs'])
        if clips >= num_clips:
            break
    if clips == 0:
        raise ConfigError(
            f'the dataset yielded too few batches to time (need more than one batch of '
            f'{cfg.get("batch_size")}); give it a longer list or a smaller batch_size'
        )
    return clips / (time.perf_counter() - start)


def benchmark_config(
    cfg: Any,
    split: str = 'train',
    num_clips: int = 20,
    workers: Sequence[int] = (),
    sizes: Sequence[tuple[int, int]] = (),
    gpu_rate: float = 200.0,
    tmp_dir: Optional[Path] = None,
    baseline: bool = True,
    num_videos: int = 2,
    log: Any = print,
    **video: Any,
) -> list[dict]:
    """Time the ``{split}_dataloader`` of ``cfg`` (an mmengine ``Config``): its pipeline in this
    process (and MMAction2's stock decord pipeline beside it when ``baseline`` and the config
    uses dna_mm's), then its DataLoader with each worker count. With ``sizes``, on synthetic
    videos written to ``tmp_dir`` (``video``: :func:`write_video_set` options) instead of the
    config's list. Logs a line per measurement; returns one row (dict) per input and pipeline."""
    from mmaction.registry import DATASETS
    from mmengine.dataset import Compose

    loader_cfg = cfg.get(f'{split}_dataloader')
    if loader_cfg is None:
        raise ConfigError(f'the config has no {split}_dataloader')
    pipeline = loader_cfg['dataset']['pipeline']
    pipelines = {}  # built before any video is written: a bad step fails at once
    if baseline and any(step['type'] in STOCK for step in pipeline):
        pipelines['stock'] = Compose(stock_pipeline(pipeline))
    pipelines['config'] = Compose(pipeline)
    batch = int(loader_cfg.get('batch_size', 1))
    sources = [(str(loader_cfg['dataset'].get('ann_file')), copy.deepcopy(loader_cfg))] if not sizes else []
    if sizes and tmp_dir is None:
        raise ValueError('synthetic sizes need a tmp_dir')
    for w, h in sizes:
        folder = Path(tmp_dir) / f'{w}x{h}'
        log(f'writing synthetic {w}x{h} videos to {folder} ...')
        entries = max(num_clips + 1, batch * (math.ceil(num_clips / batch) + 2))
        source = copy.deepcopy(loader_cfg)
        source['dataset'].update(
            ann_file=str(write_video_set(folder, (w, h), num_videos, entries, **video)),
            data_prefix=dict(video=str(folder)),
        )
        sources.append((f'{w}x{h}', source))

    rows = []
    for label, source in sources:
        timings = time_pipeline(DATASETS.build(source['dataset']), pipelines, num_clips)
        base = timings.get('stock')
        for name, tm in timings.items():
            rows.append(
                dict(
                    tm,
                    input=label,
                    pipeline=name,
                    speedup=tm['clips_per_core'] / base['clips_per_core'] if base is not None else None,
                    workers_per_gpu=math.ceil(gpu_rate / tm['clips_per_core']),
                    loader={},
                )
            )
            log(
                f'{label} {name}: decode {tm["decode_ms"]:.1f} + transforms {tm["transforms_ms"]:.1f} '
                f'CPU ms per clip ({tm["wall_ms"]:.1f} ms wall) = {tm["clips_per_core"]:.1f} clips/s per '
                f'core; inputs {tm["shape"]}'
            )
        for w in workers:
            rows[-1]['loader'][w] = rate = time_dataloader(source, w, num_clips)
            log(f'{label} DataLoader, {w} workers: {rate:.1f} clips/s')
    return rows


def format_report(rows: Sequence[dict], gpu_rate: float) -> str:
    """Markdown tables of :func:`benchmark_config`'s rows: the one-process pipeline in CPU ms per
    clip (decode, transforms, total; wall total beside) and its speed-up over the stock pipeline,
    then the DataLoader rates."""
    lines = [
        f'| input | pipeline | decode | transforms | CPU ms per clip | wall ms per clip | clips/s per core '
        f'| vs stock | workers per GPU at {gpu_rate:g} clips/s |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for r in rows:
        ratio = f'{r["speedup"]:.2f}x' if r['speedup'] is not None else ''
        lines.append(
            f'| {r["input"]} | {r["pipeline"]} | {r["decode_ms"]:.1f} | {r["transforms_ms"]:.1f} '
            f'| {r["cpu_ms"]:.1f} | {r["wall_ms"]:.1f} | {r["clips_per_core"]:.1f} | {ratio} '
            f'| {r["workers_per_gpu"]} |'
        )
    loaders = [r for r in rows if r['loader']]
    if loaders:
        counts = sorted({w for r in loaders for w in r['loader']})
        lines += ['', '| input | ' + ' | '.join(f'{w} workers, clips/s' for w in counts) + ' |']
        lines.append('|---|' + '---|' * len(counts))
        for r in loaders:
            cells = ' | '.join(f'{r["loader"][w]:.1f}' if w in r['loader'] else '' for w in counts)
            lines.append(f'| {r["input"]} | {cells} |')
    return '\n'.join(lines)


def keyint_sweep(
    width: int, height: int, frames: int, keyints: list[int], videos: int = 3, clips: int = 40, seed: int = 0
) -> list[dict]:
    """Per keyframe interval: median CPU and wall ms per training clip, bytes per video, ratios to the
    first. ``videos`` generated clips are encoded with the preparation tools' encoder
    (:func:`~.preparation.encoding.encode`) at each interval; a clip is the decoding steps of the
    configs' train pipeline (init → ``SampleFrames(clip_len=8, frame_interval=32)`` → decode) on
    a random file, the intervals in turns (shuffled per round)."""
    from mmaction.registry import TRANSFORMS
    from mmengine.config import Config

    import dna_mm  # noqa: F401  (registers dna_mm's decord transforms)

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
        times: dict[int, list[tuple[float, float]]] = {k: [] for k in keyints}
        for _ in range(clips):
            v = int(rng.integers(videos))
            for k in map(int, rng.permutation(keyints)):
                results = dict(filename=str(files[k][v]), start_index=0, modality='RGB')
                start, start_cpu = time.perf_counter(), time.process_time()
                for step in steps:
                    results = step(results)
                times[k].append((time.process_time() - start_cpu, time.perf_counter() - start))
                assert len(results['imgs']) == 8
        for k in keyints:
            cpu, wall = np.median(times[k], axis=0)
            size = sum(f.stat().st_size for f in files[k]) / videos
            rows.append(dict(keyint=k, cpu_ms=1000 * float(cpu), wall_ms=1000 * float(wall), bytes=size))
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
            (skeletons / f'{name}.skeleton').write_text(_skeleton_text(frames, box, v))
        if tool == 'crops':
            args = ['ntu60/person_crops.py', '--video-dir', str(src), '--skeleton-dir', str(skeletons)]
            args += ['--out-dir', str(out)]
        else:
            args = ['resize_videos.py', str(src), str(out), '--short-side', '256']
        script = str(REPO / 'tools/data' / args[0])
        wall, cpu = _run_timed([sys.executable, script, *args[1:], '--workers', str(workers)])
        # the interpreter and package start-up is paid once per run, not per video
        startup, startup_cpu = _run_timed([sys.executable, script, '--help'])
    return dict(
        size=f'{width}x{height}',
        wall_s=wall,
        startup_s=startup,
        s_per_1000=1000 * (wall - startup) / videos,
        cpu_s_per_video=(cpu - startup_cpu) / videos,
    )
