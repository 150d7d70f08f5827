"""Fused kernels. ``dna_attention``: DnA's two branches in one Triton kernel (tiled, or for
sequences of at most ``SHORT_TOKENS`` tokens many sequences packed into one tile), registered as the
PyTorch operators ``torch.ops.dna_mm.dna_attention_fwd`` / ``_bwd`` (fake implementations and
an autograd formula, so ``torch.compile``, ``torch.export`` and ``meta`` tensors trace through).
``short_softmax_attention``: softmax attention alone in the packed short-sequence kernel (the
baseline DnA's is measured against), registered the same way.

The kernel runs on CUDA tensors (compute capability 8.0+), and on CPU tensors when
``TRITON_INTERPRET=1`` was set before triton was imported (the interpreter, for tests).
``compile_kernels`` compiles, without a GPU, the kernels a given GPU would run (CI checks).
Triton is imported only when a kernel runs or compiles.
"""

from .aot import compile_kernels, resource_usage, tensor_core_instructions
from .dna_attention import dna_attention, kernel_available, kernel_unusable_reason
from .kernel_config import (
    HEAD_DIMS,
    SHARED_MEMORY,
    SHORT_KERNELS,
    SHORT_TOKENS,
    TESTED_CAPABILITIES,
    launch_configs,
    shared_memory_limit,
    short_launch_configs,
)
from .short_attention import short_softmax_attention

__all__ = [
    'HEAD_DIMS',
    'SHARED_MEMORY',
    'SHORT_KERNELS',
    'SHORT_TOKENS',
    'TESTED_CAPABILITIES',
    'compile_kernels',
    'dna_attention',
    'kernel_available',
    'kernel_unusable_reason',
    'launch_configs',
    'resource_usage',
    'shared_memory_limit',
    'short_launch_configs',
    'short_softmax_attention',
    'tensor_core_instructions',
]
