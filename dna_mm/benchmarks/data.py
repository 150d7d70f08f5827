"""Throughput of a config's data path: the work of ``tools/benchmarks/benchmark_data.py``, whose
docstring says what is measured and how.

:func:`benchmark_config` times a config's pipeline in one process (:func:`time_pipeline`: the
config's, MMAction2's stock one beside it, :func:`stock_pipeline`, and other opening transforms,
:func:`swap_init`, clip by clip in turns) and its DataLoader per worker count
(:func:`time_dataloader`), on the config's list or on synthetic videos (:func:`write_video_set`);
:func:`format_report` is the markdown report.
"""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import ConfigError
from ..synthetic.videos import pack_bframes, panning_clip, write_video
from .timing import rotated, time_in_turns

#: transforms replaced by MMAction2's own to get the stock pipeline (the baseline)
STOCK = {
    'ScaledPyAVInit': 'DecordInit',
    'ScaledDecordInit': 'DecordInit',
    'SortedDecordDecode': 'DecordDecode',
}


def write_video_set(
    out_dir: Path,
    size: tuple[int, int],
    num_videos: int,
    num_entries: int,
    num_frames: int = 90,
    codec: str = 'mpeg4',
    keyint: Optional[int] = None,
    bframes: Optional[int] = None,
    container: str = 'mp4',
    packed: bool = False,
) -> Path:
    """``num_videos`` :func:`~dna_mm.synthetic.videos.panning_clip` videos of ``size`` at
    30 fps in ``out_dir`` and an MMAction2 list (``out_dir/list.txt``, label 0) with
    ``num_entries`` lines cycling over them; returns the list's path. ``codec``: ``mpeg4``
    (MPEG-4 Part 2 at 0.1 bit per pixel, about NTU RGB+D's 1080p bit rate) or ``h264`` (libx264,
    CRF 23, as dna_mm's preparation tools write it); ``keyint``: keyframe interval; ``bframes``:
    B-frames between references (the encoder's default when ``None``); ``container``: ``mp4`` or
    ``avi``; ``packed``: MPEG-4 AVI with one B-frame, rewritten with DivX packed B-frames
    (:func:`~dna_mm.synthetic.videos.pack_bframes`)."""
    names = [f'{size[0]}x{size[1]}_{i}.{container}' for i in range(num_videos)]
    bit_rate = None if codec == 'h264' else int(0.1 * size[0] * size[1] * 30)
    codec = 'libx264' if codec == 'h264' else codec
    for i, name in enumerate(names):
        frames = panning_clip(*size, num_frames, seed=i)
        path = out_dir / (f'plain_{name}' if packed else name)
        write_video(path, frames, 30, codec, bit_rate, keyint, b_frames=bframes)
        if packed:
            pack_bframes(path, out_dir / name)
            path.unlink()
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


def swap_init(pipeline: Sequence[dict], init: str) -> list[dict]:
    """The pipeline with its opening transform (``*Init``) of type ``init``, arguments kept."""
    swapped = [copy.deepcopy(dict(step)) for step in pipeline]
    for step in swapped:
        if step['type'].endswith('Init'):
            step['type'] = init
            return swapped
    raise ConfigError(f'the pipeline has no *Init transform to replace by {init}')


def time_pipeline(
    dataset: Any, pipelines: dict[str, Any], num_clips: int, warmup: int = 1, seed: int = 0
) -> dict[str, dict]:
    """Run each pipeline (name → mmengine ``Compose`` or list of transforms) on ``num_clips``
    samples of ``dataset`` (``get_data_info``, cycling over its list), taking turns clip by clip
    with the same NumPy random state (the same frames and crops) and rotating the order (each
    pipeline takes each place in turn: load drift and the caches a pipeline leaves behind hit
    them alike); the first ``warmup`` clips are not counted. Per pipeline: median
    ms per clip, ``decode_ms`` (up to and including the ``*Decode`` transform) / ``transforms_ms``
    (after it) in CPU time, ``cpu_ms`` / ``wall_ms`` (the whole pipeline), ``clips_per_core`` and
    the ``shape`` of the packed ``inputs``."""
    clip: dict = {}  # the round's sample: its index (the random seed) and data info

    def order(r: int, names: list[str]) -> list[str]:
        i = r + warmup
        clip.update(i=i, info=dataset.get_data_info(i % len(dataset)))
        return rotated(i, names)

    def pipeline(transforms: list) -> Callable[[], tuple[float, Optional[tuple]]]:
        cut = next((j + 1 for j, t in enumerate(transforms) if type(t).__name__.endswith('Decode')), 0)

        def run() -> tuple[float, Optional[tuple]]:  # CPU seconds up to the decode, inputs' shape
            np.random.seed(seed + clip['i'])
            results = copy.deepcopy(clip['info'])
            start = time.process_time()
            for t in transforms[:cut]:
                results = t(results)
            decoded = time.process_time() - start
            for t in transforms[cut:]:
                results = t(results)
            inputs = results.get('inputs') if isinstance(results, dict) else None
            return decoded, tuple(inputs.shape) if inputs is not None else None

        return run

    calls = {name: pipeline(list(getattr(p, 'transforms', p))) for name, p in pipelines.items()}
    timings = {}
    for name, samples in time_in_turns(calls, num_clips, warmup, order).items():
        decode = np.array([s.value[0] for s in samples])
        cpu, wall = np.array([s.cpu for s in samples]), np.array([s.wall for s in samples])
        cpu_ms = 1000 * float(np.median(cpu))
        timings[name] = dict(
            decode_ms=1000 * float(np.median(decode)),
            transforms_ms=1000 * float(np.median(cpu - decode)),
            cpu_ms=cpu_ms,
            wall_ms=1000 * float(np.median(wall)),
            clips_per_core=1000 / cpu_ms,
            shape=samples[-1].value[1],
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
    compare: Sequence[str] = (),
    num_videos: int = 2,
    log: Any = print,
    **video: Any,
) -> list[dict]:
    """Time the ``{split}_dataloader`` of ``cfg`` (an mmengine ``Config``): its pipeline in this
    process (and MMAction2's stock decord pipeline beside it when ``baseline`` and the config
    uses dna_mm's; and with each opening transform of ``compare``), then its DataLoader with each
    worker count. With ``sizes``, on synthetic
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
    for init in compare:
        pipelines[init] = Compose(swap_init(pipeline, init))
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
