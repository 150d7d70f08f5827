#!/usr/bin/env python
"""Parameter count and train-step time of TimeSformer-B configs, measured in one run.

    python tools/analysis/benchmark_train_step.py [--configs A.py B.py] [--batch 1] [--reps 3]

A train step is ``optim_wrapper.update_params(model(clip, mode='loss'))`` on a random
``[batch, 1, 3, 8, 224, 224]`` clip through the config's own Recognizer3D and optimizer
(AMP on CUDA, plain on CPU), median of ``--reps`` after one warm-up step.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from mmaction.registry import MODELS
from mmaction.structures import ActionDataSample
from mmaction.utils import register_all_modules
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper

import dna_mm  # noqa: F401

DEFAULT = ['configs/timesformer_softmax_k400.py', 'configs/timesformer_dna_k400.py']


def measure(path: str, batch: int, reps: int, device: str) -> tuple[int, float]:
    cfg = Config.fromfile(path)
    cfg.model.backbone.pretrained = None
    model = MODELS.build(cfg.model).to(device).train()
    optim = build_optim_wrapper(model, cfg.optim_wrapper)
    frames, size = cfg.model.backbone.num_frames, cfg.model.backbone.img_size
    inputs = torch.randn(batch, 1, 3, frames, size, size, device=device)
    samples = [ActionDataSample().set_gt_labels([i % cfg.model.cls_head.num_classes])
               for i in range(batch)]
    times = []
    for _ in range(reps + 1):
        if device == 'cuda':
            torch.cuda.synchronize()
        t = time.perf_counter()
        with optim.optim_context(model):
            losses = model(inputs, samples, mode='loss')
        optim.update_params(sum(losses.values()))
        if device == 'cuda':
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sum(p.numel() for p in model.parameters()), statistics.median(times[1:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--configs', nargs='+', default=DEFAULT)
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--reps', type=int, default=3)
    p.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    args = p.parse_args()
    register_all_modules()
    print(f'torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads, '
          f'batch {args.batch} clip(s) of 8x224x224')
    rows = [(c, *measure(c, args.batch, args.reps, args.device)) for c in args.configs]
    ref_params, ref_time = rows[0][1], rows[0][2]
    print('| config | params | Δ params vs first | train step | ratio |\n|---|---|---|---|---|')
    for c, n, t in rows:
        print(f'| {c} | {n / 1e6:.2f}M | {(n - ref_params) / 1e6:+.2f}M | {t:.2f} s | {t / ref_time:.2f}× |')


if __name__ == '__main__':
    main()
