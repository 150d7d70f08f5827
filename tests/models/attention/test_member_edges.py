"""Edges of the member contract, for every shipped member (gated or not, every DnA variant and
fused kernel), on both routes:

* zero-length sequences and empty batches give the empty output (as timm's ``Attention`` and
  torch's ``nn.MultiheadAttention``), and a backward through it runs;
* a query with no key (an empty context, or a row whose every key the exclusion mask removes)
  gets weights 0: its heads' output is 0 (SDPA's, and ``nn.MultiheadAttention``'s for an empty
  context), so the module gives ``proj.bias``; the eager route (maps, hooks, analyses) agrees
  with the fused one, and every gradient is finite;
* members built with ``kdim`` / ``vdim`` are called through their own ``forward``: both routes,
  DnA's lean and module projections, ``nn.MultiheadAttention`` for softmax (float64);
* a member's bad argument is a :class:`~dna_mm.errors.ConfigError` (one line from the tools).
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from tolerance import REORDERED, SUMMED, assert_close_as

from dna_mm.errors import ConfigError
from dna_mm.models.attention import (
    DNA_VARIANTS,
    CogAttention,
    CogCrossAttention,
    DiffAttention,
    DiffCrossAttention,
    DnAAttention,
    DnACrossAttention,
    GatedAttention,
    GatedCrossAttention,
    SigmoidAttention,
    SigmoidCrossAttention,
    SoftmaxAttention,
    SoftmaxCrossAttention,
    build_attention,
)
from dna_mm.models.attention.base import AttentionBase

C, H = 64, 2  # head dim 32: one the Triton kernel takes
F64 = torch.float64
MEMBERS = (SoftmaxAttention, DnAAttention, DiffAttention, CogAttention, GatedAttention, SigmoidAttention)
#: each member's cross form
CROSS_FORMS = {
    SoftmaxAttention: SoftmaxCrossAttention,
    DnAAttention: DnACrossAttention,
    DiffAttention: DiffCrossAttention,
    CogAttention: CogCrossAttention,
    GatedAttention: GatedCrossAttention,
    SigmoidAttention: SigmoidCrossAttention,
}
#: the Triton kernels: on a GPU, or in Triton's interpreter on the CPU (tests/conftest.py)
TRITON = pytest.mark.cuda(interpreter=True)

Builder = Callable[..., AttentionBase]


def _case(cls: type, marks=(), **kwargs) -> pytest.param:
    label = ' '.join([cls.__name__] + [f'{k}={v}' for k, v in kwargs.items()])
    return pytest.param(functools.partial(cls, **kwargs), id=label, marks=marks)


#: every member, each also gated; DnA's variants and fused kernels
CASES = (
    [_case(cls) for cls in MEMBERS]
    + [_case(cls, gated=True) for cls in MEMBERS if cls is not GatedAttention]
    + [_case(DnAAttention, variant=v) for v in sorted(DNA_VARIANTS) if v != 'qpm_vpm']
    + [_case(DnAAttention, kernel=k) for k in ('sdpa_2h', 'sdpa_stacked')]
    + [
        _case(DnAAttention, kernel='triton', marks=TRITON),
        _case(SoftmaxAttention, kernel='triton', marks=TRITON),
    ]
)


def _built(make: Builder, dtype: torch.dtype = F64, **kwargs) -> AttentionBase:
    """The member in ``dtype`` (the Triton kernels: float32, the widest they take) and eval mode,
    its α (DnA) random: a wrong α cannot hide."""
    if 'triton' in getattr(make, 'keywords', {}).values():
        pytest.importorskip('triton')
        dtype = torch.float32
    m = make(C, H, **kwargs).to(dtype).eval()
    with torch.no_grad():
        if getattr(m, 'alpha', None) is not None:
            m.alpha.uniform_(-1.0, 1.0)
    return m


def _call(m: AttentionBase, fused: bool, *args, **kwargs):
    """``m(*args, **kwargs)`` on the fused route or the eager one (``return_attn``): ``(out, maps)``."""
    if fused:
        return m(*args, **kwargs), None
    return m(*args, return_attn=True, **kwargs)


def _grads(m: AttentionBase, out: torch.Tensor, inputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
    """The gradients of ``out.pow(2).sum()`` for the inputs and every parameter (0 where none
    reaches one)."""
    named = [(f'input {i}', t) for i, t in enumerate(inputs)] + list(m.named_parameters())
    grads = torch.autograd.grad(out.pow(2).sum(), [t for _, t in named], allow_unused=True)
    return {name: torch.zeros_like(t) if g is None else g for (name, t), g in zip(named, grads, strict=True)}


def _assert_grads_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Gradients along two routes, equal to round-off (:data:`SUMMED`). A bias's gradient sums the
    terms of its weight's; a key-side bias's is 0 in the formula (softmax ignores a shift all keys
    share), its value the round-off of those terms: their magnitude, the weight's gradient's, is
    the scale."""
    for name, b in expected.items():
        weight = expected.get(name.removesuffix('bias') + 'weight') if name.endswith('bias') else None
        scale = None if weight is None else max(weight.abs().max().item(), b.abs().max().item())
        assert_close_as(actual[name], b, ulps=SUMMED, what=f'gradient of {name}', magnitude=scale)


# -- zero-length sequences, empty batches, an empty context ----------------------------------------
#: (queries' tokens x, context or None): self-attention of no tokens, an empty batch, cross-attention
#: of no queries, and of no queries in an empty batch
EMPTY = {
    'self, N=0': ((2, 0, C), None),
    'self, B=0': ((0, 5, C), None),
    'cross, M=0': ((2, 0, C), (2, 5, C)),
    'cross, B=0': ((0, 3, C), (0, 5, C)),
}


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'eager'])
@pytest.mark.parametrize('shapes', list(EMPTY))
@pytest.mark.parametrize('make', CASES)
def test_no_tokens_give_the_empty_output(make: Builder, shapes: str, fused: bool) -> None:
    """``[B, M, C]`` with ``B = 0`` or ``M = 0`` → ``[B, M, C]``, as timm's ``Attention``; its
    maps ``[B, H, M, N]``; the backward runs (every gradient of its shape, 0)."""
    m = _built(make)
    x_shape, ctx_shape = EMPTY[shapes]
    dtype = m.proj.weight.dtype
    inputs = [torch.randn(x_shape, dtype=dtype, requires_grad=True)]
    if ctx_shape is not None:
        inputs.append(torch.randn(ctx_shape, dtype=dtype, requires_grad=True))
    out, maps = _call(m, fused, inputs[0], context=inputs[1] if ctx_shape else None)
    assert out.shape == x_shape
    keys = (ctx_shape or x_shape)[1]
    for name in maps or {}:
        assert maps[name].shape == (x_shape[0], m.num_heads, x_shape[1], keys), name
    for name, g in _grads(m, out, inputs).items():
        assert torch.equal(g, torch.zeros_like(g)), name


@pytest.mark.parametrize('fused', [True, False], ids=['fused', 'eager'])
@pytest.mark.parametrize('make', CASES)
def test_an_empty_context_gives_each_query_no_attention(make: Builder, fused: bool) -> None:
    """Queries ``[B, M, C]`` over a context of no tokens: softmax over no key is undefined; SDPA
    (the fused route) gives each query 0, and ``nn.MultiheadAttention`` ``out_proj.bias``. Every
    member gives the heads' output 0 (the module: ``proj.bias``), with maps ``[B, H, M, 0]`` and
    finite gradients (0 for the queries)."""
    m = _built(make)
    x = torch.randn(2, 3, C, dtype=m.proj.weight.dtype, requires_grad=True)
    ctx = torch.randn(2, 0, C, dtype=m.proj.weight.dtype, requires_grad=True)
    out, maps = _call(m, fused, x, context=ctx)
    assert torch.equal(out, m.proj.bias.expand(2, 3, C))
    for name in maps or {}:
        assert maps[name].shape == (2, m.num_heads, 3, 0), name
    grads = _grads(m, out, [x, ctx])
    assert torch.equal(grads['input 0'], torch.zeros_like(x))
    assert all(g.isfinite().all() for g in grads.values())


def test_what_torch_gives_for_an_empty_context() -> None:
    """The reference of the rule above: SDPA gives 0 for a query without keys (and for a row whose
    every key is masked); ``nn.MultiheadAttention`` gives ``out_proj.bias``."""
    q, k = torch.randn(2, H, 3, 8, dtype=F64), torch.randn(2, H, 0, 8, dtype=F64)
    assert torch.equal(F.scaled_dot_product_attention(q, k, k), torch.zeros_like(q))
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[1] = False
    k = torch.randn(2, H, 5, 8, dtype=F64)
    assert torch.equal(
        F.scaled_dot_product_attention(q, k, k, attn_mask=keep)[:, :, 1], torch.zeros(2, H, 8, dtype=F64)
    )
    mha = torch.nn.MultiheadAttention(C, H, batch_first=True).double().eval()
    x, ctx = torch.randn(2, 3, C, dtype=F64), torch.randn(2, 0, C, dtype=F64)
    assert torch.equal(mha(x, ctx, ctx)[0], mha.out_proj.bias.expand(2, 3, C))


# -- a query row with no key: every key masked ------------------------------------------------------
def _keyless_mask(kind: str) -> torch.Tensor:
    """An exclusion mask over 3 queries and 5 keys (batch 2) that leaves query 1 no key (``'rows'``,
    bool or ``-inf``), or sample 1 none at all (``'padding'``: a key padding mask, every key of
    that sample padded); the other rows keep at least one key."""
    if kind == 'padding':
        keep = torch.ones(2, 1, 1, 5, dtype=torch.bool)
        keep[1] = False
        keep[0, ..., -2:] = False
    else:
        keep = torch.ones(3, 5, dtype=torch.bool)
        keep[1] = False
        keep[0, :2] = False
    if kind == 'rows, -inf':
        return torch.zeros(keep.shape, dtype=F64).masked_fill(~keep, float('-inf'))
    return keep


def _keyless(kind: str) -> tuple[slice, slice]:
    """The (samples, queries) of the output that have no key under :func:`_keyless_mask`."""
    return (slice(1, 2), slice(None)) if kind == 'padding' else (slice(None), slice(1, 2))


MASKS = ['rows, bool', 'rows, -inf', 'padding']


@pytest.mark.parametrize('bias', [False, True], ids=['mask', 'mask + bias'])
@pytest.mark.parametrize('kind', MASKS)
@pytest.mark.parametrize('make', [c for c in CASES if 'triton' not in c.id])
def test_a_query_with_every_key_masked_gets_no_attention_on_both_routes(
    make: Builder, kind: str, bias: bool
) -> None:
    """A row whose every key is excluded: weights 0 on both routes (SDPA's on the fused one), so
    its output is ``proj.bias``; the eager maps' row is 0, the other rows are distributions (or,
    for sigmoid, its weights); fused and eager agree in float64, outputs and every gradient, and
    no gradient is NaN (none is made in the forward and hidden)."""
    m = _built(make)
    mask = _keyless_mask(kind)
    extra = dict(attn_bias=torch.randn(2, H, 3, 5, dtype=F64)) if bias else {}
    x = torch.randn(2, 3, C, dtype=F64, requires_grad=True)
    ctx = torch.randn(2, 5, C, dtype=F64, requires_grad=True)
    runs = []
    for fused in (True, False):
        out, maps = _call(m, fused, x, context=ctx, attn_mask=mask, **extra)
        grads = _grads(m, out, [x, ctx])
        assert all(g.isfinite().all() for g in grads.values()), [
            n for n, g in grads.items() if not g.isfinite().all()
        ]
        runs.append((out.detach(), grads))
    (fused_out, fused_grads), (eager_out, eager_grads) = runs
    rows = _keyless(kind)
    assert torch.equal(fused_out[rows], m.proj.bias.expand_as(fused_out[rows]))
    assert torch.equal(eager_out[rows], fused_out[rows])
    assert_close_as(eager_out, fused_out, ulps=REORDERED, what='output')
    _assert_grads_close(eager_grads, fused_grads)
    for name, w in maps.items():  # the eager route's, [B, H, M, N]
        keyless, kept = (w[1], w[0]) if kind == 'padding' else (w[:, :, 1], w[:, :, [0, 2]])
        assert torch.equal(keyless, torch.zeros_like(keyless)), name
        if m.normalised_maps:  # the other rows: distributions (Cog: their magnitudes)
            sums = kept.abs().sum(-1)
            assert_close_as(sums, torch.ones_like(sums), ulps=REORDERED, what=f'{name} row sums')


@pytest.mark.parametrize('make', [c for c in CASES if 'triton' in c.id])
def test_a_query_with_every_key_masked_in_the_triton_kernels(make: Builder) -> None:
    """The Triton kernels (float32) give such a row 0 too, as the eager route."""
    m = _built(make)
    mask = _keyless_mask('rows, bool')
    x, ctx = torch.randn(2, 3, C), torch.randn(2, 5, C)
    fused = m(x, context=ctx, attn_mask=mask)
    eager, _ = m(x, context=ctx, attn_mask=mask, return_attn=True)
    assert torch.equal(fused[:, 1], m.proj.bias.expand(2, C))
    assert_close_as(fused, eager, ulps=REORDERED)


@pytest.mark.filterwarnings('ignore:Anomaly Detection has been enabled')
def test_a_masked_row_makes_no_nan_to_hide() -> None:
    """The eager kernel's weights come out of a finite softmax (no ``0 / 0`` set to 0 afterwards):
    under ``detect_anomaly`` a backward through a keyless row raises nothing."""
    m = _built(functools.partial(DnAAttention))
    mask = _keyless_mask('rows, bool')
    x = torch.randn(2, 3, C, dtype=F64, requires_grad=True)
    with torch.autograd.detect_anomaly():
        out, _ = m(x, context=torch.randn(2, 5, C, dtype=F64), attn_mask=mask, return_attn=True)
        out.sum().backward()
    assert x.grad.isfinite().all()


# -- kdim / vdim --------------------------------------------------------------------------------------
KDIM, VDIM = 16, 8


def _kv_inputs(kdim: int, vdim: int) -> list[torch.Tensor]:
    return [
        torch.randn(2, 3, C, dtype=F64),
        torch.randn(2, 5, kdim, dtype=F64),
        torch.randn(2, 5, vdim, dtype=F64),
    ]


@pytest.mark.parametrize('form', ['self class', 'cross form'])
@pytest.mark.parametrize('make', [c for c in CASES if 'triton' not in c.id])
def test_kdim_vdim_members_are_called_through_their_own_forward(make: Builder, form: str) -> None:
    """Built with ``kdim`` / ``vdim`` (``k_proj [C, kdim]``, ``v_proj [C, vdim]``), the member takes
    ``context [B, N, kdim]`` and ``value [B, N, vdim]``: both routes agree in float64 (outputs and
    every gradient), and every parameter gets a gradient."""
    if form == 'cross form':
        make = functools.partial(CROSS_FORMS[make.func], **make.keywords)
    m = _built(make, kdim=KDIM, vdim=VDIM)
    assert (m.k_proj.in_features, m.v_proj.in_features) == (KDIM, VDIM)
    inputs = [t.requires_grad_() for t in _kv_inputs(KDIM, VDIM)]

    def call(fused: bool) -> torch.Tensor:
        x, ctx, val = inputs
        if form == 'cross form':
            return _call(m, fused, x, ctx, value=val)[0]
        return _call(m, fused, x, context=ctx, value=val)[0]

    fused, eager = call(True), call(False)
    assert fused.shape == (2, 3, C)
    assert_close_as(eager, fused, ulps=REORDERED, what='output')
    torch.autograd.grad(fused.sum(), list(m.parameters()), retain_graph=True)  # each one reached
    grads = [_grads(m, out, inputs) for out in (fused, eager)]
    _assert_grads_close(grads[1], grads[0])


def test_softmax_with_kdim_vdim_is_torchs_multihead_attention() -> None:
    """``SoftmaxCrossAttention(C, H, kdim, vdim)`` is ``nn.MultiheadAttention(C, H, kdim=, vdim=)``
    on the same weights (float64)."""
    m = _built(functools.partial(SoftmaxCrossAttention), kdim=KDIM, vdim=VDIM)
    mha = torch.nn.MultiheadAttention(C, H, kdim=KDIM, vdim=VDIM, batch_first=True).double().eval()
    with torch.no_grad():
        mha.q_proj_weight.copy_(m.q_proj.weight)
        mha.k_proj_weight.copy_(m.k_proj.weight)
        mha.v_proj_weight.copy_(m.v_proj.weight)
        mha.in_proj_bias.copy_(torch.cat([m.q_proj.bias, m.k_proj.bias, m.v_proj.bias]))
        mha.out_proj.load_state_dict(m.proj.state_dict())
    x, ctx, val = _kv_inputs(KDIM, VDIM)
    for fused in (True, False):
        m.fused_attn = fused
        assert_close_as(m(x, ctx, value=val), mha(x, ctx, val, need_weights=False)[0], ulps=REORDERED)


def _dna_reference(m: DnAAttention, x: torch.Tensor, ctx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
    """Q±V± written out from ``q_proj``, ``k_proj``, ``v_proj``, ``q_neg``, ``v_neg``::

    proj([softmax(s Q+ Kᵀ) V+ + α softmin(s Q- Kᵀ) V-]_heads)"""

    def heads(t: torch.Tensor) -> torch.Tensor:  # [B, N, C] -> [B, H, N, d]
        return t.reshape(t.shape[0], t.shape[1], H, C // H).transpose(1, 2)

    s = (C // H) ** -0.5
    q, k, v = heads(m.q_proj(x)), heads(m.k_proj(ctx)), heads(m.v_proj(val))
    qn, vn = heads(m.q_neg(x)), heads(m.v_neg(val))
    out = torch.softmax(s * q @ k.transpose(-1, -2), -1) @ v
    out = out + m.alpha.view(1, H, 1, 1) * (torch.softmax(-s * qn @ k.transpose(-1, -2), -1) @ vn)
    return m.proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], C))


def test_dna_with_kdim_vdim_is_the_formula() -> None:
    m = _built(functools.partial(DnAAttention), kdim=KDIM, vdim=VDIM)
    x, ctx, val = _kv_inputs(KDIM, VDIM)
    with torch.no_grad():
        ref = _dna_reference(m, x, ctx, val)
        for fused in (True, False):
            m.fused_attn = fused
            assert_close_as(m(x, context=ctx, value=val), ref, ulps=REORDERED)


def _modules_route(m: DnAAttention) -> torch.utils.hooks.RemovableHandle:
    """A no-op hook on ``q_proj``: every projection is then called as a module."""
    return m.q_proj.register_forward_pre_hook(lambda *_: None)


@pytest.mark.parametrize('widths', [(KDIM, VDIM), (KDIM, KDIM), (C, VDIM), (KDIM, C)], ids=str)
@pytest.mark.parametrize('variant', sorted(DNA_VARIANTS))
def test_dna_lean_route_with_kdim_vdim_is_the_modules_route(variant: str, widths: tuple[int, int]) -> None:
    """DnA's lean projection (one GEMM per distinct input) groups the rows by input when the keys
    and values are of other widths: the same output and gradients as the projections called as
    modules (float64), with values from their own input, and (``kdim == vdim``) from the context."""
    kdim, vdim = widths
    m = _built(functools.partial(DnAAttention, variant=variant), kdim=kdim, vdim=vdim)
    calls = [(True, True)]  # (a context, own values): the keys from the context, the values from theirs
    calls += [(True, False)] if kdim == vdim else []  # keys and values from the context
    calls += [(False, True)] if kdim == C else []  # keys from x, values from their own input
    for own_keys, own_values in calls:
        x, ctx, val = _kv_inputs(kdim, vdim)
        val = val if own_keys else val[:, : x.shape[1]]  # as many values as keys
        inputs = [t.requires_grad_() for t in [x] + [ctx] * own_keys + [val] * own_values]
        runs = []
        for lean in (True, False):
            handle = None if lean else _modules_route(m)
            assert m.projects_lean() == lean
            out = m(x, context=ctx if own_keys else None, value=val if own_values else None)
            runs.append((out.detach(), _grads(m, out, inputs)))
            if handle is not None:
                handle.remove()
        assert_close_as(runs[0][0], runs[1][0], ulps=REORDERED, what='output')
        _assert_grads_close(runs[0][1], runs[1][1])


@pytest.mark.parametrize(
    ('args', 'message'),
    [
        ((), r'built with kdim=16: its keys come from context \[B, N, 16\]; got none'),
        ((torch.randn(2, 5, C),), r'expected context of shape \[2, N, 16\], got \[2, 5, 64\]'),
        ((torch.randn(2, 5, KDIM),), r'built with vdim=8: its values come from value \[B, N, 8\]; got none'),
        (
            (torch.randn(2, 5, KDIM), torch.randn(2, 5, C)),
            r'expected value of shape \[2, N, 8\], got \[2, 5, 64\]',
        ),
    ],
)
def test_kdim_vdim_inputs_of_other_widths_are_named(args: tuple, message: str) -> None:
    m = DnAAttention(C, H, kdim=KDIM, vdim=VDIM)
    x = torch.randn(2, 3, C)
    with pytest.raises(ValueError, match=message):
        m(x, context=args[0] if args else None, value=args[1] if len(args) > 1 else None)


# -- a member's bad arguments: ConfigError ------------------------------------------------------------
@pytest.mark.parametrize(
    ('build', 'message'),
    [
        (
            lambda: DiffAttention(C, H, diff_heads='bogus'),
            "diff_heads must be 'paper' or 'official', got 'bogus'",
        ),
        (lambda: DiffAttention(C, 3, diff_heads='official'), 'needs an even num_heads'),
        (lambda: DiffAttention(96, 32), 'head dim 3 must be even'),
        (
            lambda: SigmoidAttention(C, H, sigmoid_bias=math.inf),
            'sigmoid_bias must be a finite number or None',
        ),
        (lambda: SigmoidAttention(C, H, sigmoid_bias='-2'), 'sigmoid_bias must be a finite number or None'),
        (
            lambda: DnAAttention(C, H, attn_drop=1.5),
            r'attn_drop and proj_drop must be in \[0, 1\), got 1.5, 0.0',
        ),
        (lambda: SoftmaxAttention(C, H, proj_drop=-0.1), 'attn_drop and proj_drop must be in'),
        (lambda: SoftmaxAttention(C, H, qk_norm=True), 'qk_norm / scale_norm are not supported'),
        (lambda: SoftmaxAttention(C, H, batch_first=False), 'only batch_first=True'),
        (lambda: build_attention('bogus', C, H), "attention type 'bogus' is not registered"),
        (lambda: build_attention(dict(variant='apm'), C, H), 'has no "type"'),
    ],
)
def test_bad_member_arguments_are_config_errors(build: Callable, message: str) -> None:
    """A config mistake in a member's arguments is a ``ConfigError`` (a ``ValueError``): the tools
    print one line and exit with status 2."""
    with pytest.raises(ConfigError, match=message):
        build()


def test_a_config_without_type_is_still_a_key_error() -> None:
    with pytest.raises(KeyError) as info:
        build_attention(dict(variant='apm'), C, H)
    assert str(info.value) == "attention config {'variant': 'apm'} has no \"type\""
