"""The fused DnA kernels' resources, compiled ahead of time for GPUs that need not be here: the
work of ``tools/benchmarks/triton_kernel_table.py`` (``docs/triton_kernel.md``).

:func:`kernel_table` says one markdown row per (target, dtype, head size, kernel): the launch
configuration the device would use, shared memory (and the target's limit), registers, spill
stores / loads (the bundled ``ptxas -v``) and the tensor-core instructions in the PTX: the tiled
kernels (a 197-token problem with both biases), then the packed short-sequence ones (8 tokens).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..ops import (
    compile_kernels,
    launch_configs,
    resource_usage,
    shared_memory_limit,
    short_launch_configs,
    tensor_core_instructions,
)

#: the dtypes a row can be for: ``float32+tf32`` is float32 with TF32 matmuls allowed
DTYPES = ('float16', 'bfloat16', 'float32', 'float32+tf32')


def kernel_table(
    capabilities: Sequence[str],
    dtypes: Sequence[str],
    head_dims: Sequence[int],
    echo: Callable[..., None] = print,
) -> None:
    """The table for compute capabilities ``capabilities`` (``'90'`` for sm90), each of
    ``dtypes`` (:data:`DTYPES`) and head size of ``head_dims``, said row by row through ``echo``."""
    echo('| target | dtype | d | kernel | config | shared B (limit) | regs | spill st / ld B | mma |')
    echo('|---|---|---|---|---|---|---|---|---|')
    for cap_text in capabilities:
        cap = (int(cap_text[:-1]), int(cap_text[-1]))
        for name in dtypes:
            torch.backends.cuda.matmul.allow_tf32 = name.endswith('+tf32')
            dtype = getattr(torch, name.split('+')[0])
            for d in head_dims:
                configs = launch_configs(cap, dtype, d) | short_launch_configs(cap, dtype, d, 8)
                kernels = compile_kernels(cap, dtype, d) | compile_kernels(cap, dtype, d, short=True)
                for kernel_name, kernel in kernels.items():
                    use = resource_usage(kernel)
                    echo(
                        f'| sm{cap_text} | {name} | {d} | {kernel_name} | {tuple(configs[kernel_name])} | '
                        f'{kernel.metadata.shared:,} ({shared_memory_limit(cap):,}) | {use.registers} | '
                        f'{use.spill_stores} / {use.spill_loads} | {tensor_core_instructions(kernel)} |',
                        flush=True,
                    )
