#!/usr/bin/env python
"""Shared memory, registers and spills of the fused DnA kernels, compiled ahead of time (no GPU).

    python tools/analysis/triton_kernel_table.py [--capabilities 80 86 89 90]
        [--dtypes float16 bfloat16 float32 float32+tf32] [--head-dims 32 64 128]

One markdown row per kernel: the launch configuration the device would use, ``metadata.shared``
(bytes), registers and spill stores / loads from the bundled ``ptxas -v``, and the count of
tensor-core instructions (``mma`` / ``wgmma``) in the PTX (``docs/triton_kernel.md``).
"""

from __future__ import annotations

import argparse


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--capabilities', nargs='+', default=['80', '86', '89', '90'], help='e.g. 90 for sm90')
    p.add_argument(
        '--dtypes',
        nargs='+',
        default=['float16', 'bfloat16', 'float32', 'float32+tf32'],
        choices=['float16', 'bfloat16', 'float32', 'float32+tf32'],
    )
    p.add_argument('--head-dims', nargs='+', type=int, default=[32, 64, 128])
    args = p.parse_args()
    import torch

    from dna_mm.ops import (
        compile_kernels,
        launch_configs,
        resource_usage,
        shared_memory_limit,
        tensor_core_instructions,
    )

    print('| target | dtype | d | kernel | config | shared B (limit) | regs | spill st / ld B | mma |')
    print('|---|---|---|---|---|---|---|---|---|')
    for cap_text in args.capabilities:
        cap = (int(cap_text[:-1]), int(cap_text[-1]))
        for name in args.dtypes:
            torch.backends.cuda.matmul.allow_tf32 = name.endswith('+tf32')
            dtype = getattr(torch, name.split('+')[0])
            for d in args.head_dims:
                configs = launch_configs(cap, dtype, d)
                for kernel_name, kernel in compile_kernels(cap, dtype, d).items():
                    use = resource_usage(kernel)
                    print(
                        f'| sm{cap_text} | {name} | {d} | {kernel_name} | {tuple(configs[kernel_name])} | '
                        f'{kernel.metadata.shared:,} ({shared_memory_limit(cap):,}) | {use.registers} | '
                        f'{use.spill_stores} / {use.spill_loads} | {tensor_core_instructions(kernel)} |',
                        flush=True,
                    )


if __name__ == '__main__':
    main()
