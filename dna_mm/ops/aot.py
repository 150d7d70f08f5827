"""Ahead-of-time compilation of the fused DnA kernels for a GPU that is not here.

:func:`compile_kernels` builds the launches of one forward + backward exactly as the launcher
does (:func:`.triton_dna.forward`, :func:`.triton_dna.backward`, on ``meta``
tensors laid out as the attention modules lay them out), specialises their arguments with
Triton's own binder (the argument types, 16-byte alignment and ``== 1`` specialisations of a
launch) and compiles them with ``triton.compile`` for ``GPUTarget('cuda', capability)``. No
GPU is needed: CI checks every kernel's shared memory against the target's limit, and its PTX
for tensor-core instructions. :func:`resource_usage` reads registers and spills from the
bundled ``ptxas -v``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple, Optional

import torch

from .kernel_config import KERNELS, SHORT_KERNELS

#: a representative problem: ViT-B-like heads over 197 tokens (ragged against every tile)
_BATCH, _TOKENS, _WIDTH = 2, 197, 768
#: the short-sequence kernels' problem: TimeSformer's temporal attention, 8 frames a sequence
_SHORT_BATCH, _SHORT_TOKENS = 196, 8


def _interpreting() -> bool:
    """This process runs Triton's interpreter: Triton's own library functions (``tl.sum``,
    ``tl.max``, …) were then built for it at import, and nothing here can be compiled."""
    from triton.language import standard
    from triton.runtime.jit import JITFunction

    return not isinstance(standard.sum, JITFunction)


def _compile_in_child(
    capability: tuple[int, int], dtype: torch.dtype, head_dim: int, bias: bool, short: bool
) -> dict:
    """:func:`compile_kernels` in a fresh process without the interpreter; the kernels come
    back from Triton's cache (the files a compilation writes)."""
    from triton.compiler import CompiledKernel

    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    spec = dict(
        capability=list(capability),
        dtype=str(dtype).removeprefix('torch.'),
        head_dim=head_dim,
        bias=bias,
        short=short,
        allow_tf32=torch.backends.cuda.matmul.allow_tf32,
    )
    # dna_mm.ops needs only torch: the child binds the package without running dna_mm/__init__
    # (which imports the OpenMMLab stack), then runs _main
    root = str(Path(__file__).resolve().parents[1])
    boot = (
        f'import sys, types; pkg = types.ModuleType("dna_mm"); pkg.__path__ = [{root!r}]; '
        f'sys.modules["dna_mm"] = pkg; from {__name__} import _main; _main()'
    )
    cmd = [sys.executable, '-c', boot, json.dumps(spec)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f'compile_kernels: the compiling process failed:\n{done.stderr[-3000:]}')
    groups = json.loads(done.stdout.strip().splitlines()[-1])
    return {name: CompiledKernel(None, g['group'], g['hash']) for name, g in groups.items()}


def _target(capability: tuple[int, int]):
    from triton.backends.compiler import GPUTarget

    major, minor = capability
    return GPUTarget('cuda', 10 * major + minor, 32)


def _meta_problem(dtype: torch.dtype, head_dim: int, bias: bool, short: bool = False) -> dict:
    """Meta tensors shaped and strided as :class:`~dna_mm.models.DnAAttention` passes them:
    ``Q+, K, V+`` are head-split chunks of one ``qkv`` output ``[B, N, 3C]``, ``Q-`` / ``V-``
    of their own ``[B, N, C]``; biases ``[1, H, N, N]`` fp32 (relative positions). ``short``:
    the short-sequence problem (no biases)."""
    b, n, c = (_SHORT_BATCH, _SHORT_TOKENS, _WIDTH) if short else (_BATCH, _TOKENS, _WIDTH)
    h = c // head_dim
    meta = dict(device='meta', dtype=dtype)

    def heads(t: torch.Tensor) -> torch.Tensor:  # [B, N, C] → [B, H, N, d]
        return t.unflatten(-1, (h, head_dim)).transpose(1, 2)

    q, k, v = (heads(t) for t in torch.empty(b, n, 3 * c, **meta).chunk(3, -1))
    q_neg, v_neg = heads(torch.empty(b, n, c, **meta)), heads(torch.empty(b, n, c, **meta))
    b_pos = b_neg = None
    if bias:
        b_pos = torch.empty(1, h, n, n, device='meta', dtype=torch.float32)
        b_neg = torch.empty(1, h, n, n, device='meta', dtype=torch.float32)
    alpha = torch.empty(h, device='meta', dtype=torch.float32)
    return dict(q=q, k=k, v=v, q_neg=q_neg, v_neg=v_neg, alpha=alpha, b_pos=b_pos, b_neg=b_neg)


def kernel_launches(
    capability: tuple[int, int], dtype: torch.dtype, head_dim: int, bias: bool = True, short: bool = False
) -> dict:
    """``{name: Launch}`` of one forward + backward (training: every output stored) on meta
    tensors, collected from the launcher's own :func:`~.triton_dna.forward` /
    :func:`~.triton_dna.backward`; ``short``: of 8-token sequences (the packed kernels, DnA's
    and softmax's)."""
    from . import triton_dna as T

    inputs = _meta_problem(dtype, head_dim, bias and not short, short).values()  # q, k, v, q-, v-, α, b+, b-
    launches: list = []
    scale = head_dim**-0.5
    if not short:
        out, *saved = T.forward(*inputs, scale, True, capability, launches.append)
        T.backward(out.transpose(1, 2), *inputs, *saved, scale, bias, bias, capability, launches.append)
        return dict(zip(KERNELS, launches, strict=True))
    from . import triton_short as S

    q, k, v, q_neg, v_neg, alpha, _, _ = inputs
    for heads in ((q_neg, v_neg, alpha), (None, None, None)):  # DnA, then softmax alone
        out = S.forward(q, k, v, *heads, scale, capability, launches.append)
        S.backward(out.transpose(1, 2), q, k, v, *heads, scale, capability, launches.append)
    return dict(zip(SHORT_KERNELS, launches, strict=True))


def compile_launch(launch, capability: tuple[int, int]):
    """``triton.compile`` of one launch for ``capability``, specialised as a launch would be."""
    import triton
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = launch.kernel
    backend = make_backend(_target(capability))
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*launch.args, **launch.kwargs)
    options, signature, constexprs, attrs = fn._pack_args(
        backend, launch.kwargs, bound, specialization, options
    )
    return triton.compile(
        ASTSource(fn, signature, constexprs, attrs), target=_target(capability), options=options.__dict__
    )


def compile_kernels(
    capability: tuple[int, int], dtype: torch.dtype, head_dim: int, bias: bool = True, short: bool = False
) -> dict:
    """Compile, without a GPU, the kernels one forward + backward would run on a device of
    ``capability`` (e.g. ``(9, 0)``) for inputs of ``dtype`` and ``head_dim``: the launcher's
    own configuration choice and argument specialisation. ``bias=True``: both branch biases,
    both bias-gradient maps (the largest variant). ``short=True``: the packed short-sequence
    kernels instead (8-token sequences, no biases; DnA's and softmax's forms).

    Returns ``{'forward' | 'backward_kv' | 'backward_q': triton.compiler.CompiledKernel}``
    (``short``: the names in :data:`~.kernel_config.SHORT_KERNELS`);
    ``kernel.metadata.shared`` is its shared memory (bytes), ``kernel.asm['ptx']`` its PTX.
    fp32 kernels take ``torch.backends.cuda.matmul.allow_tf32`` as it is now.
    """
    capability = tuple(capability)
    if _interpreting():
        return _compile_in_child(capability, dtype, head_dim, bias, short)
    return {
        name: compile_launch(launch, capability)
        for name, launch in kernel_launches(capability, dtype, head_dim, bias, short).items()
    }


class ResourceUsage(NamedTuple):
    """Per-thread registers and spill traffic (bytes) reported by ``ptxas -v``."""

    registers: int
    spill_stores: int
    spill_loads: int


def resource_usage(kernel, capability: Optional[tuple[int, int]] = None) -> ResourceUsage:
    """Registers and spills of a compiled kernel: its PTX through Triton's bundled ``ptxas -v``
    with the flags Triton compiles with."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    arch = kernel.metadata.target.arch if capability is None else 10 * capability[0] + capability[1]
    with tempfile.TemporaryDirectory() as tmp:
        ptx = Path(tmp) / 'k.ptx'
        ptx.write_text(kernel.asm['ptx'])
        cmd = [get_ptxas(arch).path, '-lineinfo', '-v', '--regAllocOptLevel=2']
        cmd += [f'--gpu-name={sm_arch_from_capability(arch)}', str(ptx), '-o', str(Path(tmp) / 'k.o')]
        log = subprocess.run(cmd, check=True, capture_output=True, text=True).stderr
    regs = re.search(r'Used (\d+) registers', log)
    spills = re.search(r'(\d+) bytes spill stores, (\d+) bytes spill loads', log)
    return ResourceUsage(
        int(regs.group(1)) if regs else 0,
        int(spills.group(1)) if spills else 0,
        int(spills.group(2)) if spills else 0,
    )


def tensor_core_instructions(kernel) -> int:
    """Count of ``mma`` / ``wgmma`` instructions in a compiled kernel's PTX."""
    return len(re.findall(r'^\s*(?:wgmma\.mma_async|mma)\.\S+', kernel.asm['ptx'], re.MULTILINE))


def _main() -> None:
    """``python -m dna_mm.ops.aot '{"capability": [9, 0], "dtype": "bfloat16", ...}'``: compile,
    print ``{name: {"group": files, "hash": key}}`` (for :func:`_compile_in_child`)."""
    spec = json.loads(sys.argv[1])
    torch.backends.cuda.matmul.allow_tf32 = spec['allow_tf32']
    kernels = compile_kernels(
        tuple(spec['capability']),
        getattr(torch, spec['dtype']),
        spec['head_dim'],
        spec['bias'],
        spec['short'],
    )
    print(json.dumps({name: dict(group=k.metadata_group, hash=k.hash) for name, k in kernels.items()}))


if __name__ == '__main__':
    _main()
