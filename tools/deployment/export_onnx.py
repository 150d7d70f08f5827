#!/usr/bin/env python
"""Export a recognizer or a timm dna_vit_* model to ONNX (and check it in onnxruntime).

    python tools/deployment/export_onnx.py CONFIG CHECKPOINT --out model.onnx
        [--batch 1|N|dynamic] [--verify] [--opset 17] [--dynamo] [--cfg-options k=v ...]

CONFIG is an MMAction2 recognizer config (TimeSformer with any attention of the family,
divided, joint or space-only) or ``timm:<model>`` (e.g. ``timm:dna_vit_tiny_patch16_224``,
``--cfg-options`` are then ``create_model`` arguments). The graph takes the normalised input
``inputs [B, C, T, H, W]`` (``[B, C, H, W]`` for images) and returns ``logits [B, K]``; the mean
and std are in the file's metadata. ``--verify`` runs the file in onnxruntime on a seeded input
(batch 1, and 2 with ``--batch dynamic``), prints the largest absolute difference to PyTorch and
exits 1 when it exceeds ``--atol``. The exporter is TorchScript-based by default (opset 17);
``--dynamo`` uses the ``torch.export``-based one (opset 18 or later). Logic:
``dna_mm/deployment/onnx.py``; exporters and opsets per attention: ``docs/deployment.md``.
"""

from __future__ import annotations

import argparse
import os
import os.path as osp
import sys
import time

#: ``dna_mm.deployment.DEFAULT_OPSET`` (a test keeps them equal)
DEFAULT_OPSET = 17


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config', help='MMAction2 recognizer config, or timm:<model name>')
    p.add_argument('checkpoint', help='whole-model checkpoint')
    p.add_argument('--out', required=True, help='the .onnx file to write')
    p.add_argument('--batch', default='1', help="batch size of the graph, or 'dynamic' (default 1)")
    p.add_argument('--verify', action='store_true', help='compare onnxruntime with PyTorch')
    p.add_argument('--atol', type=float, default=1e-4, help='largest accepted difference with --verify')
    p.add_argument(
        '--opset', type=int, default=None, help=f'ONNX opset (default {DEFAULT_OPSET}; 18 with --dynamo)'
    )
    p.add_argument('--dynamo', action='store_true', help='torch.export-based exporter (needs onnxscript)')
    p.add_argument('--cfg-options', nargs='+', metavar='KEY=VALUE', default=None)
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def export_model(args: argparse.Namespace) -> dict:
    from dna_mm.deployment import export, load_exportable, verify
    from dna_mm.errors import ConfigError

    dynamic = args.batch == 'dynamic'
    if not dynamic and not (args.batch.isdigit() and int(args.batch) > 0):
        raise ConfigError(f"--batch must be a positive integer or 'dynamic', got {args.batch!r}")
    batch = 1 if dynamic else int(args.batch)
    opset = args.opset or (18 if args.dynamo else DEFAULT_OPSET)
    if args.dynamo and opset < 18:
        raise ConfigError(f'--dynamo exports opset 18 or later, got --opset {opset}')
    ex = load_exportable(args.config, args.checkpoint, args.cfg_options)
    if osp.dirname(args.out):
        os.makedirs(osp.dirname(args.out), exist_ok=True)
    start = time.time()
    export(ex, args.out, batch, dynamic, opset, args.dynamo)
    shape = ['B' if dynamic else batch, *ex.input_shape[1:]]
    exporter = 'dynamo' if args.dynamo else 'torchscript'
    print(
        f'wrote {args.out} ({osp.getsize(args.out) / 2**20:.1f} MiB, opset {opset}, {exporter} exporter, '
        f'{time.time() - start:.1f} s): inputs {shape} -> logits [{shape[0]}, K]'
    )
    result = dict(path=args.out, opset=opset, dynamo=args.dynamo, input_shape=shape)
    if args.verify:
        diffs = verify(ex, args.out, (1, 2) if dynamic else (batch,))
        worst = max(diffs.values())
        for b, d in diffs.items():
            print(f'verify (onnxruntime vs PyTorch, batch {b}): max |diff| = {d:.2e}')
        result['max_diff'] = diffs
        if worst > args.atol:
            print(f'export_onnx.py: max difference {worst:.2e} exceeds --atol {args.atol:g}', file=sys.stderr)
            sys.exit(1)
    return result


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('export_onnx.py', export_model, args)


if __name__ == '__main__':
    main()
