#!/usr/bin/env python
"""How many operators one attention's forward + backward and a tiny TimeSformer train step run,
for softmax and every registered member, in one run.

    python tools/benchmarks/benchmark_operators.py [--shape 4 197 192] [--heads 3] [--no-train-step]
        [--attn NAME ...] [--import MODULE ...] [--out FILE.md] [--json FILE.json]

Counts, on the CPU (the same on a GPU; no timing, so load does not matter): *operators*, the
top-level ``aten::`` operators of ``torch.profiler`` (an operator whose parent in the profiler's
tree is not an ``aten::`` operator: one dispatch from Python or the autograd engine, a view
included), and *kernels*, the operators below autograd that compute (not views: about what a GPU
launches). One attention: ``attn(x).sum().backward()`` on ``x [B, N, C]`` (``--shape``,
requiring its gradient), in training mode, gradients cleared before, after a warm-up call;
every registered self-attention member with its defaults (each DnA variant), plus two forms of
DnA Q±V±: its projections called as modules (a no-op hook on ``qkv``: what a hook or a LoRA
layer gets) and the softmin sign and α folded into the weights (the alternative its route
does not take). Ratios are to softmax. ``--attn`` counts the members it names (by short name or
registered type; ``dna+gated``: DnA with the output gate too, by that name) and softmax and DnA,
which the tables compare to; a member of your own is
counted after ``--import`` of its module (a module on the Python path or a ``.py`` file:
``--attn relu --import docs/attention/relu_attention.py``). Train step:
``configs/timesformer_{softmax,dna}_k400.py`` at the demo's sizes (3 blocks of width 96, 4 heads,
8 frames of 32², batch 1; the config's SGD as on a GPU, ``foreach``), one step after a warm-up
one, the model's operators apart from the optimizer's, its optimizer stepping once per set of
options as dna_mm's runner builds it; each config also with a call per param group (as
mmengine's runner builds it), DnA also with its projections called as modules. The work:
``dna_mm/benchmarks/operators.py``.
"""

from __future__ import annotations

import argparse

#: ``dna_mm.tools.cli.IMPORT_HELP`` (a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--shape',
        type=int,
        nargs=3,
        default=[4, 197, 192],
        metavar=('B', 'N', 'C'),
        help="one attention's input [B, N, C], each at least 1",
    )
    p.add_argument('--heads', type=int, default=3, help='attention heads, at least 1, dividing C')
    p.add_argument('--no-train-step', action='store_true', help='count the attentions only')
    p.add_argument(
        '--attn',
        nargs='+',
        default=None,
        metavar='NAME',
        help='the attention members to count, by short name or registered type (softmax and DnA '
        'always; default: every registered one); NAME+gated: that member with the gate too',
    )
    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
    p.add_argument('--out', help='also write the tables (markdown) here')
    p.add_argument('--json', help='also write the counts (by operator) here')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> list[str]:
    """The counts (:func:`dna_mm.benchmarks.operators.benchmark`: a ``--shape`` or ``--heads`` it
    cannot count at is one line before any work), their files written; returns the tables."""
    import torch

    from dna_mm.benchmarks.operators import benchmark
    from dna_mm.tools.cli import known_methods, output_file
    from dna_mm.utils.files import write_json_atomic, write_text_atomic

    if args.attn is not None:  # each model once; 'dna+gated': DnA with the gate, counted by that name
        args.attn = [known.given for known in known_methods('--attn', args.attn).values()]
    output_file(args.out, '--out')
    output_file(args.json, '--json')
    tables, figures = benchmark(
        tuple(args.shape), args.heads, train_step=not args.no_train_step, members=args.attn
    )
    if args.out:
        write_text_atomic(args.out, '\n\n'.join(tables) + '\n')
    if args.json:
        write_json_atomic(
            args.json, dict(torch=torch.__version__, shape=args.shape, heads=args.heads, **figures)
        )
    return tables


def main(argv: list[str] | None = None) -> list[str]:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('benchmark_operators.py', run, args)


if __name__ == '__main__':
    main()
