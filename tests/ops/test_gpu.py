"""The GPU path: every member of the family in fp32 / bf16 / fp16, which SDPA kernel each branch
takes at the shapes that matter, and the fused Triton kernel at real shapes.

Marked ``cuda``: ``make test-gpu`` and the GPU check run it, a machine without CUDA skips it.
Each fast and eager result is compared with the same module run eagerly in float64 (the truth),
outputs and every gradient (input, projections, α, bias), so a wrong fast path cannot hide
behind an equally wrong eager one.
"""

from __future__ import annotations

import functools

import pytest
import torch

from dna_mm.models import CogAttention, DiffAttention, DnAAttention, SoftmaxAttention
from dna_mm.models.attention import DNA_VARIANTS

pytestmark = pytest.mark.cuda

C, H, N = 128, 4, 50

MEMBERS = {
    'softmax': SoftmaxAttention,
    'diff_paper': functools.partial(DiffAttention, diff_heads='paper'),
    'diff_official': functools.partial(DiffAttention, diff_heads='official'),
    'cog': CogAttention,
    **{f'dna_{v}': functools.partial(DnAAttention, variant=v) for v in sorted(DNA_VARIANTS)},
    # both branches in one SDPA call: over 2H heads, over 2M queries
    **{
        f'dna_{v}_{name}': functools.partial(DnAAttention, variant=v, kernel=kernel)
        for v in ('apm', 'qpm_vpm')
        for name, kernel in (('2h', 'sdpa_2h'), ('stacked', 'sdpa_stacked'))
    },
}
# relative error (max |got − fp64| / max |fp64|) allowed per dtype, outputs and gradients
TOL = {torch.float32: 2e-4, torch.bfloat16: 4e-2, torch.float16: 6e-3}
# members whose formula amplifies rounding in 16 bits: Cog's sign(S) flips where S rounds across 0,
# Diff's A1 − λA2 cancels (measured on an H200: Cog 9.2e-2 (bf16) and 6.2e-2 (fp16) on the
# output, Diff official 6.8e-2 (bf16) on a gradient); a wrong fast path is off by O(1)
TOL_16BIT = {'cog': 0.15, 'diff_official': 0.15}
# fp16 gradients are compared as a GradScaler makes them: the loss scaled (its default initial
# scale), else the attention's own gradients fall into fp16's subnormals (~1e-6 here), which
# measured 1e-2 even for PyTorch's softmax SDPA and 1e-1 for the softmin queries
FP16_LOSS_SCALE = 2.0**16


@pytest.fixture(autouse=True)
def _no_tf32():
    """fp32 means fp32: TF32 matmuls would make the fp32 cases as loose as bf16."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _extras(kind: str, dual: bool, heads: int = H) -> dict:
    """The forward's keyword arguments for ``kind`` on a ``[2, N]`` batch, a bias of ``heads``
    heads (Diff's official layout has ``H/2``)."""
    g = torch.Generator().manual_seed(1)
    if kind == 'mask':  # exclude the last 7 keys of the second sample, from every branch
        keep = torch.ones(2, 1, 1, N, dtype=torch.bool)
        keep[1, ..., -7:] = False
        return dict(attn_mask=keep.cuda())
    if kind == 'bias':  # a rel-pos-style float bias (ViTDet), branch-specific for DnA
        make = lambda: (torch.randn(1, heads, N, N, generator=g) * 2).cuda().requires_grad_()  # noqa: E731
        return dict(attn_bias=(make(), make()) if dual else make())
    return {}


def _run(m: torch.nn.Module, x: torch.Tensor, extra: dict, fused: bool, dtype: torch.dtype):
    """Output and gradients (input, parameters, biases) of one fwd + bwd."""
    m.fused_attn = fused
    m.zero_grad()
    x = x.detach().clone().requires_grad_()
    biases = extra.get('attn_bias')
    biases = [] if biases is None else list(biases) if isinstance(biases, tuple) else [biases]
    for b in biases:
        b.grad = None
    with torch.autocast('cuda', dtype=dtype, enabled=dtype in (torch.bfloat16, torch.float16)):
        y = m(x, **extra)
    scale = FP16_LOSS_SCALE if dtype == torch.float16 else 1.0
    ((y if y.dtype == torch.float64 else y.float()).square().mean() * scale).backward()
    grads = [x.grad] + [p.grad for p in m.parameters()] + [b.grad for b in biases]
    return y.detach().double(), [g.detach().double() / scale for g in grads]


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-12)).item()


@pytest.mark.parametrize('extra', ['none', 'mask', 'bias'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize('member', list(MEMBERS))
def test_fast_and_eager_match_float64(member: str, dtype: torch.dtype, extra: str) -> None:
    torch.manual_seed(0)
    m = MEMBERS[member](C, H).cuda().eval()
    if getattr(m, 'alpha', None) is not None:
        with torch.no_grad():
            m.alpha.uniform_(-1, 1)
    dual = member.startswith('dna')
    kwargs = _extras(extra, dual, m.num_heads)
    x = torch.randn(2, N, C, device='cuda')
    ref_m = MEMBERS[member](C, H).cuda().double()
    ref_m.load_state_dict(m.state_dict())
    ref_kwargs = {
        k: (
            tuple(t.detach().double().requires_grad_() for t in v)
            if isinstance(v, tuple)
            else v.detach().double().requires_grad_()
            if v.is_floating_point()
            else v
        )
        for k, v in kwargs.items()
    }
    want = _run(ref_m, x.double(), ref_kwargs, fused=False, dtype=torch.float64)
    for fused in (True, False):
        got = _run(m, x, kwargs, fused=fused, dtype=dtype)
        assert torch.isfinite(got[0]).all()
        errors = [_rel(got[0], want[0])] + [_rel(a, b) for a, b in zip(got[1], want[1], strict=True)]
        worst = max(range(len(errors)), key=errors.__getitem__)
        tol = TOL_16BIT.get(member, TOL[dtype]) if dtype != torch.float32 else TOL[dtype]
        assert errors[worst] < tol, (
            f'{"fast" if fused else "eager"}: tensor {worst} '
            f'(0 = output, 1 = input grad, then parameters, '
            f'biases) rel. error {errors[worst]:.2e}'
        )


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize('fused', [True, False])
def test_logits_of_magnitude_50_stay_finite(dtype: torch.dtype, fused: bool) -> None:
    m = DnAAttention(64 * 4, 4, fused_attn=fused).cuda()
    with torch.no_grad():
        m.qkv.weight.mul_(20)
        m.q_neg.weight.mul_(20)
    x = torch.randn(2, 64, 256, device='cuda', requires_grad=True)
    with torch.autocast('cuda', dtype=dtype):
        y = m(x)
        q, k = m.qkv(x)[..., :256], m.qkv(x)[..., 256:512]
        logits = m.split_heads(q) @ m.split_heads(k).transpose(-1, -2) * m.scale
    assert logits.abs().max() > 50
    y.float().sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all()


# the shapes that matter: [tokens-batch, sequence, channels] with 12 heads of 64
SHAPES = {
    'timesformer_spatial': (8, 197),  # B·T sequences of 1 + 14² tokens
    'timesformer_temporal': (196, 8),  # B·P sequences of T = 8 frames
    'joint': (1, 1569),  # 1 + 8·14² tokens
    'vitdet_global': (1, 4096),  # 64² tokens at 1024²
}


def _backends_that_run(m: torch.nn.Module, x: torch.Tensor, extra: dict) -> list[str]:
    """The SDPA backends under which the module's fwd + bwd runs when SDPA is restricted to that
    one backend (a backend that cannot take the call raises instead of falling back)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    ok = []
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        try:
            with sdpa_kernel([backend]), torch.autocast('cuda', dtype=torch.bfloat16):
                y = m(x, **extra)
            y.float().sum().backward()
            ok.append(backend.name)
        except RuntimeError:
            pass
        m.zero_grad()
    return ok


@pytest.mark.parametrize('shape', list(SHAPES))
@pytest.mark.parametrize('member', ['softmax', 'dna_qpm_vpm', 'dna_qpm_vpm_2h', 'dna_qpm_vpm_stacked'])
def test_no_branch_falls_back_to_the_math_kernel(member: str, shape: str) -> None:
    """bf16, no mask: both DnA branches take flash attention, as softmax does (the stacked
    route, whose values are twice the queries' width, the memory-efficient kernel: flash needs
    one width); with a float bias (ViTDet's rel-pos), the memory-efficient kernel. Printed with
    ``-s``."""
    b, n = SHAPES[shape]
    m = MEMBERS[member](768, 12).cuda()
    x = torch.randn(b, n, 768, device='cuda', requires_grad=True)
    plain = _backends_that_run(m, x, {})
    bias = torch.randn(1, 12, n, n, device='cuda', dtype=torch.bfloat16)
    biased = _backends_that_run(m, x, dict(attn_bias=bias))
    print(f'{member} {shape} [{b}, 12, {n}, 64] bf16: no mask → {plain}; float bias → {biased}')
    assert ('EFFICIENT_ATTENTION' if member.endswith('_stacked') else 'FLASH_ATTENTION') in plain
    assert 'EFFICIENT_ATTENTION' in biased


@pytest.mark.parametrize('d', [32, 64, 128])
@pytest.mark.parametrize(
    'dtype,tol',
    [(torch.float32, 2e-4), (torch.float16, 5e-3), (torch.bfloat16, 4e-2)],
    ids=['fp32', 'fp16', 'bf16'],
)
@pytest.mark.parametrize('shape', [(8, 197), (196, 8), (1, 1569)], ids=['197', '8', '1569'])
def test_triton_kernel_at_real_shapes(d: int, dtype: torch.dtype, tol: float, shape) -> None:
    from test_triton_dna import reference

    from dna_mm.ops import dna_attention

    b, n = shape
    g = torch.Generator().manual_seed(d + n)
    h = 768 // d  # ViT-B's width in heads of d
    ts = [torch.randn(b, h, n, d, generator=g).cuda().to(dtype).requires_grad_() for _ in range(5)]
    alpha = (torch.rand(h, generator=g) * 2 - 1).cuda().requires_grad_()
    b_pos, b_neg = (torch.randn(1, h, n, n, generator=g).cuda().requires_grad_() for _ in range(2))
    out = dna_attention(*ts, alpha, (b_pos, b_neg))
    wrt = [*ts, alpha, b_pos, b_neg]
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, wrt, grad_out)
    ref_in = [t.detach().double().requires_grad_() for t in wrt]
    ref = reference(*ref_in[:5], ref_in[5], ref_in[6], ref_in[7], d**-0.5)
    ref_grads = torch.autograd.grad(ref, ref_in, grad_out.double())
    for name, got, want in zip(
        ['out', 'q', 'k', 'v', 'q_neg', 'v_neg', 'alpha', 'b_pos', 'b_neg'],
        [out, *grads],
        [ref, *ref_grads],
        strict=True,
    ):
        assert _rel(got.double(), want) < tol, name


@pytest.mark.parametrize('dtype,tol', [(torch.float16, 5e-3), (torch.bfloat16, 4e-2)], ids=['fp16', 'bf16'])
def test_short_sequence_kernels_at_timesformers_temporal_shape(dtype: torch.dtype, tol: float) -> None:
    """The packed short-sequence kernels on a GPU at TimeSformer-B's temporal attention (two
    clips: 392 sequences of 8 frames, 12 heads of 64), laid out as the module lays them (views
    of one projection): output and every gradient against the float64 formula."""
    from test_triton_dna import reference

    from dna_mm.ops import dna_attention

    g = torch.Generator().manual_seed(8)
    b, n, h, d = 392, 8, 12, 64
    heads = torch.randn(b, n, 5, h, d, generator=g).cuda().to(dtype).requires_grad_()
    ts = [heads[:, :, i].transpose(1, 2) for i in range(5)]  # [B, H, N, d] strided views
    alpha = (torch.rand(h, generator=g) * 2 - 1).cuda().requires_grad_()
    out = dna_attention(*ts, alpha)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, [heads, alpha], grad_out)
    ref_in = [heads.detach().double().requires_grad_(), alpha.detach().double().requires_grad_()]
    ref = reference(*(ref_in[0][:, :, i].transpose(1, 2) for i in range(5)), ref_in[1], None, None, d**-0.5)
    ref_grads = torch.autograd.grad(ref, ref_in, grad_out.double())
    for name, got, want in zip(['out', 'heads', 'alpha'], [out, *grads], [ref, *ref_grads], strict=True):
        assert _rel(got.double(), want) < tol, name

    from dna_mm.ops import short_softmax_attention  # its one-branch form: softmax

    q, k, v = ts[:3]
    out = short_softmax_attention(q, k, v)
    grads = torch.autograd.grad(out, heads, grad_out)[0][:, :, :3]
    ref_heads = heads.detach().double().requires_grad_()
    q, k, v = (ref_heads[:, :, i].transpose(1, 2) for i in range(3))
    ref = torch.softmax(q @ k.transpose(-1, -2) * d**-0.5, -1) @ v
    ref_grads = torch.autograd.grad(ref, ref_heads, grad_out.double())[0][:, :, :3]
    assert _rel(out.double(), ref) < tol and _rel(grads.double(), ref_grads) < tol


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason='needs two CUDA devices')
def test_triton_kernel_runs_on_the_inputs_device() -> None:
    """Inputs on ``cuda:1`` while ``cuda:0`` is current: the launches follow the inputs."""
    from test_triton_dna import reference

    from dna_mm.ops import dna_attention

    g = torch.Generator().manual_seed(0)
    ts = [torch.randn(2, 4, 50, 64, generator=g).to('cuda:1', torch.bfloat16) for _ in range(5)]
    alpha = torch.rand(4, generator=g).to('cuda:1')
    with torch.cuda.device(0):
        out = dna_attention(*ts, alpha)
    want = reference(*(t.double() for t in ts), alpha.double(), None, None, 64**-0.5)
    assert out.device == torch.device('cuda:1') and _rel(out.double(), want) < 4e-2


@pytest.mark.parametrize('d', [32, 64, 128])
def test_triton_kernel_fp32_with_tf32_allowed(d: int) -> None:
    """fp32 inputs take TF32 tensor cores only where PyTorch allows TF32 matmuls."""
    from test_triton_dna import reference

    from dna_mm.ops import dna_attention

    torch.backends.cuda.matmul.allow_tf32 = True  # restored by the autouse fixture
    g = torch.Generator().manual_seed(d)
    ts = [torch.randn(2, 4, 197, d, generator=g).cuda().requires_grad_() for _ in range(5)]
    alpha = (torch.rand(4, generator=g) * 2 - 1).cuda().requires_grad_()
    out = dna_attention(*ts, alpha)
    grads = torch.autograd.grad(out.square().sum(), [*ts, alpha])
    ref_in = [t.detach().double().requires_grad_() for t in (*ts, alpha)]
    ref = reference(*ref_in, None, None, d**-0.5)
    ref_grads = torch.autograd.grad(ref.square().sum(), ref_in)
    for got, want in zip([out, *grads], [ref, *ref_grads], strict=True):
        assert _rel(got.double(), want) < 1e-2  # TF32's 10-bit mantissa: 5.7-5.9e-3 on an H200


@pytest.mark.parametrize(
    'member,tokens',
    [('DnAAttention', 197), ('DnAAttention', 8), ('SoftmaxAttention', 8)],
    ids=['dna-tiled', 'dna-short', 'softmax-short'],
)
def test_module_with_the_triton_kernel_under_bf16_autocast(member: str, tokens: int) -> None:
    """``kernel='triton'`` under bf16 autocast against the SDPA path: DnA's tiled kernel (197
    tokens), DnA's and softmax's packed short-sequence kernels (TimeSformer's 8 frames)."""
    cls = {'DnAAttention': DnAAttention, 'SoftmaxAttention': SoftmaxAttention}[member]
    torch.manual_seed(0)
    fused = cls(768, 12, kernel='triton').cuda()
    sdpa = cls(768, 12).cuda()
    sdpa.load_state_dict(fused.state_dict())
    x = torch.randn(1568 if tokens == 8 else 8, tokens, 768, device='cuda')
    outs = []
    for m in (fused, sdpa):
        with torch.autocast('cuda', dtype=torch.bfloat16):
            y = m(x)
        y.float().square().mean().backward()
        outs.append([y.detach().double()] + [p.grad.double() for p in m.parameters()])
    for a, b in zip(*outs, strict=True):
        assert _rel(a, b) < 4e-2
