#!/usr/bin/env python
"""Parameter count and train-step time of TimeSformer-B or ViTDet Mask R-CNN configs, measured
in one run.

    python tools/analysis/benchmark_train_step.py [--configs A.py B.py] [--batch 1] [--reps 3]
        [--device cuda] [--amp-dtype bfloat16] [--compile | --compare-compile] [--part backbone]
        [--json FILE]
        [--cfg-options model.backbone.with_cp=True ...]
    # the GPU comparison of the GPU issue: DnA vs softmax vs MMAction2's stock TimeSformer
    python tools/analysis/benchmark_train_step.py --device cuda --batch 8 --amp-dtype bfloat16 \
        --configs configs/timesformer_softmax_k400.py configs/timesformer_dna_k400.py \
        mmaction::recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py
    python tools/analysis/benchmark_train_step.py --configs configs/vitdet_softmax_coco.py \
        configs/vitdet_dna_coco.py configs/vitdet_softmax_coco_lsj.py configs/vitdet_dna_coco_lsj.py

A train step is ``optim_wrapper.update_params(model(clip, mode='loss'))`` on a random
``[batch, 1, 3, 8, 224, 224]`` clip through the config's own Recognizer3D and optimizer
(AMP on CUDA, plain on CPU), median of ``--reps`` after one warm-up step; the configs' models
are built first and take turns step by step, so load drift hits them alike. For an MMDetection
config (``default_scope='mmdet'``) it is the detector's loss on random ``img_size²`` images,
each with 4 boxes and masks (preprocessed once, outside the timing); the ``backbone`` column
counts the backbone's parameters alone. A config may be a zoo config (``mmaction::...``).
``--part backbone``: the backbone (and the detector's neck) alone, forward and backward of the
mean of its outputs on random inputs, with the config's optimizer: for a detector this needs
none of mmcv's compiled ops (RoIAlign, nms), so it runs with ``mmcv-lite``.

``--compare-with-cp`` measures each config twice, as it is and with
``model.backbone.with_cp=True`` (activation checkpointing). ``--peak-rss`` (CPU) runs each
(config, with_cp) in a fresh process and reports its resident memory after building the model
and optimizer and its peak over the train steps (``ru_maxrss``): the difference is what the
steps themselves need (activations, gradients, optimizer state). Measured figures:
docs/training.md (memory)::

    python tools/analysis/benchmark_train_step.py --configs configs/timesformer_dna_k400.py \
        --compare-with-cp --peak-rss --reps 1 [--cfg-options model.backbone.num_frames=16]

``--amp-dtype`` (CUDA) gives every config the same recipe: MMEngine's ``AmpOptimWrapper`` in
that dtype around the config's own optimizer (a ``GradScaler`` for fp16 only, as
``AutoAmpOptimWrapper`` does). ``--compile`` wraps each backbone in
``torch.compile`` (inductor: the attention is there); ``--compare-compile`` measures each config
twice, eager and compiled, in the same turns, and adds the first step's time (the compiler's
work, not in the median). Measured figures: docs/training.md (torch.compile)::

    python tools/analysis/benchmark_train_step.py --configs configs/timesformer_softmax_k400.py \
        configs/timesformer_dna_k400.py --compare-compile --batch 2 --reps 5 --cfg-options \
        model.backbone.num_transformer_layers=4 model.backbone.img_size=112

On CUDA the table adds the peak memory of each config's steps
(``max_memory_allocated``) and the throughput (clips/s, or images/s); ``--kernels`` profiles one
more step of each config (``torch.profiler``): the time its kernels kept the GPU busy, as a share
of the step, and how many kernels it launched (a step much longer than its GPU time is bound by
launching them, not by the GPU's work). ``--json`` also writes
the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    import torch
    from mmengine.config import Config

DEFAULT = ['configs/timesformer_softmax_k400.py', 'configs/timesformer_dna_k400.py']


def detection_inputs(model: torch.nn.Module, cfg: Config, batch: int, device: str) -> tuple:
    """Random ``img_size²`` images with 4 boxes / masks each, through the detector's
    data preprocessor (normalise, pad)."""
    import torch
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    size = cfg.model.backbone.img_size
    images, samples = [], []
    for _ in range(batch):
        boxes = (
            torch.tensor(
                [[0.1, 0.1, 0.4, 0.5], [0.5, 0.2, 0.9, 0.6], [0.2, 0.6, 0.5, 0.9], [0.6, 0.65, 0.8, 0.95]]
            )
            * size
        )
        masks = torch.zeros(4, size, size, dtype=torch.uint8)
        for m, (x0, y0, x1, y1) in zip(masks, boxes.long().tolist(), strict=True):
            m[y0:y1, x0:x1] = 1
        gt = InstanceData(bboxes=boxes, labels=torch.arange(4), masks=BitmapMasks(masks.numpy(), size, size))
        samples.append(
            DetDataSample(
                gt_instances=gt,
                metainfo=dict(img_shape=(size, size), ori_shape=(size, size), scale_factor=(1.0, 1.0)),
            )
        )
        images.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8))
    data = model.data_preprocessor(dict(inputs=images, data_samples=samples), True)
    return data['inputs'].to(device), data['data_samples']


def load_config(path: str) -> Config:
    """A config file, or a zoo config (``mmaction::...``, ``mmdet::...``)."""
    if '::' in path:
        from mmengine.hub import get_config

        return get_config(path)
    from mmengine.config import Config

    return Config.fromfile(path)


def backbone_and_neck(backbone: torch.nn.Module, neck: Optional[torch.nn.Module]) -> torch.nn.Module:
    """A model's backbone and (optional) neck as one module (``--part backbone``), under the
    detector's own attribute names, so a layer-decay optimizer constructor parses them."""
    import torch

    class BackboneAndNeck(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone, self.neck = backbone, neck

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            feats = self.backbone(x)
            feats = self.neck(feats) if self.neck is not None else feats
            feats = feats if isinstance(feats, (list, tuple)) else [feats]
            return sum(f.float().mean() for f in feats)  # a scalar that reaches every output

    return BackboneAndNeck()


def prepare_backbone(cfg: Config, batch: int, device: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """``--part backbone``: the config's backbone (+ neck) and a random input batch."""
    import torch
    from mmengine.registry import MODELS as ROOT
    from mmengine.registry import init_default_scope

    backbone = dict(cfg.model.backbone)
    for key in ('pretrained', 'init_cfg'):
        if key in backbone:
            backbone[key] = None
    neck = cfg.model.get('neck')
    detector = cfg.get('default_scope') == 'mmdet'
    if detector:
        # MMDetection's registry imports mmdet.models on first use, which needs mmcv's compiled
        # ops: the backbone's class (dna_mm's ViTDet) is taken from it directly, and the rest
        # (neck, norms, attentions: mmengine's root registry) built in MMAction2's scope.
        from mmdet.registry import MODELS as DET_MODELS

        init_default_scope('mmaction')
        net = DET_MODELS.module_dict[backbone.pop('type')](**backbone)
    else:
        init_default_scope(cfg.get('default_scope', 'mmaction'))
        net = ROOT.build(backbone)
    model = backbone_and_neck(net, ROOT.build(neck) if neck else None).to(device).train()
    size = backbone.get('img_size', 224)
    if detector:
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
    import torch
    from mmaction.registry import MODELS
    from mmaction.structures import ActionDataSample
    from mmengine.optim import build_optim_wrapper

    import dna_mm  # noqa: F401

    cfg = load_config(path)
    if options:
        cfg.merge_from_dict(options)
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
        optim = build_optim_wrapper(model, cfg.optim_wrapper)
        if compile_backbone:
            model.backbone = torch.compile(model.backbone)

        def backbone_step() -> None:
            with optim.optim_context(model):
                loss = model(inputs)
            optim.update_params(loss)

        n = sum(p.numel() for p in model.parameters())
        return backbone_step, n, sum(p.numel() for p in model.backbone.parameters())
    if detector:
        from mmdet.registry import MODELS as DET_MODELS
        from mmengine.registry import init_default_scope

        init_default_scope('mmdet')
        cfg.model.backbone.init_cfg = None
        model = DET_MODELS.build(cfg.model).to(device).train()
        inputs, samples = detection_inputs(model, cfg, batch, device)
    else:
        cfg.model.backbone.pretrained = None
        model = MODELS.build(cfg.model).to(device).train()
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
    import torch
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
    from dna_mm.utils.timing import in_order, time_in_turns

    cuda = device.startswith('cuda')
    samples = time_in_turns(dict(enumerate(steps)), reps + 1, order=in_order, cuda=cuda)
    times = [statistics.median(s.wall for s in samples[i][1:]) for i in range(len(steps))]
    peaks = [max(s.peak_bytes for s in samples[i]) if cuda else None for i in range(len(steps))]
    return times, peaks, [samples[i][0].wall for i in range(len(steps))]


def _rss_bytes() -> int:
    """This process's resident memory now (Linux ``/proc/self/statm``)."""
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _peak_rss_child(path: str, batch: int, options: dict, reps: int, queue) -> None:
    """In a fresh process: build, then ``reps + 1`` train steps; put ``(rss after build, peak
    rss, median step time)`` in ``queue``."""
    import resource

    import torch
    from mmaction.utils import register_all_modules

    import dna_mm  # noqa: F401

    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', torch.get_num_threads())))
    register_all_modules()
    from dna_mm.utils.timing import in_order, time_in_turns

    step, *_ = prepare(path, batch, 'cpu', options)
    built = _rss_bytes()
    times = [s.wall for s in time_in_turns({'step': step}, reps + 1, order=in_order)['step']]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    queue.put((built, peak, statistics.median(times[1:] or times)))


def peak_rss(path: str, batch: int, options: dict, reps: int) -> tuple[int, int, float]:
    """:func:`_peak_rss_child` in a spawned process (its ``ru_maxrss`` is this config's alone)."""
    ctx = multiprocessing.get_context('spawn')
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_rss_child, args=(path, batch, options, reps, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--configs', nargs='+', default=DEFAULT)
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--reps', type=int, default=3)
    p.add_argument('--device', default=None)  # default: cuda if there is a GPU, else cpu
    p.add_argument(
        '--amp-dtype',
        choices=['bfloat16', 'float16'],
        help='CUDA: AmpOptimWrapper in this dtype for every config (same recipe)',
    )
    p.add_argument('--compile', action='store_true', help='torch.compile each backbone')
    p.add_argument(
        '--compare-compile',
        action='store_true',
        help='measure each config eager and with its backbone compiled (and the first, compiling step)',
    )
    p.add_argument(
        '--part',
        default='model',
        choices=['model', 'backbone'],
        help='the whole model (default), or its backbone and neck alone (no RoI ops needed)',
    )
    p.add_argument('--json', help='also write the figures here')
    p.add_argument(
        '--cfg-options',
        nargs='+',
        metavar='KEY=VALUE',
        default={},
        help='applied to every config, e.g. model.backbone.with_cp=True',
    )
    p.add_argument(
        '--compare-with-cp',
        action='store_true',
        help='measure each config also with model.backbone.with_cp=True (activation checkpointing)',
    )
    p.add_argument(
        '--peak-rss',
        action='store_true',
        help='CPU: each config in a fresh process; resident memory after building and its peak in the steps',
    )
    p.add_argument(
        '--kernels',
        action='store_true',
        help='CUDA: also profile one step of each config: the time its kernels kept the GPU busy '
        'and how many it launched (a step far longer than its GPU time is bound by launching them)',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    from dna_mm.apis.cli import run_tool

    run_tool('benchmark_train_step.py', lambda args: benchmark(args, p), args)  # a typo: one line


def benchmark(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    """The tables of :func:`main`'s arguments (``--cfg-options`` already a dict)."""
    import torch
    from mmaction.utils import register_all_modules

    args.cfg_options = args.cfg_options or {}
    if args.device is None:
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if args.amp_dtype and not args.device.startswith('cuda'):
        p.error('--amp-dtype needs --device cuda')
    if args.peak_rss and args.device != 'cpu':
        p.error('--peak-rss measures CPU memory (--device cpu); on CUDA the table has the peak GPU memory')
    if args.kernels and not args.device.startswith('cuda'):
        p.error('--kernels profiles CUDA kernels: it needs --device cuda')
    if args.compile and args.compare_compile:
        p.error('--compile or --compare-compile: choose one')
    runs = [(c, dict(args.cfg_options), args.compile) for c in args.configs]
    if args.compare_with_cp:
        runs = [(c, dict(o, **{'model.backbone.with_cp': cp}), k) for c, o, k in runs for cp in (False, True)]
    if args.compare_compile:
        runs = [(c, o, k) for c, o, _ in runs for k in (False, True)]
    if args.peak_rss:
        print(f'torch {torch.__version__}, cpu ({torch.get_num_threads()} threads), batch {args.batch}')
        if args.cfg_options:
            print(f'--cfg-options {args.cfg_options}')
        print('| config | with_cp | after build | peak in train steps | steps need | train step |')
        print('|---|---|---|---|---|---|')
        for c, options, _ in runs:
            built, peak, t = peak_rss(c, args.batch, options, args.reps)
            cp = options.get('model.backbone.with_cp', False)
            print(
                f'| {c} | {cp} | {built / 2**30:.2f} GiB | {peak / 2**30:.2f} GiB | '
                f'{(peak - built) / 2**30:.2f} GiB | {t:.2f} s |',
                flush=True,
            )
        return
    register_all_modules()
    device_name = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith('cuda')
        else f'{torch.get_num_threads()} CPU threads'
    )
    print(
        f'torch {torch.__version__}, {args.device} ({device_name}), batch {args.batch} (clips '
        f'of 8x224x224, or images of the detector\'s img_size), amp {args.amp_dtype or "config"}'
        f'{", torch.compile" if args.compile else ""}'
        f'{", backbone (+ neck) only" if args.part == "backbone" else ""}'
    )
    if args.cfg_options:
        print(f'--cfg-options {args.cfg_options}')
    prepared = [prepare(c, args.batch, args.device, o, args.amp_dtype, k, args.part) for c, o, k in runs]
    step_times, peaks, firsts = measure([p[0] for p in prepared], args.reps, args.device)
    kernels = [gpu_kernels(p[0]) for p in prepared] if args.kernels else None
    ref_params, ref_time, ref_peak = prepared[0][1], step_times[0], peaks[0]
    gpu = ref_peak is not None
    print(
        '| config | params | Δ params vs first | backbone | train step | ratio |'
        + (' peak memory | ratio | clips (images)/s |' if gpu else '')
        + (' first step |' if args.compare_compile else '')
        + (' GPU busy | kernels |' if kernels else '')
        + '\n'
        + '|---|---|---|---|---|---|'
        + ('---|---|---|' if gpu else '')
        + ('---|' if args.compare_compile else '')
        + ('---|---|' if kernels else '')
    )
    names = [
        c + (' with_cp' if o.get('model.backbone.with_cp') else '') + (' compiled' if k else '')
        for c, o, k in runs
    ]
    for i, (c, (_, n, nb), t, peak, first) in enumerate(
        zip(names, prepared, step_times, peaks, firsts, strict=True)
    ):
        row = (
            f'| {c} | {n / 1e6:.2f}M | {(n - ref_params) / 1e6:+.2f}M | {nb / 1e6:.2f}M | '
            f'{t:.3f} s | {t / ref_time:.2f}× |'
        )
        if gpu:
            row += f' {peak / 2**30:.2f} GiB | {peak / ref_peak:.2f}× | {args.batch / t:.1f} |'
        if args.compare_compile:
            row += f' {first:.1f} s |'
        if kernels:
            busy, launched = kernels[i]
            row += f' {busy * 1e3:.1f} ms ({busy / t:.0%}) | {launched} |'
        print(row, flush=True)
    if args.json:
        rows = [
            dict(
                config=c,
                params=n,
                backbone_params=nb,
                step_s=t,
                first_step_s=first,
                peak_bytes=peak,
                per_s=args.batch / t,
                **(dict(gpu_busy_s=kernels[i][0], kernels=kernels[i][1]) if kernels else {}),
            )
            for i, (c, (_, n, nb), t, peak, first) in enumerate(
                zip(names, prepared, step_times, peaks, firsts, strict=True)
            )
        ]
        meta = dict(torch=torch.__version__, device=device_name, batch=args.batch, part=args.part)
        with open(args.json, 'w') as f:
            json.dump(
                dict(meta, amp_dtype=args.amp_dtype, cfg_options=args.cfg_options, rows=rows), f, indent=1
            )


if __name__ == '__main__':
    main()
