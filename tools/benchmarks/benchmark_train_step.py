#!/usr/bin/env python
"""Parameter count and train-step time of TimeSformer-B, ViTDet Mask R-CNN or ImageNet ViT configs,
measured in one run.

    python tools/benchmarks/benchmark_train_step.py [--configs A.py B.py] [--batch 1] [--reps 3]
        [--device cuda] [--amp-dtype bfloat16] [--compile | --compare-compile] [--part backbone]
        [--json FILE]
        [--cfg-options model.backbone.with_cp=True ...]
    # the GPU comparison of the GPU issue: DnA vs softmax vs MMAction2's stock TimeSformer
    python tools/benchmarks/benchmark_train_step.py --device cuda --batch 8 --amp-dtype bfloat16 \
        --configs configs/timesformer_softmax_k400.py configs/timesformer_dna_k400.py \
        mmaction::recognition/timesformer/timesformer_divST_8xb8-8x32x1-15e_kinetics400-rgb.py
    python tools/benchmarks/benchmark_train_step.py --configs configs/vitdet_softmax_coco.py \
        configs/vitdet_dna_coco.py configs/vitdet_softmax_coco_lsj.py configs/vitdet_dna_coco_lsj.py
    python tools/benchmarks/benchmark_train_step.py --configs configs/imagenet/vit-b16_softmax_in1k.py \
        configs/imagenet/dna_vit-b16_in1k.py configs/imagenet/vit-b16_diff_in1k.py

A train step is ``optim_wrapper.update_params(model(clip, mode='loss'))`` on a random
``[batch, 1, 3, 8, 224, 224]`` clip through the config's own Recognizer3D and optimizer
(AMP on CUDA, plain on CPU), median of ``--reps`` after one warm-up step; the configs' models
are built first and take turns step by step, so load drift hits them alike. For an MMDetection
config (``default_scope='mmdet'``) it is the detector's loss on random ``img_size²`` images,
each with 4 boxes and masks (preprocessed once, outside the timing); for an MMPretrain config
(``default_scope='mmpretrain'``, the ImageNet ones) the classifier's loss on random
``img_size²`` images (224 where the backbone names none), put through its data preprocessor
in training once, outside the timing (normalised; Mixup / CutMix give soft labels). The
``backbone`` column counts the backbone's parameters alone. A config may be a zoo config (``mmaction::...``).
``--part backbone``: the backbone (and the detector's neck) alone, forward and backward of the
mean of its outputs on random inputs, with the config's optimizer: for a detector, without the
RoI heads.

``--compare-with-cp`` measures each config twice, as it is and with
``model.backbone.with_cp=True`` (activation checkpointing). ``--peak-rss`` (CPU) runs each
(config, with_cp) in a fresh process and reports its resident memory after building the model
and optimizer and its peak over the train steps (``ru_maxrss``): the difference is what the
steps themselves need (activations, gradients, optimizer state). Measured figures:
docs/training.md (memory)::

    python tools/benchmarks/benchmark_train_step.py --configs configs/timesformer_dna_k400.py \
        --compare-with-cp --peak-rss --reps 1 [--cfg-options model.backbone.num_frames=16]

``--amp-dtype`` (CUDA) gives every config the same recipe: MMEngine's ``AmpOptimWrapper`` in
that dtype around the config's own optimizer (a ``GradScaler`` for fp16 only, as
``AutoAmpOptimWrapper`` does). ``--compile`` wraps each backbone in
``torch.compile`` (inductor: the attention is there); ``--compare-compile`` measures each config
twice, eager and compiled, in the same turns, and adds the first step's time (the compiler's
work, not in the median). Measured figures: docs/training.md (torch.compile)::

    python tools/benchmarks/benchmark_train_step.py --configs configs/timesformer_softmax_k400.py \
        configs/timesformer_dna_k400.py --compare-compile --batch 2 --reps 5 --cfg-options \
        model.backbone.num_transformer_layers=4 model.backbone.img_size=112

On CUDA the table adds the peak memory of each config's steps
(``max_memory_allocated``) and the throughput (clips/s, or images/s); ``--kernels`` profiles one
more step of each config (``torch.profiler``): the time its kernels kept the GPU busy, as a share
of the step, and how many kernels it launched (a step much longer than its GPU time is bound by
launching them, not by the GPU's work), then a second table: each kernel counted under the
operator that launched it (``mm``, ``mul (MulBackward0)``: a backward node's, ``_foreach_add_
(SGD.step)``: the optimizer's), the 15 operators whose time differs most from the first config's.
On the CPU ``--kernels`` lists the ``aten::`` operators and their own time.
``--json`` also writes the figures. The work: ``dna_mm/benchmarks/train_step.py``.

The default configs (TimeSformer-B, softmax and DnA) are the shipped ones, found from any folder
(``configs/NAME`` where the current folder has it, a checkout; else the installed ``dna_mm::NAME``).
"""

from __future__ import annotations

import argparse
from typing import Optional

#: ``--configs``' default, as a checkout names them (found from any folder: :func:`default_configs`)
DEFAULT = ['configs/timesformer_softmax_k400.py', 'configs/timesformer_dna_k400.py']


def default_configs() -> list[str]:
    """:data:`DEFAULT` as this folder finds them: where the current folder has them (a checkout),
    else the shipped ones (``dna_mm::NAME``: :func:`~dna_mm.utils.tool_runs.shipped_config`)."""
    from pathlib import Path

    from dna_mm.utils.tool_runs import shipped_config

    return [shipped_config(c, Path.cwd()) for c in DEFAULT]


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--configs',
        nargs='+',
        default=None,
        metavar='CONFIG',
        help=f'default: {" ".join(DEFAULT)} (the shipped configs from any folder)',
    )
    p.add_argument('--batch', type=int, default=1, help='clips (images) a step, at least 1')
    p.add_argument('--reps', type=int, default=3, help='timed steps per config, at least 1')
    p.add_argument(
        '--device', default=None, help='cpu, cuda or cuda:N; default: cuda if there is a GPU, else cpu'
    )
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
        help='also profile one step of each config: the time its kernels kept the GPU busy, how many '
        'it launched, and the operators whose kernels differ most from the first config (CPU: the '
        'operators and their own time)',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    from dna_mm.tools.cli import run_tool

    run_tool('benchmark_train_step.py', lambda args: benchmark(args, p), args)  # a typo: one line


def benchmark(args: argparse.Namespace, p: argparse.ArgumentParser) -> None:
    """The tables of :func:`main`'s arguments (``--cfg-options`` already a dict); what cannot be
    measured (``--batch 0``, a device torch does not have, a config without a model or with a
    wrong model value) is one line before any model is built
    (:func:`dna_mm.benchmarks.train_step.check_request`)."""
    import torch

    from dna_mm.benchmarks.train_step import peak_rss_table, step_table
    from dna_mm.tools.cli import output_file
    from dna_mm.utils.files import write_json_atomic

    output_file(args.json, '--json')
    args.cfg_options = args.cfg_options or {}
    args.configs = args.configs or default_configs()
    if args.device is None:
        args.device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if args.amp_dtype and not args.device.startswith('cuda'):
        p.error('--amp-dtype needs --device cuda')
    if args.peak_rss and args.device != 'cpu':
        p.error('--peak-rss measures CPU memory (--device cpu); on CUDA the table has the peak GPU memory')
    if args.kernels and args.peak_rss:
        p.error('--kernels profiles a step of the timed run; --peak-rss runs each config apart: choose one')
    if args.compile and args.compare_compile:
        p.error('--compile or --compare-compile: choose one')
    runs = [(c, dict(args.cfg_options), args.compile) for c in args.configs]
    if args.compare_with_cp:
        runs = [(c, dict(o, **{'model.backbone.with_cp': cp}), k) for c, o, k in runs for cp in (False, True)]
    if args.compare_compile:
        runs = [(c, o, k) for c, o, _ in runs for k in (False, True)]
    if args.peak_rss:
        peak_rss_table(runs, args.batch, args.reps, args.cfg_options)
        return
    figures = step_table(
        runs,
        args.batch,
        args.reps,
        args.device,
        args.amp_dtype,
        args.part,
        args.cfg_options,
        args.compile,
        args.compare_compile,
        args.kernels,
    )
    if args.json:
        write_json_atomic(args.json, figures)


if __name__ == '__main__':
    main()
