"""Parameters, train-step time and memory of configs' models: the work of
``tools/benchmarks/benchmark_train_step.py``, whose docstring says what is measured and how.

:func:`prepare` builds a config's model (:func:`dna_mm.config.build.read_config`, pretrained weights
cleared), its optimizer and random inputs into one train step; :func:`measure` times the steps of
several configs in turns (:mod:`.timing`); :func:`peak_rss` measures one config's CPU memory in a
fresh process; :func:`step_table` and :func:`peak_rss_table` say the tables row by row.
"""

from __future__ import annotations

import os
import resource
import statistics
from typing import Any, Callable, Optional

import torch
from mmengine.config import Config
from torch import nn

from ..config.build import build_part, part_scope, read_config
from ..models.scopes import home_scope
from .timing import in_fresh_process, in_order, time_in_turns

#: a run: (config, its --cfg-options, torch.compile the backbone)
Run = tuple[str, dict, bool]


def detection_inputs(model: nn.Module, cfg: Config, batch: int, device: str) -> tuple:
    """Random ``img_size²`` images with 4 boxes / masks each (labels 0-3, modulo the detector's
    classes), through the detector's data preprocessor (normalise, pad)."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    size = cfg.model.backbone.img_size
    heads = (cfg.model.get('roi_head') or {}).get('bbox_head') or {}
    head = heads[0] if isinstance(heads, (list, tuple)) else heads  # a cascade's: the first stage's
    labels = torch.arange(4) % head.get('num_classes', 80)
    corners = [[0.1, 0.1, 0.4, 0.5], [0.5, 0.2, 0.9, 0.6], [0.2, 0.6, 0.5, 0.9], [0.6, 0.65, 0.8, 0.95]]
    images, samples = [], []
    for _ in range(batch):
        boxes = torch.tensor(corners) * size
        masks = torch.zeros(4, size, size, dtype=torch.uint8)
        for m, (x0, y0, x1, y1) in zip(masks, boxes.long().tolist(), strict=True):
            m[y0:y1, x0:x1] = 1
        gt = InstanceData(bboxes=boxes, labels=labels, masks=BitmapMasks(masks.numpy(), size, size))
        samples.append(
            DetDataSample(
                gt_instances=gt,
                metainfo=dict(img_shape=(size, size), ori_shape=(size, size), scale_factor=(1.0, 1.0)),
            )
        )
        images.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8))
    data = model.data_preprocessor(dict(inputs=images, data_samples=samples), True)
    return data['inputs'].to(device), data['data_samples']


class BackboneAndNeck(nn.Module):
    """A model's backbone and (optional) neck as one module (``--part backbone``), under the
    detector's own attribute names, so a layer-decay optimizer constructor parses them; the
    output is the mean of every output, a scalar that reaches all of them."""

    def __init__(self, backbone: nn.Module, neck: Optional[nn.Module]) -> None:
        super().__init__()
        self.backbone, self.neck = backbone, neck

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.backbone(x)
        feats = self.neck(feats) if self.neck is not None else feats
        feats = feats if isinstance(feats, (list, tuple)) else [feats]
        return sum(f.float().mean() for f in feats)


def prepare_backbone(cfg: Config, batch: int, device: str) -> tuple[nn.Module, torch.Tensor]:
    """``--part backbone``: the config's backbone (+ neck) and a random input batch."""
    neck = build_part(cfg, 'neck') if cfg.model.get('neck') else None
    model = BackboneAndNeck(build_part(cfg, 'backbone'), neck).to(device).train()
    backbone = cfg.model.backbone
    size = backbone.get('img_size', 224)
    if cfg.get('default_scope') == 'mmdet':
        return model, torch.randn(batch, 3, size, size, device=device)
    return model, torch.randn(batch, 3, backbone.get('num_frames', 8), size, size, device=device)


def prepare(
    path: str,
    batch: int,
    device: str,
    options: Optional[dict] = None,
    amp_dtype: Optional[str] = None,
    compile_backbone: bool = False,
    part: str = 'model',
) -> tuple[Callable[[], None], int, int]:
    """The config's model, optimizer and inputs → ``(one train step, params, backbone params)``;
    ``part='backbone'``: its backbone (+ neck) alone."""
    from mmaction.structures import ActionDataSample
    from mmengine.optim import build_optim_wrapper

    cfg = read_config(path, options, clear_pretrained=True)
    if amp_dtype is not None:  # the same recipe for every config
        wrapper = cfg.optim_wrapper
        cfg.optim_wrapper = dict(
            type='AutoAmpOptimWrapper',  # loss scaling by the dtype (docs/mixed_precision.md)
            dtype=amp_dtype,
            optimizer=wrapper.optimizer,
            **{k: wrapper[k] for k in ('clip_grad', 'paramwise_cfg', 'constructor') if k in wrapper},
        )
    detector = cfg.get('default_scope') == 'mmdet'
    torch.manual_seed(0)
    if part == 'backbone':
        model, inputs = prepare_backbone(cfg, batch, device)
        with home_scope(part_scope(cfg, 'backbone')):  # as the parts: no MMDetection without mmcv's ops
            optim = build_optim_wrapper(model, cfg.optim_wrapper)
        if compile_backbone:
            model.backbone = torch.compile(model.backbone)

        def backbone_step() -> None:
            with optim.optim_context(model):
                loss = model(inputs)
            optim.update_params(loss)

        n = sum(p.numel() for p in model.parameters())
        return backbone_step, n, sum(p.numel() for p in model.backbone.parameters())
    model = build_part(cfg).to(device).train()
    if detector:
        inputs, samples = detection_inputs(model, cfg, batch, device)
    else:
        backbone = cfg.model.backbone
        frames, size = backbone.get('num_frames', 8), backbone.get('img_size', 224)
        inputs = torch.randn(batch, 1, 3, frames, size, size, device=device)
        samples = [
            ActionDataSample().set_gt_labels([i % cfg.model.cls_head.num_classes]) for i in range(batch)
        ]
    optim = build_optim_wrapper(model, cfg.optim_wrapper)
    if compile_backbone:
        model.backbone = torch.compile(model.backbone)

    def step() -> None:
        with optim.optim_context(model):
            losses = model(inputs, samples, mode='loss')
        optim.update_params(model.parse_losses(losses)[0] if detector else sum(losses.values()))

    return (
        step,
        sum(p.numel() for p in model.parameters()),
        sum(p.numel() for p in model.backbone.parameters()),
    )


def gpu_kernels(step: Callable[[], None]) -> tuple[float, int]:
    """One step under ``torch.profiler``: the seconds its CUDA kernels ran (their sum: the time
    the GPU was busy) and how many it launched."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time for e in events) / 1e6, len(events)


def measure(
    steps: list[Callable[[], None]], reps: int, device: str
) -> tuple[list[float], list[Optional[int]], list[float]]:
    """Median step time of each model, on CUDA the peak memory of its steps, and the time of
    its first (warm-up) step; the models take turns step by step (one warm-up round), so load
    drifting on a shared machine hits all of them alike."""
    cuda = device.startswith('cuda')
    samples = time_in_turns(dict(enumerate(steps)), reps + 1, order=in_order, cuda=cuda)
    times = [statistics.median(s.wall for s in samples[i][1:]) for i in range(len(steps))]
    peaks = [max(s.peak_bytes for s in samples[i]) if cuda else None for i in range(len(steps))]
    return times, peaks, [samples[i][0].wall for i in range(len(steps))]


def _rss_bytes() -> int:
    """This process's resident memory now (Linux ``/proc/self/statm``)."""
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _peak_rss_here(path: str, batch: int, options: dict, reps: int) -> tuple[int, int, float]:
    """Build, then ``reps + 1`` train steps: ``(rss after build, peak rss, median step time)``
    of this process (:func:`peak_rss` runs it in a fresh one)."""
    from mmaction.utils import register_all_modules

    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', torch.get_num_threads())))
    register_all_modules()
    step, *_ = prepare(path, batch, 'cpu', options)
    built = _rss_bytes()
    times = [s.wall for s in time_in_turns({'step': step}, reps + 1, order=in_order)['step']]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return built, peak, statistics.median(times[1:] or times)


def peak_rss(path: str, batch: int, options: dict, reps: int) -> tuple[int, int, float]:
    """One config's ``(rss after build, peak rss in the train steps, median step time)``, in a
    fresh process (its ``ru_maxrss`` is this config's alone)."""
    return in_fresh_process(_peak_rss_here, path, batch, options, reps)


def peak_rss_table(
    runs: list[Run], batch: int, reps: int, cfg_options: dict, echo: Callable[..., None] = print
) -> None:
    """``--peak-rss``: each run's CPU memory (:func:`peak_rss`), the table said row by row."""
    echo(f'torch {torch.__version__}, cpu ({torch.get_num_threads()} threads), batch {batch}')
    if cfg_options:
        echo(f'--cfg-options {cfg_options}')
    echo('| config | with_cp | after build | peak in train steps | steps need | train step |')
    echo('|---|---|---|---|---|---|')
    for c, options, _ in runs:
        built, peak, t = peak_rss(c, batch, options, reps)
        cp = options.get('model.backbone.with_cp', False)
        echo(
            f'| {c} | {cp} | {built / 2**30:.2f} GiB | {peak / 2**30:.2f} GiB | '
            f'{(peak - built) / 2**30:.2f} GiB | {t:.2f} s |',
            flush=True,
        )


def step_table(
    runs: list[Run],
    batch: int,
    reps: int,
    device: str,
    amp_dtype: Optional[str] = None,
    part: str = 'model',
    cfg_options: Optional[dict] = None,
    compile_backbone: bool = False,
    compare_compile: bool = False,
    kernels: bool = False,
    echo: Callable[..., None] = print,
) -> dict[str, Any]:
    """Every run's model built (:func:`prepare`), their steps timed in turns (:func:`measure`,
    ``kernels``: one more profiled step each, :func:`gpu_kernels`), the table said row by row
    through ``echo``, ratios to the first run. Returns the figures (``--json``)."""
    from mmaction.utils import register_all_modules

    register_all_modules()
    name = (
        torch.cuda.get_device_name(device)
        if device.startswith('cuda')
        else f'{torch.get_num_threads()} CPU threads'
    )
    echo(
        f'torch {torch.__version__}, {device} ({name}), batch {batch} (clips '
        f'of 8x224x224, or images of the detector\'s img_size), amp {amp_dtype or "config"}'
        f'{", torch.compile" if compile_backbone else ""}'
        f'{", backbone (+ neck) only" if part == "backbone" else ""}'
    )
    if cfg_options:
        echo(f'--cfg-options {cfg_options}')
    prepared = [prepare(c, batch, device, o, amp_dtype, k, part) for c, o, k in runs]
    step_times, peaks, firsts = measure([p[0] for p in prepared], reps, device)
    profiled = [gpu_kernels(p[0]) for p in prepared] if kernels else None
    ref_params, ref_time, ref_peak = prepared[0][1], step_times[0], peaks[0]
    gpu = ref_peak is not None
    echo(
        '| config | params | Δ params vs first | backbone | train step | ratio |'
        + (' peak memory | ratio | clips (images)/s |' if gpu else '')
        + (' first step |' if compare_compile else '')
        + (' GPU busy | kernels |' if profiled else '')
        + '\n'
        + '|---|---|---|---|---|---|'
        + ('---|---|---|' if gpu else '')
        + ('---|' if compare_compile else '')
        + ('---|---|' if profiled else '')
    )
    names = [
        c + (' with_cp' if o.get('model.backbone.with_cp') else '') + (' compiled' if k else '')
        for c, o, k in runs
    ]
    rows = []
    for i, (c, (_, n, nb), t, peak, first) in enumerate(
        zip(names, prepared, step_times, peaks, firsts, strict=True)
    ):
        row = (
            f'| {c} | {n / 1e6:.2f}M | {(n - ref_params) / 1e6:+.2f}M | {nb / 1e6:.2f}M | '
            f'{t:.3f} s | {t / ref_time:.2f}× |'
        )
        if gpu:
            row += f' {peak / 2**30:.2f} GiB | {peak / ref_peak:.2f}× | {batch / t:.1f} |'
        if compare_compile:
            row += f' {first:.1f} s |'
        if profiled:
            busy, launched = profiled[i]
            row += f' {busy * 1e3:.1f} ms ({busy / t:.0%}) | {launched} |'
        echo(row, flush=True)
        rows.append(
            dict(
                config=c,
                params=n,
                backbone_params=nb,
                step_s=t,
                first_step_s=first,
                peak_bytes=peak,
                per_s=batch / t,
                **(dict(gpu_busy_s=profiled[i][0], kernels=profiled[i][1]) if profiled else {}),
            )
        )
    meta = dict(torch=torch.__version__, device=name, batch=batch, part=part)
    return dict(meta, amp_dtype=amp_dtype, cfg_options=cfg_options, rows=rows)
