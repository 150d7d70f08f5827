#!/usr/bin/env python
"""Time the packed short-sequence Triton kernels' launch configurations on this GPU.

    python tools/benchmarks/tune_short_kernel.py [--clips 8] [--reps 20] [--dtype bfloat16]
        [--candidates 64x4/32x4 32x4/32x4 ...] [--device cuda] [--tiny]

At TimeSformer-B's temporal shape (``clips · 196`` sequences of 8 frames, 12 heads of 64): one
forward + backward of DnA in the packed kernel and of softmax in its one-branch form under each
candidate (forward tile rows × warps / backward tile rows × warps), beside softmax as one SDPA
call and DnA as two; medians, as ratios to softmax's SDPA call. A candidate whose results differ
from the first's is an error. The configurations in use are ``dna_mm/ops/kernel_config.py``'s
(marked ``(table)``). ``--device cpu`` needs ``TRITON_INTERPRET=1`` (with ``--tiny``: checks
the paths; its figures mean nothing). The work: ``dna_mm/benchmarks/short_kernel.py``.
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--device', default='cuda', choices=['cuda', 'cpu'])
    p.add_argument('--dtype', default='bfloat16', choices=['bfloat16', 'float16', 'float32'])
    p.add_argument('--clips', type=int, default=8, help='at least 1')
    p.add_argument('--reps', type=int, default=20, help='at least 1')
    p.add_argument(
        '--candidates',
        nargs='+',
        metavar='FxW/BxW',
        help="default: the module's CANDIDATES; tile rows a power of two, 16 or more",
    )
    p.add_argument('--tiny', action='store_true', help='2 heads of 32, 3 sequences a clip: the paths only')
    args = p.parse_args(argv)
    import torch

    from dna_mm.benchmarks.short_kernel import (
        CANDIDATES,
        HEAD_DIM,
        TINY_HEAD_DIM,
        label,
        markdown,
        parse_candidate,
        tune,
    )
    from dna_mm.errors import ConfigError
    from dna_mm.ops import kernel_available
    from dna_mm.ops.kernel_config import LaunchConfig, short_configs_as
    from dna_mm.utils.tool_runs import at_least

    try:
        at_least({'--clips': args.clips, '--reps': args.reps})
    except ConfigError as e:
        p.error(str(e))
    try:
        candidates = [parse_candidate(c) for c in args.candidates] if args.candidates else CANDIDATES
    except ValueError as e:
        p.error(f'--candidates: {e}')
    dtype = getattr(torch, args.dtype)
    for a, b, c, w in candidates:  # the tiles short_configs_as takes, before any kernel is compiled
        try:
            with short_configs_as(
                dtype,
                TINY_HEAD_DIM if args.tiny else HEAD_DIM,
                LaunchConfig(a, a, b, 1),
                LaunchConfig(c, c, w, 1),
            ):
                pass
        except ValueError as e:
            p.error(f'--candidates {label((a, b, c, w))}: {e}')
    if not kernel_available(torch.device(args.device)):
        p.error(
            f'--device {args.device}: the Triton kernels cannot run here (CUDA of compute capability 8.0+, '
            'or the CPU with TRITON_INTERPRET=1 set)'
        )
    rows = tune(args.device, dtype, args.clips, args.reps, candidates, args.tiny)
    print(markdown(rows, args.device, args.dtype, args.clips, args.tiny))


if __name__ == '__main__':
    main()
