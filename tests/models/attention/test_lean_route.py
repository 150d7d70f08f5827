"""DnA's lean projection (one GEMM per distinct input for all its heads) against the projections
called as modules: the same heads, outputs and gradients in float64, for every variant, self and
cross, masks and biases, and in the host forms that call ``project`` (ViTDet's grid, MViTv2's
pooling, ``nn.MultiheadAttention``'s call); taken only where no hook or wrapper would miss a call."""

from __future__ import annotations

import pytest
import torch
from tolerance import REORDERED, ROUNDING, SUMMED, assert_close_as
from torch.utils._python_dispatch import TorchDispatchMode

from dna_mm.models import DnAAttention, DnACrossAttention
from dna_mm.models.attention import DNA_VARIANTS
from dna_mm.models.layers.mha_attention import form_of
from dna_mm.models.layers.mvit_attention import PoolingForm
from dna_mm.models.layers.vitdet_attention import vitdet_attention

C, H = 32, 4
VARIANTS = sorted(DNA_VARIANTS)
F64 = torch.float64


def _randomised(m: torch.nn.Module) -> torch.nn.Module:
    """Random α and relative-position tables (they start at 0.5 and 0), float64, eval mode."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name == 'alpha':
                p.uniform_(-1.0, 1.0)
            elif name.startswith('rel_pos'):
                p.normal_(0.0, 0.5)
    return m.double().eval()


def _modules_route(m: torch.nn.Module) -> torch.utils.hooks.RemovableHandle:
    """A no-op hook on the first projection: every projection is then called as a module."""
    first = m.qkv if m.packed_projections else m.q_proj
    return first.register_forward_pre_hook(lambda *_: None)


def _run(m: torch.nn.Module, call, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """``call(*inputs)``: the output and the gradients of the inputs and of every parameter."""
    m.zero_grad(set_to_none=True)
    inputs = [t.detach().requires_grad_() for t in inputs]
    out = call(*inputs)
    out.pow(2).sum().backward()
    grads = [t.grad for t in inputs] + [p.grad for p in m.parameters()]
    assert all(g is not None for g in grads)  # every parameter in the formula gets one
    return [out.detach()] + grads


def _assert_lean_equals_modules(m: torch.nn.Module, call, inputs: list[torch.Tensor]) -> None:
    """``m`` on the lean route and with its projections called as modules: output and every
    gradient equal to float64 round-off (the same dot products, summed in another blocking)."""
    assert m.projects_lean()
    lean = _run(m, call, inputs)
    handle = _modules_route(m)
    assert not m.projects_lean()
    modules = _run(m, call, inputs)
    handle.remove()
    assert_close_as(lean[0], modules[0], ulps=REORDERED, what='output')
    names = [f'input {i}' for i in range(len(inputs))] + [n for n, _ in m.named_parameters()]
    grads = dict(zip(names, modules[1:], strict=True))
    for name, a, b in zip(names, lean[1:], modules[1:], strict=True):
        # a bias's gradient sums the terms of its weight's (times inputs of order 1); a key-side
        # bias's is 0 in the formula (softmax ignores a shift shared by all keys), its value
        # round-off of those terms: their magnitude, the weight's gradient's, is the scale
        weight = grads.get(name.removesuffix('bias') + 'weight') if name.endswith('bias') else None
        scale = None if weight is None else max(weight.abs().max().item(), b.abs().max().item())
        assert_close_as(a, b, ulps=SUMMED, what=f'gradient of {name}', magnitude=scale)


def _terms(kind: str, m_tokens: int, n_tokens: int) -> dict:
    """The additive terms a host hands DnA (as ``attn_mask`` / ``attn_bias``)."""
    keep = torch.ones(m_tokens, n_tokens, dtype=torch.bool)
    keep[:, -2:] = False
    bias = lambda: torch.randn(2, H, m_tokens, n_tokens, dtype=F64) * 3  # noqa: E731
    return {
        'none': {},
        'bias': dict(attn_bias=bias()),
        'bias pair': dict(attn_bias=(bias(), bias())),
        'bool mask': dict(attn_mask=keep),
        'float mask': dict(attn_mask=torch.zeros(m_tokens, n_tokens, dtype=F64).masked_fill(~keep, -1e4)),
        'pair + mask': dict(attn_bias=(bias(), bias()), attn_mask=keep),
    }[kind]


# the inputs of a call: queries' tokens M, keys' N; 'value': values from their own tokens
FORMS = {
    'self': (5, 5, False, False),
    'self, own values': (5, 5, False, True),
    'cross': (3, 7, True, False),
    'cross, own values': (3, 7, True, True),
}


@pytest.mark.parametrize('kind', ['none', 'bias', 'bias pair', 'bool mask', 'float mask', 'pair + mask'])
@pytest.mark.parametrize('form', list(FORMS))
@pytest.mark.parametrize('variant', VARIANTS)
def test_lean_projection_is_exact_in_float64(variant: str, form: str, kind: str) -> None:
    """Every variant, self and cross (values from the keys' input or their own), every kind of
    mask and bias: the output and the gradients of the inputs and of every parameter (``q_neg``,
    ``v_neg``, ``α`` included) equal the module route's."""
    m_tokens, n_tokens, cross, own_values = FORMS[form]
    m = _randomised((DnACrossAttention if cross else DnAAttention)(C, H, variant=variant))
    x = torch.randn(2, m_tokens, C, dtype=F64)
    inputs = [x] + ([torch.randn(2, n_tokens, C, dtype=F64)] if cross else [])
    if own_values:
        inputs.append(torch.randn(2, n_tokens, C, dtype=F64))
    extra = _terms(kind, m_tokens, n_tokens)

    def call(x, *rest):
        value = rest[-1] if own_values else None
        return m(x, rest[0], value=value, **extra) if cross else m(x, value=value, **extra)

    _assert_lean_equals_modules(m, call, inputs)


@pytest.mark.parametrize('variant', VARIANTS)
def test_lean_heads_are_the_formulas(variant: str) -> None:
    """``project`` gives the semantic heads on the lean route (``Q-``, not ``-Q-``; ``V-``, not
    ``α V-``; the shared ``Q`` / ``V`` where the variant has no own projection), bitwise the
    same objects where shared, so hooks, the eager route and ViTDet's rel-pos see the formula's."""
    m = _randomised(DnAAttention(C, H, variant=variant))
    x = torch.randn(2, 6, C, dtype=F64)
    lean = m.project(x)
    handle = _modules_route(m)
    modules = m.project(x)
    handle.remove()
    assert list(lean) == list(modules) == ['q', 'k', 'v', 'q_neg', 'v_neg']
    assert_close_as(lean, modules, ulps=REORDERED, what=variant)
    assert (lean['q_neg'] is lean['q']) == (m.q_neg is None)
    assert (lean['v_neg'] is lean['v']) == (m.v_neg is None)


class _GEMMs(TorchDispatchMode):
    """Counts the matrix products a call dispatches."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.count += func.overloadpacket.__name__ in ('addmm', 'mm', 'bmm', 'matmul')
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    ('form', 'gemms', 'kdim'),
    [('self', 1, None), ('cross', 2, None), ('cross, own values', 3, None), ('cross, own values', 3, 24)],
)
def test_one_gemm_per_distinct_input(form: str, gemms: int, kdim) -> None:
    """The lean route projects each distinct input once for all the heads it gives (the module
    route: ``qkv`` once per input, ``q_neg`` and ``v_neg`` once each); ``kdim`` / ``vdim``
    (separate ``q_proj``, ``k_proj``, ``v_proj``) too."""
    m_tokens, n_tokens, cross, own_values = FORMS[form]
    m = DnAAttention(C, H, kdim=kdim, vdim=kdim).eval()
    width = kdim or C
    x, ctx, val = (
        torch.randn(2, m_tokens, C),
        torch.randn(2, n_tokens, width),
        torch.randn(2, n_tokens, width),
    )
    args = dict(context=ctx if cross else None, value=val if own_values else None)
    with torch.no_grad(), _GEMMs() as lean:
        m.project(x, **args)
    handle = _modules_route(m)
    with torch.no_grad(), _GEMMs() as modules:
        m.project(x, **args)
    handle.remove()
    assert lean.count == gemms
    assert modules.count == 2 + (3 if kdim else 1 + cross + own_values)  # + q_neg, v_neg


# -- the host forms that call project: ViTDet's grid, MViTv2's pooling, nn.MultiheadAttention's --
@pytest.mark.parametrize('variant', VARIANTS)
def test_vitdet_grid_form_with_rel_pos(variant: str) -> None:
    """ViTDet's call: the rel-pos bias of each branch from its own queries (``R(Q+)``, ``R(Q-)``)."""
    m = _randomised(
        vitdet_attention(dict(type='dna', variant=variant), C, H, 0, 1, use_rel_pos=True, input_size=(4, 4))
    )
    _assert_lean_equals_modules(m, m, [torch.randn(2, 4, 4, C, dtype=F64)])


@pytest.mark.parametrize('variant', VARIANTS)
def test_mvit_pooling_form(variant: str) -> None:
    """MViTv2's call: the heads pooled and normalised (the negative ones by their own pooling),
    rel-pos from each branch's pooled queries, residual pooling, a CLS token, a stage change
    (``in_dims`` 16 → 32)."""
    form = PoolingForm(
        in_dims=16,
        pool_kernel=(3, 3, 3),
        stride_q=(1, 2, 2),
        stride_kv=(1, 2, 2),
        norm_cfg=dict(type='LN', eps=1e-6),
        rel_pos_lengths=(3, 3, 3),
        residual_pooling=True,
        with_cls_token=True,
    )
    m = _randomised(form.attach(DnAAttention(C, H, variant=variant)))
    x = torch.randn(2, 1 + 2 * 4 * 4, 16, dtype=F64)
    _assert_lean_equals_modules(m, lambda x: m(x, (2, 4, 4))[0], [x])


@pytest.mark.parametrize('kdim', [None, 24])
@pytest.mark.parametrize('variant', VARIANTS)
def test_multihead_form(variant: str, kdim) -> None:
    """``nn.MultiheadAttention``'s call (sequence-first), cross with a key padding mask; with
    ``kdim`` / ``vdim``, separate projections."""
    host = torch.nn.MultiheadAttention(C, H, kdim=kdim, vdim=kdim)
    m = _randomised(form_of(host, dict(type='dna', variant=variant), 0, 1, host))
    width = kdim or C
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, -2:] = True
    inputs = [
        torch.randn(3, 2, C, dtype=F64),
        torch.randn(7, 2, width, dtype=F64),
        torch.randn(7, 2, width, dtype=F64),
    ]
    _assert_lean_equals_modules(
        m, lambda q, k, v: m(q, k, v, key_padding_mask=pad, need_weights=False)[0], inputs
    )


# -- where the lean route is not taken -----------------------------------------------------------
class _LoRALinear(torch.nn.Linear):
    """A LoRA-style subclass: its weight alone is not what it computes."""

    def forward(self, x):
        return super().forward(x) + 0.5 * x[..., : self.out_features].flip(-1)


def test_hooks_and_wrappers_on_any_projection_still_run() -> None:
    """A forward hook on ``q_neg`` fires (on every route: fused, eager, an attend hook) and
    changes the output as on the module route; a LoRA subclass, a ``forward`` set on the
    instance or a global module hook also send every projection through its call."""
    m = _randomised(DnAAttention(C, H))
    x = torch.randn(2, 5, C, dtype=F64)
    plain = m(x)
    seen = []
    handle = m.q_neg.register_forward_hook(lambda mod, args, out: seen.append(args[0]) or 2 * out)
    assert not m.projects_lean()
    hooked = m(x)
    assert len(seen) == 1 and seen[0] is x
    eager, _ = m(x, return_attn=True)
    attend = m.register_attend_hook(lambda *_: None)
    observed = m(x)
    attend.remove()
    assert len(seen) == 3
    assert (hooked - plain).abs().max() > 1e-2  # the hook's output reached the formula
    assert_close_as(eager, hooked, ulps=REORDERED)
    assert_close_as(observed, hooked, ulps=REORDERED)
    handle.remove()
    assert m.projects_lean()
    assert_close_as(m(x), plain, ulps=ROUNDING)

    lora = _LoRALinear(C, C).double()
    lora.load_state_dict(m.v_neg.state_dict())
    m.v_neg = lora
    assert not m.projects_lean()
    assert (m(x) - plain).abs().max() > 1e-2
    m.v_neg = torch.nn.Linear(C, C).double()
    m.v_neg.load_state_dict(lora.state_dict())
    assert m.projects_lean()
    m.qkv.forward = lambda t: torch.nn.functional.linear(t, 2 * m.qkv.weight, m.qkv.bias)
    assert not m.projects_lean()
    del m.qkv.forward
    calls = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda mod, args: calls.append(mod))
    try:
        assert not m.projects_lean()
        m(x)
    finally:
        handle.remove()
    assert m.q_neg in calls and m.qkv in calls and m.v_neg in calls
    assert m.projects_lean()


def test_projections_without_a_common_bias_take_the_module_route() -> None:
    """A projection without bias beside others with one (a hand-edited model): each is called."""
    m = DnAAttention(C, H).double()
    m.v_neg = torch.nn.Linear(C, C, bias=False).double()
    assert not m.projects_lean()
    assert m(torch.randn(1, 4, C, dtype=F64)).shape == (1, 4, C)


@pytest.mark.parametrize('variant', VARIANTS)
def test_state_dict_keys_and_shapes_unchanged(variant: str) -> None:
    """The lean route adds no parameter or buffer: the keys are ``qkv``, ``proj`` and the
    variant's ``q_neg``, ``v_neg``, ``alpha``, shaped as ever."""
    m = DnAAttention(C, H, variant=variant)
    sep_q, sep_v, learn_alpha = DNA_VARIANTS[variant]
    want = {'qkv.weight': (3 * C, C), 'qkv.bias': (3 * C,), 'proj.weight': (C, C), 'proj.bias': (C,)}
    if sep_q:
        want |= {'q_neg.weight': (C, C), 'q_neg.bias': (C,)}
    if sep_v:
        want |= {'v_neg.weight': (C, C), 'v_neg.bias': (C,)}
    if learn_alpha:
        want |= {'alpha': (H,)}
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == want


def test_compiles_to_one_graph() -> None:
    """``torch.compile(fullgraph=True)`` of the lean module: one graph, no break, the eager
    module's output."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    m = _randomised(DnAAttention(C, H)).float()
    x = torch.randn(2, 5, C)
    counter = CompileCounter()
    compiled = torch.compile(m, backend=counter, fullgraph=True)
    assert_close_as(compiled(x), m(x), ulps=ROUNDING)
    assert counter.frame_count == 1
    explained = torch._dynamo.explain(m)(x)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    torch._dynamo.reset()


def test_autocast_lean_equals_modules() -> None:
    """Under bf16 autocast the lean GEMM casts the stacked weights once: the module route's
    values to bf16 round-off."""
    m = _randomised(DnAAttention(C, H)).float()
    x = torch.randn(2, 9, C)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        lean = m(x)
        handle = _modules_route(m)
        modules = m(x)
    handle.remove()
    assert lean.dtype == modules.dtype == torch.bfloat16
    assert_close_as(lean, modules, ulps=REORDERED)


def test_operators_of_one_attention_within_the_target() -> None:
    """``tools/benchmarks/benchmark_operators.py``'s count: DnA Q±V±'s forward + backward runs at
    most 1.4× softmax's top-level operators (2.0× with its projections called as modules) and
    fewer computing ones than with the projections called or the sign and α folded."""
    from dna_mm.benchmarks.operators import FOLDED, MODULES_ROUTE, module_counts

    counts = module_counts(shape=(2, 9, C), num_heads=H)
    ops = {label: sum(c['operators'].values()) for label, c in counts.items()}
    kernels = {label: sum(c['kernels'].values()) for label, c in counts.items()}
    dna, softmax = 'DnAAttention qpm_vpm', 'SoftmaxAttention'
    assert ops[dna] <= 1.4 * ops[softmax] < ops[FOLDED] < ops[MODULES_ROUTE]
    assert kernels[dna] < min(kernels[FOLDED], kernels[MODULES_ROUTE])
