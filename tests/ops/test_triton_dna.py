"""The fused two-branch Triton kernel against the formula and against the module's SDPA path:
outputs and every gradient, masked tiles and rows, the operator under ``torch.compile`` /
``torch.export`` / ``meta``, and the kernels compiled ahead of time for real GPUs.

Marked ``cuda(interpreter=True)``: on a GPU (``make test-gpu``, the GPU check) the kernels run
on it; on a machine without CUDA they run in Triton's interpreter: ``TRITON_INTERPRET=1``
is set for the test process by ``conftest.py`` (Triton reads it when first imported, which
other test modules may do first), and here again when this module runs alone. bf16 is not
run here: the interpreter's ``tl.dot`` mishandles bf16 in triton 3.9 (GPU-only case,
``tests/ops/test_gpu.py``); it is compiled for every GPU target below.
"""

from __future__ import annotations

import os

import pytest
import torch
from tolerance import REORDERED, ROUNDING, SUMMED, assert_close_as

if not torch.cuda.is_available():
    os.environ.setdefault('TRITON_INTERPRET', '1')
triton = pytest.importorskip('triton')

from dna_mm.models import DnAAttention, SoftmaxAttention  # noqa: E402
from dna_mm.ops import (  # noqa: E402
    HEAD_DIMS,
    SHORT_KERNELS,
    TESTED_CAPABILITIES,
    compile_kernels,
    dna_attention,
    kernel_available,
    resource_usage,
    shared_memory_limit,
    short_softmax_attention,
    tensor_core_instructions,
)

pytestmark = pytest.mark.cuda(interpreter=True)
DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'


def reference(q, k, v, q_neg, v_neg, alpha, b_pos, b_neg, scale):
    """The formula in float64 with explicit maps."""
    z_pos = scale * q @ k.transpose(-1, -2) + (0 if b_pos is None else b_pos)
    z_neg = scale * q_neg @ k.transpose(-1, -2) + (0 if b_neg is None else b_neg)
    return torch.softmax(z_pos, -1) @ v + alpha.view(1, -1, 1, 1) * (torch.softmax(-z_neg, -1) @ v_neg)


def _inputs(b, h, m, n, d, dtype, bias: str, bias_dtype=torch.float32):
    g = torch.Generator().manual_seed(m * 1000 + n + d)
    ts = [torch.randn(b, h, s, d, generator=g).to(DEVICE, dtype).requires_grad_() for s in (m, n, n, m, n)]
    alpha = (torch.rand(h, generator=g) * 2 - 1).to(DEVICE).requires_grad_()
    b_pos = b_neg = None

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(DEVICE, bias_dtype).requires_grad_()

    if bias == 'one':  # broadcast over the batch
        b_pos = b_neg = rand(1, h, m, n)
    elif bias == 'pair':  # branch-specific, different broadcasts
        b_pos, b_neg = rand(1, h, m, n), rand(b, 1, m, n)
    return ts, alpha, b_pos, b_neg


#: (output, gradients) ulps: in float32 the kernel is another route to the formula; float16 inputs
#: are accumulated in float32 inside it and each result is rounded to float16 once
ULPS = {torch.float32: (REORDERED, SUMMED), torch.float16: (ROUNDING, ROUNDING)}


@pytest.mark.parametrize('d', [32, 64, 128])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
@pytest.mark.parametrize('bias', ['none', 'one', 'pair'])
def test_outputs_and_every_gradient_match_the_formula(d, dtype, bias) -> None:
    if d == 128 and bias != 'pair' and DEVICE == 'cpu':  # on a GPU every case runs
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
    assert all(g.dtype == t.dtype and g.shape == t.shape for g, t in zip(grads, wrt, strict=True))
    for name, got, want in zip(names, [out, *grads], [ref, *ref_grads], strict=True):
        assert_close_as(got, want, ulps=ULPS[dtype][name != 'out'], dtype=dtype, what=name)


def _operators_run(ts, alpha, bias=None) -> list[str]:
    """The ``dna_mm`` operators one forward + backward of :func:`dna_attention` runs (recorded
    at the dispatcher, as they run)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == 'dna_mm':
                self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    with Record() as record:
        out = dna_attention(*ts, alpha, bias)
        torch.autograd.grad(out.sum(), ts)
    return record.names


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
@pytest.mark.parametrize(
    'b,h,m,n',
    [(5, 3, 8, 8), (3, 2, 7, 13), (2, 3, 16, 16), (1, 2, 32, 5), (3, 2, 1, 1)],
    ids=['8-frames-ragged-pack', 'cross-7x13', '16-tokens', '32x5-one-pair-a-tile', 'one-token'],
)
def test_short_sequences_pack_and_match_the_formula(b, h, m, n, dtype) -> None:
    """At most 32 tokens and no bias: the packed kernels (several sequences a tile, a last tile
    not full, queries and keys of other lengths, one token: a softmax over one key, zero
    gradients for Q± and K), the output and every gradient as the formula gives them."""
    d = 64
    ts, alpha, _, _ = _inputs(b, h, m, n, d, dtype, 'none')
    assert _operators_run(ts, alpha) == ['short_dna_fwd.default', 'short_dna_bwd.default']
    out = dna_attention(*ts, alpha)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, [*ts, alpha], grad_out)
    ref_in = [t.detach().double().requires_grad_() for t in (*ts, alpha)]
    ref = reference(*ref_in[:5], ref_in[5], None, None, d**-0.5)
    ref_grads = torch.autograd.grad(ref, ref_in, grad_out.double())
    for name, got, want in zip(
        ['out', 'q', 'k', 'v', 'q_neg', 'v_neg', 'alpha'], [out, *grads], [ref, *ref_grads], strict=True
    ):
        magnitude = None if want.abs().max() > 0 else 1.0  # one key: dQ±, dK are exactly 0
        assert_close_as(
            got, want, ulps=ULPS[dtype][name != 'out'], dtype=dtype, magnitude=magnitude, what=name
        )


@pytest.mark.parametrize(
    'b,h,m,n',
    [(1, 2, 0, 5), (1, 2, 3, 0), (0, 2, 3, 5), (1, 2, 0, 0), (1, 2, 0, 40), (1, 2, 40, 0)],
    ids=['no-queries', 'no-keys', 'no-batch', 'neither', 'no-queries-tiled', 'no-keys-tiled'],
)
def test_calls_without_queries_or_keys_give_the_empty_or_zero_result(b, h, m, n) -> None:
    """An operator called directly with no queries, no keys or no sequence (both kernels): the
    empty output, or 0 for queries without a key (as ``scaled_dot_product_attention``), and zero
    gradients, for DnA and the packed softmax."""
    ts, alpha, _, _ = _inputs(b, h, m, n, 32, torch.float32, 'none')
    out = dna_attention(*ts, alpha)
    assert out.shape == (b, h, m, 32) and not out.abs().sum()
    grads = torch.autograd.grad(out.sum(), [*ts, alpha], allow_unused=True)
    assert all(g is None or not g.abs().sum() for g in grads)
    if max(m, n) <= 32:
        assert short_softmax_attention(*ts[:3]).shape == (b, h, m, 32)


def test_short_sequences_with_a_bias_or_33_tokens_take_the_tiled_kernels() -> None:
    """The packed kernels take neither biases (nor so masks) nor sequences over 32 tokens."""
    tiled = ['dna_attention_fwd.default', 'dna_attention_bwd.default']
    ts, alpha, b_pos, b_neg = _inputs(1, 2, 8, 8, 32, torch.float32, 'pair')
    assert _operators_run(ts, alpha, (b_pos, b_neg)) == tiled
    ts, alpha, _, _ = _inputs(1, 2, 8, 33, 32, torch.float32, 'none')
    assert _operators_run(ts, alpha) == tiled


@pytest.mark.parametrize('variant', ['qpm_vpm', 'qpm_v', 'q_vpm', 'apm'])
def test_module_over_short_sequences_equals_the_sdpa_path(variant: str) -> None:
    """``DnAAttention(kernel='triton')`` over TimeSformer's temporal shape (8 frames): every
    variant (``Q-`` or ``V-`` shared with ``Q+`` / ``V+``: their gradients summed), output and
    every parameter's and the input's gradient as the default path's, laid out as the module
    lays its heads (strided views of one projection)."""
    torch.manual_seed(0)
    fused = DnAAttention(128, 2, variant=variant, kernel='triton').to(DEVICE)
    sdpa = DnAAttention(128, 2, variant=variant).to(DEVICE)
    if fused.alpha is not None:
        with torch.no_grad():
            fused.alpha.uniform_(-1, 1)
    sdpa.load_state_dict(fused.state_dict())
    x = torch.randn(6, 8, 128, device=DEVICE)
    outs = []
    for m in (fused, sdpa):
        xi = x.clone().requires_grad_()
        y = m(xi)
        y.square().sum().backward()
        outs.append([y.detach(), xi.grad] + [p.grad.clone() for p in m.parameters()])
    for i, (a, b) in enumerate(zip(*outs, strict=True)):  # the output, then gradients
        assert_close_as(a, b, ulps=SUMMED if i else REORDERED)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_softmax_over_short_sequences_matches_the_formula(dtype) -> None:
    """The packed kernel's one-branch form, softmax's baseline: ``softmax(s Q K^T) V`` and the
    gradients of Q, K, V, with a last tile not full and other query and key lengths."""
    for b, h, m, n in ((5, 3, 8, 8), (3, 2, 7, 13)):
        ts, _, _, _ = _inputs(b, h, m, n, 64, dtype, 'none')
        q, k, v = ts[:3]
        out = short_softmax_attention(q, k, v)
        grad_out = torch.randn_like(out)
        grads = torch.autograd.grad(out, [q, k, v], grad_out)
        ref_in = [t.detach().double().requires_grad_() for t in (q, k, v)]
        ref = torch.softmax(ref_in[0] @ ref_in[1].transpose(-1, -2) * 64**-0.5, -1) @ ref_in[2]
        ref_grads = torch.autograd.grad(ref, ref_in, grad_out.double())
        for name, got, want in zip(['out', 'q', 'k', 'v'], [out, *grads], [ref, *ref_grads], strict=True):
            assert_close_as(got, want, ulps=ULPS[dtype][name != 'out'], dtype=dtype, what=name)


def test_softmax_module_takes_the_packed_kernel_only_where_it_applies() -> None:
    """``SoftmaxAttention(kernel='triton')``: over 8 tokens the packed kernel (another route: equal
    to SDPA's up to round-off, not bitwise), with a mask or over 40 tokens SDPA itself (bitwise);
    output and every gradient; ``torch.compile(fullgraph=True)`` over the packed kernel."""

    def run(m, x, **kw):
        xi = x.clone().requires_grad_()
        y = m(xi, **kw)
        y.square().sum().backward()
        grads = [y.detach(), xi.grad] + [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        return grads

    torch.manual_seed(0)
    packed = SoftmaxAttention(128, 2, kernel='triton').to(DEVICE)
    sdpa = SoftmaxAttention(128, 2).to(DEVICE)
    sdpa.load_state_dict(packed.state_dict())
    assert "kernel='triton'" in repr(packed)
    x = torch.randn(6, 8, 128, device=DEVICE)
    got, want = run(packed, x), run(sdpa, x)
    assert not torch.equal(got[0], want[0])  # the kernel ran
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_close_as(a, b, ulps=SUMMED if i else REORDERED)
    torch._dynamo.reset()
    compiled = run(torch.compile(packed, fullgraph=True, backend='aot_eager'), x)
    for a, b in zip(compiled, got, strict=True):
        assert_close_as(a, b, ulps=ROUNDING)
    keep = torch.ones(1, 1, 1, 8, dtype=torch.bool, device=DEVICE)
    keep[..., -2:] = False
    for kw, y in ((dict(attn_mask=keep), x), ({}, torch.randn(2, 40, 128, device=DEVICE))):
        assert all(torch.equal(a, b) for a, b in zip(run(packed, y, **kw), run(sdpa, y, **kw), strict=True))
    with pytest.raises(ValueError, match=r"SoftmaxAttention: kernel must be one of \['sdpa', 'triton'\]"):
        SoftmaxAttention(64, 2, kernel='flash')
    with pytest.raises(ValueError, match='at most 32 tokens, got 8 queries and 33 keys'):
        short_softmax_attention(x.view(6, 8, 2, 64).transpose(1, 2), *[torch.zeros(6, 2, 33, 64)] * 2)


def test_bias_gradients_only_where_asked_in_the_bias_dtype() -> None:
    """Each bias-gradient map exists only for a bias that needs a gradient, in its dtype."""
    ts, alpha, b_pos, b_neg = _inputs(1, 2, 9, 11, 32, torch.float32, 'pair', bias_dtype=torch.float16)
    b_neg.requires_grad_(False)
    out = dna_attention(*ts, alpha, (b_pos, b_neg))
    g_bp = torch.autograd.grad(out.sum(), b_pos)[0]
    assert g_bp.dtype == torch.float16 and g_bp.shape == b_pos.shape
    ref_in = [t.detach().double().requires_grad_() for t in (*ts, alpha, b_pos)]
    ref = reference(*ref_in[:6], ref_in[6], b_neg.double(), 32**-0.5)
    assert_close_as(g_bp, torch.autograd.grad(ref.sum(), ref_in[6])[0], ulps=ROUNDING)  # one float16 rounding
    _, o_pos, o_neg, lse_p, lse_n = torch.ops.dna_mm.dna_attention_fwd(
        *ts, alpha, b_pos, b_neg, 32**-0.5, True
    )
    grads = torch.ops.dna_mm.dna_attention_bwd(
        out.detach().transpose(1, 2),
        *ts,
        alpha,
        b_pos,
        b_neg,
        o_pos,
        o_neg,
        lse_p,
        lse_n,
        32**-0.5,
        False,
        False,
    )
    assert grads[-2].numel() == 0 and grads[-1].numel() == 0  # no map asked for, none made


def _masked_pair(keep: torch.Tensor, d: int = 32):
    """Output and gradients (input, parameters) of the fused and the SDPA path under ``keep``."""
    torch.manual_seed(0)
    c = 2 * d
    fused = DnAAttention(c, 2, kernel='triton').to(DEVICE)
    sdpa = DnAAttention(c, 2).to(DEVICE)
    with torch.no_grad():
        fused.alpha.uniform_(-1, 1)
    sdpa.load_state_dict(fused.state_dict())
    x = torch.randn(2, keep.shape[-1], c, device=DEVICE)
    results = []
    for m in (fused, sdpa):
        xi = x.clone().requires_grad_()
        y = m(xi, attn_mask=keep.to(DEVICE))
        y.square().sum().backward()
        results.append([y.detach(), xi.grad] + [p.grad.clone() for p in m.parameters()])
    return results


def test_masks_match_the_sdpa_path() -> None:
    """Sample 0: its first 64 keys (a whole first key tile) masked for every query, and two
    query rows with every key masked; sample 1: each query left with one key. Outputs and
    gradients finite and equal to the module's SDPA path (a row with no key: output 0 and no
    gradient through it, SDPA's result)."""
    n = 80
    keep = torch.ones(2, 1, n, n, dtype=torch.bool)
    keep[0, ..., :64] = False
    keep[0, :, [5, 70]] = False
    keep[1] = False
    keep[1, :, torch.arange(n), (7 * torch.arange(n)) % n] = True  # query i keeps key 7i mod N
    fused, sdpa = _masked_pair(keep)
    for i, (got, want) in enumerate(zip(fused, sdpa, strict=True)):  # the output, then gradients
        assert torch.isfinite(got).all()
        assert_close_as(got, want, ulps=SUMMED if i else REORDERED)
    assert fused[1][0, 5].abs().sum() == 0  # token 5 of sample 0: a query with no key, a masked key


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
    for i, (a, b) in enumerate(zip(*outs, strict=True)):  # the output, then gradients
        assert_close_as(a, b, ulps=SUMMED if i else REORDERED)
    assert "kernel='triton'" in repr(fused)


@pytest.mark.parametrize('n', [13, 40], ids=['short-kernels', 'tiled-kernels'])
def test_the_operator_traces_on_meta_compile_and_export(n: int) -> None:
    """``kernel='triton'`` as one graph node: forward + backward on the ``meta`` device (fake
    implementations), ``torch.compile(fullgraph=True)`` (no graph break; same values and
    gradients as eager) and ``torch.export`` (the operator in the graph; same output); over
    short sequences (the packed kernels, nothing kept for the backward) and longer ones."""
    torch.manual_seed(0)
    m = DnAAttention(64, 2, kernel='triton').to(DEVICE)
    meta = DnAAttention(64, 2, kernel='triton', device='meta')
    y = meta(torch.randn(2, n, 64, device='meta', requires_grad=True))
    y.sum().backward()
    assert y.shape == (2, n, 64) and y.device.type == 'meta' and meta.alpha.grad.shape == (2,)

    x = torch.randn(2, n, 64, device=DEVICE)
    want = m(x)
    want.square().sum().backward()
    want_grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    torch._dynamo.reset()
    compiled = torch.compile(m, fullgraph=True, backend='aot_eager')
    got = compiled(x)
    got.square().sum().backward()
    assert_close_as(got, want, ulps=ROUNDING)  # the same operations again
    for g, w in zip((p.grad for p in m.parameters()), want_grads, strict=True):
        assert_close_as(g, w, ulps=ROUNDING)

    exported = torch.export.export(m.eval(), (x,))
    targets = {str(node.target) for node in exported.graph.nodes}
    assert ('dna_mm.short_dna_fwd.default' if n <= 32 else 'dna_mm.dna_attention_fwd.default') in targets
    assert_close_as(exported.module()(x), want.detach(), ulps=ROUNDING)


def test_arguments_are_checked() -> None:
    ts, alpha, _, _ = _inputs(1, 2, 8, 8, 32, torch.float32, 'none')
    with pytest.raises(ValueError, match='head dim 24'):
        dna_attention(*(t[..., :24] for t in ts), alpha)
    with pytest.raises(ValueError, match=r'v must be \[1, 2, N, 32\]'):
        dna_attention(ts[0], ts[1], ts[2][:, :1], ts[3], ts[4], alpha)
    with pytest.raises(ValueError, match='alpha must be'):
        dna_attention(*ts, alpha[:1])
    with pytest.raises(
        ValueError, match=r"kernel must be one of \['sdpa', 'sdpa_2h', 'sdpa_stacked', 'triton'\]"
    ):
        DnAAttention(64, 2, kernel='flash')
    assert kernel_available(torch.device(DEVICE)) and HEAD_DIMS == (32, 64, 128)


def test_kernel_that_cannot_run_is_refused_at_construction(monkeypatch) -> None:
    """``kernel='triton'`` where it cannot run is an error when the module is built, naming why: a
    config error (the tools print it as one line), for DnA and softmax alike."""
    from dna_mm.errors import ConfigError

    with pytest.raises(ConfigError, match=r"kernel='triton' cannot run: head dim 16 is not one"):
        DnAAttention(32, 2, kernel='triton')
    if not torch.cuda.is_available():  # CPU without the interpreter
        monkeypatch.delenv('TRITON_INTERPRET')
        for member in (DnAAttention, SoftmaxAttention):
            with pytest.raises(
                ConfigError, match=f"{member.__name__}: kernel='triton' cannot run: no CUDA device"
            ):
                member(64, 2, kernel='triton')


# -- ahead-of-time compilation for real GPUs (no GPU needed) ------------------------------------
def _check_compiled(capability, dtype, head_dim, usage: bool = True, short: bool = False) -> list[str]:
    """Compile one (target, dtype, head dim), the tiled or the short-sequence kernels; assert the
    shared memory fits and fp16 / bf16 reach tensor cores; return table rows (shared memory and,
    with ``usage``, registers and spills from ``ptxas -v``)."""
    limit = shared_memory_limit(capability)
    rows = []
    for name, kernel in compile_kernels(capability, dtype, head_dim, short=short).items():
        shared = kernel.metadata.shared
        assert shared <= limit, (
            f'sm{capability[0]}{capability[1]} {dtype} d{head_dim} {name}: {shared} B > {limit} B'
        )
        if dtype != torch.float32:
            assert tensor_core_instructions(kernel) > 0, f'{name}: no mma / wgmma for {dtype}'
        row = f'sm{capability[0]}{capability[1]} {str(dtype)[6:]} d{head_dim} {name}: shared {shared} B'
        if usage:
            use = resource_usage(kernel)
            row += f', {use.registers} registers, spills {use.spill_stores} / {use.spill_loads} B'
        rows.append(row)
    return rows


@pytest.mark.parametrize('short', [False, True], ids=['tiled', 'short'])
@pytest.mark.parametrize('capability,dtype,head_dim', [((8, 6), torch.bfloat16, 128)], ids=['sm86-bf16-d128'])
def test_kernels_fit_the_gpu_they_compile_for(capability, dtype, head_dim, short: bool) -> None:
    """The tightest case of the matrix (99 KB of shared memory, the largest head dim) in the
    default run, for the tiled and the short-sequence kernels; the full matrix is the slow test
    below."""
    print('\n'.join(_check_compiled(capability, dtype, head_dim, short=short)))


@pytest.mark.slow
@pytest.mark.parametrize('head_dim', [32, 64, 128])
@pytest.mark.parametrize('dtype', ['float16', 'bfloat16', 'float32', 'float32+tf32'])
@pytest.mark.parametrize('capability', TESTED_CAPABILITIES, ids=lambda c: f'sm{c[0]}{c[1]}')
def test_every_kernel_fits_every_target(capability, dtype: str, head_dim: int, monkeypatch) -> None:
    """sm80 / sm86 / sm89 / sm90 × fp16 / bf16 / fp32 (TF32 off, PyTorch's default for
    matmuls, and on) × head dims 32 / 64 / 128, tiled and short-sequence kernels. Shared memory
    printed with ``-s`` (registers and spills of the whole matrix: ``docs/triton_kernel.md``)."""
    monkeypatch.setattr(torch.backends.cuda.matmul, 'allow_tf32', dtype.endswith('tf32'))
    for short in (False, True):
        rows = _check_compiled(
            capability, getattr(torch, dtype.split('+')[0]), head_dim, usage=False, short=short
        )
        print('\n'.join(rows))


@pytest.mark.slow
@pytest.mark.integration
def test_the_table_tool_runs_as_a_user_runs_it(tmp_path) -> None:
    """``tools/benchmarks/triton_kernel_table.py`` in a subprocess (no interpreter): one row per kernel."""
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[2] / 'tools' / 'benchmarks' / 'triton_kernel_table.py'
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    cmd = [sys.executable, str(tool), '--capabilities', '86', '--dtypes', 'float16', '--head-dims', '32']
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    rows = [line for line in out.splitlines() if line.startswith('| sm86 | float16 | 32 |')]
    assert len(rows) == 7 and all('(101,376)' in row for row in rows)
    assert [row.split(' | ')[3] for row in rows][3:] == list(SHORT_KERNELS)
