#!/usr/bin/env python
"""An ImageNet-1K checkpoint on ImageNet-A, -R and -O (the paper's robustness tables).

    python tools/analysis/eval_imagenet_variants.py CONFIG CHECKPOINT [--imagenet-a DIR]
        [--imagenet-r DIR] [--imagenet-o DIR --imagenet-val DIR] [--train-root ROOT]
        [--out results.json] [--batch-size 32] [--beta 100] [--device cpu|cuda:0] [--cfg-options k=v ...]

CONFIG is the checkpoint's ImageNet config (configs/imagenet/*: its model and test pipeline).
The sets are their released folders (``<wnid>/*.jpg``). ImageNet-A / -R: accuracy, RMS calibration
error and AURRA on their 200 classes (the model's logits of those classes, a softmax over them);
ImageNet-O: AUROC, AUPR and FPR at 95 % TPR for telling its images from ImageNet validation images
(``--imagenet-val``: its ``<wnid>/`` folders) of the same 200 classes, by the maximum softmax.
All in %. The model's 1000 classes are the WordNet ids of ``--train-root``'s ``train/`` folders
(default: the config's ``data_root``). Formulas: dna_mm/evaluation/imagenet_variants.py.

Checked before the model is built: ``--out`` is a file path that names none of the inputs (the
config, the checkpoint, an image of the sets, by any spelling or link), and ImageNet-A / -R hold
at least ``2 × --beta`` images each (the RMS calibration error leaves its most confident bin out,
as Hendrycks et al.'s code does, so it needs two bins).
"""

from __future__ import annotations

import argparse
import json


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='An ImageNet checkpoint on ImageNet-A / -R / -O')
    p.add_argument('config', help='the ImageNet config of the checkpoint (configs/imagenet/...)')
    p.add_argument('checkpoint', help='checkpoint: local file, URL or mmengine prefix')
    p.add_argument('--imagenet-a', help='ImageNet-A folder (<wnid>/*.jpg)')
    p.add_argument('--imagenet-r', help='ImageNet-R folder (<wnid>/*.jpg)')
    p.add_argument('--imagenet-o', help='ImageNet-O folder (<wnid>/*.jpg); needs --imagenet-val')
    p.add_argument('--imagenet-val', help='ImageNet validation images in <wnid>/ folders (for ImageNet-O)')
    p.add_argument('--train-root', help="ImageNet root whose train/<wnid>/ folders name the model's classes")
    p.add_argument('--out', help='write the results as JSON')
    p.add_argument('--batch-size', type=int, default=32)
    p.add_argument(
        '--beta', type=int, default=100, help="images per RMS calibration-error bin (Hendrycks': 100)"
    )
    p.add_argument('--device', help='cuda:0, cpu, ... (default: cuda:0 when there is a GPU)')
    p.add_argument(
        '--cfg-options', nargs='+', metavar='KEY=VALUE', help='override config settings, key=value'
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.beta < 1 or args.batch_size < 1:
        p.error(f'--beta and --batch-size must be at least 1, got {args.beta} and {args.batch_size}')
    if not (args.imagenet_a or args.imagenet_r or args.imagenet_o):
        p.error('give at least one of --imagenet-a, --imagenet-r, --imagenet-o')
    if args.imagenet_o and not args.imagenet_val:
        p.error('--imagenet-o needs --imagenet-val (the in-distribution images)')
    return args


def check_out(args: argparse.Namespace, images: list) -> None:
    """``--out``: not a folder, and none of the inputs (``images``: those of the sets) by any
    spelling or link; a :class:`~dna_mm.errors.UserError` before any work."""
    import os

    from dna_mm.tools.cli import not_an_input, output_file

    if args.out is None:
        return
    output_file(args.out, '--out')
    not_an_input(args.out, '--out', dict(config=args.config, checkpoint=args.checkpoint))
    if os.path.exists(args.out):  # a new file cannot be one of the images
        for image in images:
            not_an_input(args.out, '--out', {'image': str(image)})


def evaluate(args: argparse.Namespace) -> dict:
    from pathlib import Path

    import torch
    from mmengine.dataset import Compose

    from dna_mm.analysis.models import mismatch_advice
    from dna_mm.checkpoint import load_whole_model
    from dna_mm.config.model import model_from_config
    from dna_mm.evaluation.imagenet_variants import list_sets, score_sets
    from dna_mm.preparation.imagenet import class_ids
    from dna_mm.tools.cli import user_file
    from dna_mm.utils.files import write_text_atomic

    check_out(args, [])
    user_file(args.checkpoint, 'checkpoint')
    cfg, model = model_from_config(args.config, args.cfg_options)  # its values checked first
    wnids = class_ids(Path(args.train_root or cfg.test_dataloader.dataset.data_root))
    path = lambda x: Path(x) if x else None  # noqa: E731
    sets = list_sets(
        wnids,
        path(args.imagenet_a),
        path(args.imagenet_r),
        path(args.imagenet_o),
        path(args.imagenet_val),
        args.beta,
    )
    check_out(args, sets.images())
    device = args.device or ('cuda:0' if torch.cuda.is_available() else 'cpu')
    load_whole_model(model, args.checkpoint, advice=mismatch_advice(args.config))
    model.to(device).eval()
    pipeline = Compose(cfg.test_dataloader.dataset.pipeline)
    results = score_sets(model, pipeline, sets, args.batch_size, args.beta)
    for name, measures in results.items():
        shown = '  '.join(
            f'{k}: {v:.2f}' for k, v in measures.items() if k not in ('images', 'in_distribution')
        )
        extra = (
            f', {measures["in_distribution"]:.0f} in-distribution' if 'in_distribution' in measures else ''
        )
        print(f'{name} ({measures["images"]:.0f} images{extra}): {shown}')
    if args.out:
        write_text_atomic(args.out, json.dumps(results, indent=2) + '\n')
        print(f'wrote {args.out}')
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('eval_imagenet_variants.py', evaluate, args)


if __name__ == '__main__':
    main()
