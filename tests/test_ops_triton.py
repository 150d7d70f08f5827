"""The fused two-branch Triton kernel against the formula: outputs and every gradient.

On a machine without CUDA the kernels run in Triton's interpreter: ``TRITON_INTERPRET=1``
is set for the test process by ``conftest.py`` (Triton reads it when first imported, which
other test modules may do first), and here again when this module runs alone. bf16 is not tested here: the
interpreter's ``tl.dot`` mishandles bf16 in triton 3.9 (GPU-only case,
``tests/test_gpu.py``)."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault('TRITON_INTERPRET', '1')
triton = pytest.importorskip('triton')

from dna_mm.models import DnAAttention  # noqa: E402
from dna_mm.ops import dna_attention, kernel_available  # noqa: E402

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'


def reference(q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, scale):
    """The formula in float64 with explicit maps."""
    z_pos = scale * q @ k.transpose(-1, -2) + (0 if b_pos is None else b_pos)
    z_neg = scale * q_neg @ k.transpose(-1, -2) + (0 if b_neg is None else b_neg)
    return torch.softmax(z_pos, -1) @ v + alpha.view(1, -1, 1, 1) * (torch.softmax(-z_neg, -1) @ v_neg)


def _inputs(b, h, m, n, d, dtype, bias: str):
    g = torch.Generator().manual_seed(m * 1000 + n + d)
    ts = [torch.randn(b, h, s, d, generator=g).to(DEVICE, dtype).requires_grad_() for s in (m, n, n, m, n)]
    alpha = (torch.rand(h, generator=g) * 2 - 1).to(DEVICE).requires_grad_()
    b_pos = b_neg = None
    if bias == 'one':  # broadcast over the batch
        b_pos = b_neg = torch.randn(1, h, m, n, generator=g).to(DEVICE).requires_grad_()
    elif bias == 'pair':  # branch-specific, different broadcasts
        b_pos = torch.randn(1, h, m, n, generator=g).to(DEVICE).requires_grad_()
        b_neg = torch.randn(b, 1, m, n, generator=g).to(DEVICE).requires_grad_()
    return ts, alpha, b_pos, b_neg


@pytest.mark.parametrize('d', [32, 64, 128])
@pytest.mark.parametrize('dtype,tol', [(torch.float32, 2e-5), (torch.float16, 3e-3)])
@pytest.mark.parametrize('bias', ['none', 'one', 'pair'])
def test_outputs_and_every_gradient_match_the_formula(d, dtype, tol, bias) -> None:
    if d == 128 and bias != 'pair':
        pytest.skip('head dim 128: one bias case keeps the interpreter run short')
    ts, alpha, b_pos, b_neg = _inputs(2, 2, 19, 37, d, dtype, bias)  # ragged M, N
    arg = None if bias == 'none' else (b_pos if bias == 'one' else (b_pos, b_neg))
    out = dna_attention(*ts, alpha, arg)
    assert out.shape == ts[0].shape and out.dtype == dtype
    wrt = [*ts, alpha] + ([b_pos] if bias == 'one' else [b_pos, b_neg] if bias == 'pair' else [])
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, wrt, grad_out)
    ref_in = [t.detach().double().requires_grad_() for t in wrt]
    r_ts, r_alpha = ref_in[:5], ref_in[5]
    r_bp = ref_in[6] if bias != 'none' else None
    r_bn = r_bp if bias == 'one' else (ref_in[7] if bias == 'pair' else None)
    ref = reference(*r_ts, r_alpha, r_bp, r_bn, d**-0.5)
    ref_grads = torch.autograd.grad(ref, ref_in, grad_out.double())
    names = ['out', 'q', 'k', 'v', 'q_neg', 'v_neg', 'alpha', 'b_pos', 'b_neg'][: len(grads) + 1]
    for name, got, want in zip(names, [out, *grads], [ref, *ref_grads], strict=True):
        err = (got.double() - want).abs().max() / want.abs().max().clamp_min(1e-6)
        assert err < tol, (name, err.item())


def test_module_with_the_kernel_equals_the_sdpa_path() -> None:
    """``DnAAttention(kernel='triton')``: same output and gradients as the default path,
    with an exclusion mask (added after the softmin sign) and a branch-specific bias."""
    torch.manual_seed(0)
    fused = DnAAttention(64, 2, kernel='triton').to(DEVICE)
    sdpa = DnAAttention(64, 2).to(DEVICE)
    sdpa.load_state_dict(fused.state_dict())
    with torch.no_grad():
        fused.alpha.uniform_(-1, 1)
        sdpa.alpha.copy_(fused.alpha)
    x = torch.randn(2, 13, 64, device=DEVICE)
    keep = torch.ones(13, dtype=torch.bool, device=DEVICE)
    keep[-3:] = False
    bias = (torch.randn(1, 2, 13, 13, device=DEVICE), torch.randn(1, 2, 13, 13, device=DEVICE))
    outs = []
    for m in (fused, sdpa):
        y = m(x, attn_mask=keep.view(1, 1, 1, -1), attn_bias=bias)
        y.square().sum().backward()
        outs.append([y.detach()] + [p.grad.clone() for p in m.parameters()])
    for a, b in zip(*outs, strict=True):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=2e-5)
    assert "kernel='triton'" in repr(fused)


def test_arguments_are_checked() -> None:
    ts, alpha, _, _ = _inputs(1, 2, 8, 8, 32, torch.float32, 'none')
    with pytest.raises(ValueError, match='head dim 24'):
        dna_attention(*(t[..., :24] for t in ts), alpha)
    with pytest.raises(ValueError, match=r'v must be \[1, 2, N, 32\]'):
        dna_attention(ts[0], ts[1], ts[2][:, :1], ts[3], ts[4], alpha)
    with pytest.raises(ValueError, match='alpha must be'):
        dna_attention(*ts, alpha[:1])
    with pytest.raises(ValueError, match="kernel must be 'sdpa' or 'triton'"):
        DnAAttention(64, 2, kernel='flash')
    assert kernel_available(torch.device(DEVICE))
