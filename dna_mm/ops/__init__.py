"""Fused kernels. ``dna_attention``: DnA's two branches in one Triton kernel.

``import dna_mm.ops`` needs triton (it ships with PyTorch's CUDA builds); the kernel runs on
CUDA tensors, and on CPU tensors when ``TRITON_INTERPRET=1`` was set before the import
(the interpreter, for tests).
"""

from .dna_attention import dna_attention, kernel_available

__all__ = ['dna_attention', 'kernel_available']
