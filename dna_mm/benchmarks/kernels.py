"""The fused DnA kernels' resources, compiled ahead of time for GPUs that need not be here: the
work of ``tools/benchmarks/triton_kernel_table.py`` (``docs/triton_kernel.md``).

:func:`kernel_table` says one markdown row per (target, dtype, head size, kernel): the launch
configuration the device would use, shared memory (and the target's limit), registers, spill
stores / loads (the bundled ``ptxas -v``) and the tensor-core instructions in the PTX: the tiled
kernels (a 197-token problem with both biases), then the packed short-sequence ones (8 tokens).
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

import torch

from ..errors import ConfigError
from ..ops import (
    HEAD_DIMS,
    compile_kernels,
    launch_configs,
    resource_usage,
    shared_memory_limit,
    short_launch_configs,
    tensor_core_instructions,
)

#: the dtypes a row can be for: ``float32+tf32`` is float32 with TF32 matmuls allowed
DTYPES = ('float16', 'bfloat16', 'float32', 'float32+tf32')
#: the least compute capability the kernels run on (``dna_mm.ops.kernel_available``: bf16 and the
#: tensor-core instructions they use)
LEAST_CAPABILITY = (8, 0)


def capability(text: str) -> tuple[int, int]:
    """A compute capability as ``--capabilities`` takes it: ``'90'`` or ``'9.0'`` (``sm90`` too)
    → ``(9, 0)``.

    Raises:
        ConfigError: not one, or below :data:`LEAST_CAPABILITY`, in one line.
    """
    found = re.fullmatch(r'(?:sm_?)?(\d+?)\.?(\d)', text.strip().lower())
    if found is None:
        raise ConfigError(f'--capabilities {text}: expected a compute capability as 90 or 9.0 (sm90)')
    cap = (int(found[1]), int(found[2]))
    if cap < LEAST_CAPABILITY:
        least = '.'.join(map(str, LEAST_CAPABILITY))
        raise ConfigError(
            f'--capabilities {text}: the kernels run on compute capability {least} or more '
            f'(sm{"".join(map(str, LEAST_CAPABILITY))}+), not sm{cap[0]}{cap[1]}'
        )
    return cap


def check_request(capabilities: Sequence[str], head_dims: Sequence[int]) -> list[tuple[int, int]]:
    """The ``capabilities`` read (:func:`capability`), before any compilation; a head size the
    kernels do not take (:data:`~dna_mm.ops.HEAD_DIMS`) refused too.

    Raises:
        ConfigError: the flag, its value and what it takes, in one line.
    """
    caps = [capability(text) for text in capabilities]
    for d in head_dims:
        if d not in HEAD_DIMS:
            raise ConfigError(f'--head-dims {d}: the kernels take head dims {", ".join(map(str, HEAD_DIMS))}')
    return caps


def kernel_table(
    capabilities: Sequence[str],
    dtypes: Sequence[str],
    head_dims: Sequence[int],
    echo: Callable[..., None] = print,
) -> None:
    """The table for compute capabilities ``capabilities`` (``'90'`` or ``'9.0'`` for sm90), each
    of ``dtypes`` (:data:`DTYPES`) and head size of ``head_dims``, said row by row through
    ``echo``; what the kernels cannot be compiled for is one line first (:func:`check_request`)."""
    caps = check_request(capabilities, head_dims)
    echo('| target | dtype | d | kernel | config | shared B (limit) | regs | spill st / ld B | mma |')
    echo('|---|---|---|---|---|---|---|---|---|')
    for cap in caps:
        cap_text = f'{cap[0]}{cap[1]}'
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
