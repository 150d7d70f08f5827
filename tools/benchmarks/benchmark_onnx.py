#!/usr/bin/env python
"""CPU latency of exported models: PyTorch eager vs onnxruntime, per batch size and thread count.

    python tools/benchmarks/benchmark_onnx.py [--models CONFIG|timm:NAME ...] [--attn dna softmax]
        [--batches 1 8] [--threads 1 2] [--reps 20] [--out FILE.md]

Each model is built from its config with its initial weights (latency does not depend on them),
exported with ``dna_mm.deployment`` (TorchScript exporter, opset 17, dynamic batch) and checked
against PyTorch (max |diff| of the logits). For every thread count (``torch.set_num_threads``
and onnxruntime's ``intra_op_num_threads``, one inter-op thread) and batch size the two run in
turn, ``--reps`` rounds after three warm-up calls each, the order alternating every round so
that load drifting on a shared machine hits both alike; each figure is the median time of one
call (``torch.inference_mode`` for PyTorch). ``--attn`` sets the temporal and spatial attention
of recognizer configs (one row each; a member's name with its settings as the demos take it,
``dna:apm``, ``dna+gated``); without it a config given is measured as it is written (its own
attention, variant and gate), the default models with DnA and softmax. Prints a Markdown table
(and writes it to ``--out``). The work: ``dna_mm/benchmarks/deployment.py``.

The default models are the demo TimeSformer and timm's ``dna_vit_tiny_patch16_224``: the shipped
config, found from any folder (``configs/NAME`` where the current folder has it, a checkout;
else the installed ``dna_mm::NAME``). A model argument that names no config, or a timm name timm
does not know, is one line (exit status 2) before anything is measured.
"""

from __future__ import annotations

import argparse
import sys

#: ``dna_mm.tools.cli.IMPORT_HELP`` (a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)
#: ``--attn``'s default for the default models (a model given is measured as its config writes it)
DEFAULT_ATTN = ['dna', 'softmax']
#: ``--models``' default: a config as a checkout names it (found from any folder: :func:`default_models`)
DEFAULT_MODELS = ['configs/timesformer_dna_demo.py', 'timm:dna_vit_tiny_patch16_224']


def default_models() -> list[str]:
    """:data:`DEFAULT_MODELS` as this folder finds them: a config where the current folder has it
    (a checkout), else the shipped one (``dna_mm::NAME``:
    :func:`~dna_mm.utils.tool_runs.shipped_config`); a ``timm:`` name as it is."""
    from pathlib import Path

    from dna_mm.utils.tool_runs import shipped_config

    return [m if m.startswith('timm:') else shipped_config(m, Path.cwd()) for m in DEFAULT_MODELS]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--models',
        nargs='+',
        default=None,
        metavar='CONFIG|timm:NAME',
        help=f'default: {" ".join(DEFAULT_MODELS)} (the shipped config from any folder)',
    )
    p.add_argument(
        '--attn',
        nargs='+',
        default=None,
        metavar='NAME',
        help="attentions a recognizer config is measured with, each in place of its attn_cfg: any "
        'registered attention member (NAME:VARIANT, NAME+gated: so set); default: the config as '
        f'written ({" and ".join(DEFAULT_ATTN)} for the default models)',
    )
    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
    p.add_argument('--batches', nargs='+', type=int, default=[1, 8])
    p.add_argument('--threads', nargs='+', type=int, default=[1, 2])
    p.add_argument('--reps', type=int, default=20)
    p.add_argument('--out', default=None, help='also write the table to this Markdown file')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def measure(args: argparse.Namespace) -> str:
    """The table of :func:`main`'s arguments (written to ``--out`` too)."""
    from dna_mm.benchmarks.deployment import benchmark
    from dna_mm.tools.cli import known_methods, output_file
    from dna_mm.utils.files import write_text_atomic

    attn = args.attn if args.attn is not None or args.models else DEFAULT_ATTN
    if attn is not None:  # each model once; 'dna:apm+gated': DnA's A± with the gate
        attn = [known.given for known in known_methods('--attn', attn).values()]
    output_file(args.out, '--out')
    table = benchmark(args.models or default_models(), attn, args.batches, args.threads, args.reps)
    if args.out:
        write_text_atomic(args.out, table)
        print(f'wrote {args.out}', file=sys.stderr)
    return table


def main(argv: list[str] | None = None) -> str:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('benchmark_onnx.py', measure, args)  # a missing config, a misspelt name: one line


if __name__ == '__main__':
    main()
