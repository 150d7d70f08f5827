#!/usr/bin/env python
"""fwd+bwd time and peak memory of the attention family at TimeSformer-B shapes.

    python tools/benchmarks/benchmark_attention.py [--device cpu cuda] [--reps 15] [--clips 1]
        [--methods NAME ...] [--import MODULE ...] [--out FILE.md] [--json FILE.json] [--tiny]

Shapes (12 heads of 64, C = 768; batch = ``--clips`` 8-frame clips at 224², one by default):
spatial ``[8, 197, 768]``, temporal ``[196, 8, 768]``, joint ``[1, 1569, 768]`` per clip; with
``--shapes ... vitdet_global`` also ViTDet-B's global blocks ``[1, 4096, 768]`` with their
decomposed rel-pos bias (a float logit bias ``[1, 12, 4096, 4096]`` in the benchmark dtype, one
per branch for DnA, as ViTDet computes it from each branch's queries). ``--tiny`` shrinks every
shape (C = 64 in 2 heads of 32, a few tokens) to run the script's paths in seconds, e.g. on a
CPU before a GPU run (in one process; no CPU memory figures); its figures mean nothing.
Two scopes: ``core`` (between the input projections and the output projection: what DnA
changes; the floor for two branches is 2.0×) and ``module`` (projections included: what a
model pays).
Methods: softmax (SDPA), DnA Q±V± fast (the module's fused route: two SDPA calls, the softmin
sign and α as passes over the activations), DnA eager (explicit maps, the authors'
formulation), Diff (SDPA), Cog (explicit: no SDPA form). ``--methods`` takes any registered
attention member by short name or registered type (its defaults; ``dna:apm``, ``dna+gated``: a
DnA variant, the output gate, as the demos take them; a member of your own after
``--import`` of its module, a module on the Python path or a ``.py`` file: ``--methods softmax
dna_fast relu --import docs/attention/relu_attention.py``), and DnA's other routes by name:
``dna_folded`` = the fused route with the sign and α folded into the ``Q-`` / ``V-``
projection weights instead (``-Q- = x (-W)ᵀ - b``, ``α V- = x (α W)ᵀ + α b``: ``O(C²)`` work
in place of the passes; its core starts from those folded heads); ``softmax_eager`` = softmax
with explicit maps (what the SDPA kernel itself gains over them: the most DnA fast can gain
over DnA eager); ``dna_2h`` = DnA with both branches in one SDPA call over ``2H`` heads
(``kernel='sdpa_2h'``); ``dna_stacked`` = DnA with both branches in one SDPA call over the
queries stacked, ``[Q+; -Q-]``, and the values side by side, ``[V+, V-]``
(``kernel='sdpa_stacked'``: one pass over the keys for twice the value work; for short
sequences); ``dna_triton`` = DnA through the fused Triton kernel (CUDA, or the CPU under
``TRITON_INTERPRET=1``; left out elsewhere, with a line saying so; at most 32 tokens without a
bias: its packed short-sequence form); ``softmax_triton`` = softmax through that packed form's
one branch (SDPA where it does not apply), the same-kernel baseline of ``dna_triton``.
A GPU table (bf16 autocast, all four shapes):
``--device cuda --dtype bfloat16 --shapes spatial temporal joint vitdet_global
--methods softmax dna_fast dna_triton``.

Times: for each (device, scope, shape) every method is built and their steps run in turn
(``--reps`` rounds, the order rotating each round, after two warm-up steps each), so load that
drifts on a shared machine hits all methods alike; each figure is a median. On the CPU each
(device, scope, shape) runs in its own process.
Memory: CUDA ``max_memory_allocated`` of one step above what is allocated before it (the
method's earlier gradients released first), in the same process; CPU the growth of the peak
RSS over the baseline taken after the module and inputs exist, each (device, scope, shape,
method) in a fresh process, so the peak is its own. Everything is reported as a ratio to
softmax measured in the same run; ``--json`` also writes the raw figures. The work:
``dna_mm/benchmarks/attention.py``.
"""

from __future__ import annotations

import argparse

#: ``dna_mm.benchmarks.attention``'s shapes, routes and default methods, for the command line (a
#: test keeps them equal)
SHAPES = ('spatial', 'temporal', 'joint', 'vitdet_global')
DEFAULT_SHAPES = ['spatial', 'temporal', 'joint']
ROUTES = (
    'dna_fast',
    'dna_folded',
    'dna_eager',
    'softmax_eager',
    'dna_2h',
    'dna_stacked',
    'dna_triton',
    'softmax_triton',
)
DEFAULT_METHODS = ['softmax', 'dna_fast', 'dna_eager', 'diff', 'cog']
#: ``dna_mm.tools.cli.IMPORT_HELP`` (a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--device',
        nargs='+',
        default=None,
        metavar='DEVICE',
        help='cpu or cuda; default: cpu, and cuda if present',
    )
    p.add_argument('--reps', type=int, default=15, help='timed steps per method (at least 1)')
    p.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16', 'float16'])
    p.add_argument('--shapes', nargs='+', default=DEFAULT_SHAPES, choices=list(SHAPES))
    p.add_argument('--scope', nargs='+', default=['core', 'module'], choices=['core', 'module'])
    p.add_argument(
        '--methods',
        nargs='+',
        default=DEFAULT_METHODS,
        metavar='NAME',
        help='any registered attention member (short name or registered type; NAME:VARIANT, '
        f'NAME+gated: so set, as the demos take them) or a route: {", ".join(ROUTES)}; softmax and '
        'dna_fast are always measured (the ratios need them)',
    )
    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
    p.add_argument(
        '--clips', type=int, default=1, help='8-frame clips per batch, at least 1 (scales every shape)'
    )
    p.add_argument('--tiny', action='store_true', help='tiny shapes: check the paths, not a benchmark')
    p.add_argument('--out', help='also write the tables (markdown) here')
    p.add_argument('--json', help='also write the raw figures here')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> list[str]:
    """The benchmark (:func:`dna_mm.benchmarks.attention.benchmark`: a device, ``--reps`` or
    ``--clips`` it cannot measure is one line before any work), its files written; returns the
    tables."""
    import torch

    from dna_mm.benchmarks.attention import benchmark, dims, method_config
    from dna_mm.family import distinct_methods
    from dna_mm.tools.cli import known_names, output_file
    from dna_mm.utils.files import write_json_atomic, write_text_atomic

    args.methods = list(distinct_methods('--methods', args.methods).values())  # each model once
    known_names('--methods', args.methods, method_config)
    output_file(args.out, '--out')
    output_file(args.json, '--json')
    devices = args.device or (['cpu'] + (['cuda'] if torch.cuda.is_available() else []))
    tables, figures = benchmark(
        devices,
        args.scope,
        args.shapes,
        args.methods,
        args.reps,
        args.dtype,
        args.clips,
        args.tiny,
        imports=tuple(args.imports),
    )
    if args.out:
        write_text_atomic(args.out, '\n\n'.join(tables) + '\n')
    if args.json:
        c, h, _ = dims(args.tiny)
        meta = dict(torch=torch.__version__, dtype=args.dtype, reps=args.reps, clips=args.clips, C=c, H=h)
        write_json_atomic(args.json, dict(meta, tiny=args.tiny, tables=figures))
    return tables


def main(argv: list[str] | None = None) -> list[str]:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('benchmark_attention.py', run, args)


if __name__ == '__main__':
    main()
