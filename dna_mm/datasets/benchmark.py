"""Throughput of a config's data path (used by ``tools/analysis/benchmark_data.py``).

* :func:`write_video_set` writes synthetic videos of any size and an annotation list over them.
* :func:`time_pipeline` runs a dataset's pipeline in this process, clip by clip, and times the
  decode stage (everything up to and including the ``*Decode`` transform) apart from the
  transforms after it, in wall time and in CPU time of the process (all its threads). Several
  pipelines take turns clip by clip with the same random state, so they sample the same frames
  and crops, and load drift on a shared machine hits them alike.
* :func:`time_dataloader` times the config's own ``DataLoader`` with a given worker count.
* :func:`workers_per_gpu`: ``ceil(gpu_rate / clips_per_cpu_second)``, the dataloader workers
  (one core each) that keep a GPU stepping at ``gpu_rate`` clips/s busy.

``clips/s per core`` is ``1 / (CPU seconds per clip)``: what one dataloader worker on one
free core delivers.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import ConfigError
from .synthetic_video import panning_clip, write_video

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


def is_stock(pipeline: Sequence[dict]) -> bool:
    """Whether ``pipeline`` uses none of dna_mm's decoding transforms."""
    return not any(step['type'] in STOCK for step in pipeline)


@dataclass
class PipelineTiming:
    """Per-clip times of one pipeline, in seconds (wall and CPU of the process)."""

    name: str
    decode_wall: list[float] = field(default_factory=list)
    rest_wall: list[float] = field(default_factory=list)
    decode_cpu: list[float] = field(default_factory=list)
    rest_cpu: list[float] = field(default_factory=list)
    shape: Optional[tuple] = None

    def ms(self, key: str) -> float:
        """Median milliseconds per clip of ``decode_wall`` / ``rest_wall`` / ``decode_cpu`` / ..."""
        return 1000 * float(np.median(getattr(self, key)))

    @property
    def wall_ms(self) -> float:
        return 1000 * float(np.median(np.add(self.decode_wall, self.rest_wall)))

    @property
    def cpu_ms(self) -> float:
        return 1000 * float(np.median(np.add(self.decode_cpu, self.rest_cpu)))

    @property
    def clips_per_core(self) -> float:
        """Clips per CPU second (one worker on one free core)."""
        return 1000 / self.cpu_ms


def _decode_end(transforms: Sequence[Any]) -> int:
    """Index after the decode transform (``*Decode``), or 0 when there is none."""
    for i, t in enumerate(transforms):
        if type(t).__name__.endswith('Decode'):
            return i + 1
    return 0


def time_pipeline(
    dataset: Any, pipelines: dict[str, Any], num_clips: int, warmup: int = 1, seed: int = 0
) -> dict[str, PipelineTiming]:
    """Run each pipeline (name → mmengine ``Compose`` or list of transforms) on ``num_clips``
    samples of ``dataset`` (``get_data_info``, cycling over its list), taking turns clip by clip
    with the same NumPy random state and alternating which goes first; the first ``warmup`` clips
    are not counted."""
    timings = {name: PipelineTiming(name) for name in pipelines}
    steps = {name: list(getattr(p, 'transforms', p)) for name, p in pipelines.items()}
    n = len(dataset)
    for i in range(warmup + num_clips):
        info = dataset.get_data_info(i % n)
        order = list(steps.items())
        for name, transforms in order if i % 2 else order[::-1]:  # alternate who goes first
            np.random.seed(seed + i)
            results = copy.deepcopy(info)
            cut = _decode_end(transforms)
            w0, c0 = time.perf_counter(), time.process_time()
            for t in transforms[:cut]:
                results = t(results)
            w1, c1 = time.perf_counter(), time.process_time()
            for t in transforms[cut:]:
                results = t(results)
            w2, c2 = time.perf_counter(), time.process_time()
            if i < warmup:
                continue
            tm = timings[name]
            tm.decode_wall.append(w1 - w0)
            tm.rest_wall.append(w2 - w1)
            tm.decode_cpu.append(c1 - c0)
            tm.rest_cpu.append(c2 - c1)
            inputs = results.get('inputs') if isinstance(results, dict) else None
            tm.shape = tuple(inputs.shape) if inputs is not None else None
    return timings


def time_dataloader(loader_cfg: dict, num_workers: int, num_clips: int, seed: int = 0) -> float:
    """Clips/s through the DataLoader built from ``loader_cfg`` with ``num_workers`` workers: the
    batches after the first (worker start-up excluded) until ``num_clips`` clips were read."""
    from mmengine.runner import Runner

    cfg = copy.deepcopy(loader_cfg)
    cfg.update(num_workers=num_workers, persistent_workers=False)
    if num_workers == 0:
        cfg.pop('prefetch_factor', None)
    loader = Runner.build_dataloader(cfg, seed=seed)
    clips, start = 0, None
    for batch in loader:
        size = len(batch['inputs'])
        if start is None:
            start = time.perf_counter()
            continue
        clips += size
        if clips >= num_clips:
            break
    if start is None or clips == 0:
        raise ConfigError(
            f'the dataset yielded too few batches to time (need more than one batch of '
            f'{cfg.get("batch_size")}); give it a longer list or a smaller batch_size'
        )
    return clips / (time.perf_counter() - start)


def workers_per_gpu(clips_per_core: float, gpu_rate: float) -> int:
    """Workers (one core each) one GPU needs: ``ceil(gpu_rate / clips_per_core)``."""
    return math.ceil(gpu_rate / clips_per_core)


def _loader_with(loader_cfg: dict, **dataset: Any) -> dict:
    cfg = copy.deepcopy(loader_cfg)
    cfg['dataset'].update(dataset)
    return cfg


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
    if baseline and not is_stock(pipeline):
        pipelines['stock'] = Compose(stock_pipeline(pipeline))
    pipelines['config'] = Compose(pipeline)
    batch = int(loader_cfg.get('batch_size', 1))
    sources: list[tuple[str, dict]] = []
    if sizes:
        if tmp_dir is None:
            raise ValueError('synthetic sizes need a tmp_dir')
        entries = max(num_clips + 1, batch * (math.ceil(num_clips / batch) + 2))
        for w, h in sizes:
            folder = Path(tmp_dir) / f'{w}x{h}'
            log(f'writing synthetic {w}x{h} videos to {folder} ...')
            ann = write_video_set(folder, (w, h), num_videos, entries, **video)
            source = _loader_with(loader_cfg, ann_file=str(ann), data_prefix=dict(video=str(folder)))
            sources.append((f'{w}x{h}', source))
    else:
        sources.append((str(loader_cfg['dataset'].get('ann_file')), copy.deepcopy(loader_cfg)))

    rows = []
    for label, source in sources:
        dataset = DATASETS.build(source['dataset'])
        timings = time_pipeline(dataset, pipelines, num_clips)
        base = timings.get('stock')
        for name, tm in timings.items():
            row = dict(
                input=label,
                pipeline=name,
                decode_ms=tm.ms('decode_cpu'),
                transforms_ms=tm.ms('rest_cpu'),
                wall_ms=tm.wall_ms,
                cpu_ms=tm.cpu_ms,
                clips_per_core=tm.clips_per_core,
                speedup=(tm.clips_per_core / base.clips_per_core) if base is not None else None,
                workers_per_gpu=workers_per_gpu(tm.clips_per_core, gpu_rate),
                shape=tm.shape,
                loader={},
            )
            rows.append(row)
            log(
                f'{label} {name}: decode {row["decode_ms"]:.1f} + transforms {row["transforms_ms"]:.1f} '
                f'CPU ms per clip ({row["wall_ms"]:.1f} ms wall) = {row["clips_per_core"]:.1f} clips/s per '
                f'core; inputs {tm.shape}'
            )
        for w in workers:
            rate = time_dataloader(source, w, num_clips)
            rows[-1]['loader'][w] = rate
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
