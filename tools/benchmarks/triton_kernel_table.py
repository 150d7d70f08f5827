#!/usr/bin/env python
"""Shared memory, registers and spills of the fused DnA kernels, compiled ahead of time (no GPU).

    python tools/benchmarks/triton_kernel_table.py [--capabilities 80 86 89 90 (or 9.0 ...)]
        [--dtypes float16 bfloat16 float32 float32+tf32] [--head-dims 32 64 128]

One markdown row per kernel (the tiled ones, then the packed short-sequence ones): the launch
configuration the device would use, ``metadata.shared`` (bytes), registers and spill stores /
loads from the bundled ``ptxas -v``, and the count of tensor-core instructions (``mma`` /
``wgmma``) in the PTX (``docs/triton_kernel.md``). The work: ``dna_mm/benchmarks/kernels.py``.
"""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--capabilities',
        nargs='+',
        default=['80', '86', '89', '90'],
        help='compute capabilities, 8.0 or more: 90 or 9.0 for sm90',
    )
    p.add_argument(
        '--dtypes',
        nargs='+',
        default=['float16', 'bfloat16', 'float32', 'float32+tf32'],
        choices=['float16', 'bfloat16', 'float32', 'float32+tf32'],
    )
    p.add_argument(
        '--head-dims', nargs='+', type=int, default=[32, 64, 128], help='of the kernels\' 32, 64, 128'
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    """The table (:func:`dna_mm.benchmarks.kernels.kernel_table`: a capability or head size the
    kernels do not take is one line before any compilation)."""
    from dna_mm.benchmarks.kernels import kernel_table

    kernel_table(args.capabilities, args.dtypes, args.head_dims)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    run_tool('triton_kernel_table.py', run, args)


if __name__ == '__main__':
    main()
