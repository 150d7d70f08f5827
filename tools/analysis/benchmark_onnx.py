#!/usr/bin/env python
"""CPU latency of exported models: PyTorch eager vs onnxruntime, per batch size and thread count.

    python tools/analysis/benchmark_onnx.py [--models CONFIG|timm:NAME ...] [--attn dna softmax]
        [--batches 1 8] [--threads 1 2] [--reps 20] [--out FILE.md]

Each model is built from its config with its initial weights (latency does not depend on them),
exported with ``dna_mm.deployment`` (TorchScript exporter, opset 17, dynamic batch) and checked
against PyTorch (max |diff| of the logits). For every thread count (``torch.set_num_threads``
and onnxruntime's ``intra_op_num_threads``, one inter-op thread) and batch size the two run in
turn, ``--reps`` rounds after three warm-up calls each, the order alternating every round so
that load drifting on a shared machine hits both alike; each figure is the median time of one
call (``torch.inference_mode`` for PyTorch). ``--attn`` sets the temporal and spatial attention
of recognizer configs (one row each). Prints a Markdown table (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import tempfile

DEFAULT_MODELS = ['configs/timesformer_dna_demo.py', 'timm:dna_vit_tiny_patch16_224']


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='+', default=DEFAULT_MODELS)
    p.add_argument('--attn', nargs='+', default=['dna', 'softmax'], help='attentions of recognizer configs')
    p.add_argument('--batches', nargs='+', type=int, default=[1, 8])
    p.add_argument('--threads', nargs='+', type=int, default=[1, 2])
    p.add_argument('--reps', type=int, default=20)
    p.add_argument('--out', default=None, help='also write the table to this Markdown file')
    return p.parse_args(argv)


def bench(name: str, ex, args: argparse.Namespace, path: str) -> list[str]:
    """Table rows of one model (exported to ``path``)."""
    import torch

    from dna_mm.deployment import export, onnx_session, verify
    from dna_mm.deployment.onnx import example_input
    from dna_mm.utils.timing import median_ms, time_in_turns

    export(ex, path, dynamic_batch=True)
    diff = max(verify(ex, path, (1, 2)).values())
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        session = onnx_session(path, threads)

        def eager(x):
            with torch.inference_mode():
                ex.model(x)

        def ort(x, session=session):
            session.run(['logits'], {'inputs': x.numpy()})

        for b in args.batches:
            x = example_input(ex.input_shape, b)
            calls = {'eager': functools.partial(eager, x), 'ort': functools.partial(ort, x)}
            times = time_in_turns(calls, args.reps, warmup=3)
            te, to = (median_ms(times[k]) for k in ('eager', 'ort'))
            rows.append(f'| {name} | {b} | {threads} | {te:.2f} | {to:.2f} | {te / to:.2f}× | {diff:.1e} |')
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> str:
    args = parse_args(argv)
    import torch

    from dna_mm.deployment import load_exportable

    header = [
        f'torch {torch.__version__}, onnxruntime {__import__("onnxruntime").__version__}, '
        f'{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs; '
        f'median of {args.reps} calls',
        '',
        '| model | batch | threads | PyTorch eager (ms) | onnxruntime (ms) | speed-up | max abs diff |',
        '|---|---:|---:|---:|---:|---:|---:|',
    ]
    print('\n'.join(header), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            if model.startswith('timm:'):
                variants = [(model[len('timm:') :], None)]
            else:
                stem = os.path.splitext(os.path.basename(model))[0]
                variants = [(f'{stem} ({attn})', {'model.backbone.attn_cfg': attn}) for attn in args.attn]
            for name, opts in variants:
                ex = load_exportable(model, None, opts)
                rows += bench(name, ex, args, os.path.join(tmp, f'model{len(rows)}.onnx'))
    table = '\n'.join(header + rows) + '\n'
    if args.out:
        with open(args.out, 'w') as f:
            f.write(table)
        print(f'wrote {args.out}', file=sys.stderr)
    return table


if __name__ == '__main__':
    main()
