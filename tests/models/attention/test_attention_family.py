"""The attention family against plain-formula references, fast vs eager, masks, dtypes."""

from __future__ import annotations

import functools
import math

import pytest
import torch
import torch.nn.functional as F
from tolerance import REORDERED, ROUNDING, SUMMED, assert_close_as

from dna_mm.errors import ConfigError
from dna_mm.models import (
    CogAttention,
    DiffAttention,
    DnAAttention,
    DnACrossAttention,
    SoftmaxAttention,
    SoftmaxCrossAttention,
    build_attention,
)
from dna_mm.models.attention import DNA_VARIANTS, CogCrossAttention, DiffCrossAttention

C, H = 32, 4


def _heads(t: torch.Tensor) -> torch.Tensor:
    b, n, _ = t.shape
    return t.reshape(b, n, H, -1).transpose(1, 2)


def _lin(x, layer, rows=slice(None)):
    w = layer.weight.double()[rows]
    b = None if layer.bias is None else layer.bias.double()[rows]
    return F.linear(x, w, b)


def reference_dna(m: DnAAttention, x: torch.Tensor, ctx=None, bias=None, mask=None, val=None) -> torch.Tensor:
    """The paper's formula (Sec. 3.2) written out in float64, one softmax and one softmin.

    ``bias``: one tensor for both branches or ``(b_pos, b_neg)``, inside the formula;
    ``mask``: an additive exclusion mask, added to both branches' logits after the sign."""
    x = x.double()
    ctx = x if ctx is None else ctx.double()
    val = ctx if val is None else val.double()
    s = (C // H) ** -0.5
    q = _heads(_lin(x, m.qkv, slice(0, C)))
    k = _heads(_lin(ctx, m.qkv, slice(C, 2 * C)))
    v = _heads(_lin(val, m.qkv, slice(2 * C, 3 * C)))
    qn = q if m.q_neg is None else _heads(_lin(x, m.q_neg))
    vn = v if m.v_neg is None else _heads(_lin(val, m.v_neg))
    alpha = torch.ones(H, dtype=torch.float64) if m.alpha is None else m.alpha.double()
    zp = s * q @ k.transpose(-1, -2)
    zn = s * qn @ k.transpose(-1, -2)
    if bias is not None:
        b_pos, b_neg = bias if isinstance(bias, tuple) else (bias, bias)
        zp = zp if b_pos is None else zp + b_pos.double()
        zn = zn if b_neg is None else zn + b_neg.double()
    m_add = 0.0 if mask is None else mask.double()
    a_pos = torch.softmax(zp + m_add, -1)
    a_neg = torch.softmax(-zn + m_add, -1)  # softmin of the whole biased logits, then the mask
    out = a_pos @ v + alpha.view(1, H, 1, 1) * (a_neg @ vn)
    out = out.transpose(1, 2).reshape(x.shape[0], x.shape[1], C)
    return _lin(out, m.proj)


def reference_softmax(m, x, ctx=None, bias=None):
    x = x.double()
    ctx = x if ctx is None else ctx.double()
    q = _heads(_lin(x, m.qkv, slice(0, C)))
    k = _heads(_lin(ctx, m.qkv, slice(C, 2 * C)))
    v = _heads(_lin(ctx, m.qkv, slice(2 * C, 3 * C)))
    z = (C // H) ** -0.5 * q @ k.transpose(-1, -2)
    if bias is not None:
        z = z + bias.double()
    out = (torch.softmax(z, -1) @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], C)
    return _lin(out, m.proj)


def reference_cog(m, x):
    x = x.double()
    q, k, v = (_heads(_lin(x, m.qkv, slice(i * C, (i + 1) * C))) for i in range(3))
    sc = (C // H) ** -0.5 * q @ k.transpose(-1, -2)
    w = torch.sign(sc) * torch.softmax(sc.abs(), -1)
    return _lin((w @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], C), m.proj)


def _perturbed(m: torch.nn.Module) -> torch.nn.Module:
    """Random α so a wrong head order or sign cannot hide behind α = 0.5 everywhere."""
    if getattr(m, 'alpha', None) is not None:
        with torch.no_grad():
            m.alpha.uniform_(-1.0, 1.0)
    return m.eval()


@pytest.mark.parametrize('variant', sorted(DNA_VARIANTS))
def test_dna_variants_match_formula(variant: str) -> None:
    m = _perturbed(DnAAttention(C, H, variant=variant))
    x = torch.randn(2, 7, C)
    ref = reference_dna(m, x)
    for fused in (True, False):
        m.fused_attn = fused
        assert_close_as(m(x), ref, ulps=REORDERED)


def test_paper_aliases_and_bad_variant() -> None:
    assert DnAAttention(C, H, variant='Q±V').variant == 'qpm_v'
    # ± as a keyboard without it writes it
    assert [DnAAttention(C, H, variant=v).variant for v in ('A+-', 'Q+-V+-', 'QV+-')] == [
        'apm',
        'qpm_vpm',
        'q_vpm',
    ]
    with pytest.raises(ValueError, match='unknown DnA variant'):
        DnAAttention(C, H, variant='q+v+')
    with pytest.raises(ValueError, match='multiple of num_heads'):
        DnAAttention(30, 4)


def test_variant_parameter_counts() -> None:
    base = sum(p.numel() for p in SoftmaxAttention(C, H).parameters())
    extra = {
        v: sum(p.numel() for p in DnAAttention(C, H, variant=v).parameters()) - base for v in DNA_VARIANTS
    }
    assert extra == {
        'apm': 0,
        'apm_alpha': H,
        'qpm_v': C * C + C + H,
        'q_vpm': C * C + C + H,
        'qpm_vpm': 2 * C * C + 2 * C + H,
    }


def test_alpha_init_and_branches_differ() -> None:
    m = DnAAttention(C, H)
    assert torch.equal(m.alpha, torch.full((H,), 0.5))
    _, maps = m(torch.randn(1, 5, C), return_attn=True)
    assert set(maps) == {'pos', 'neg'}
    # softmin of the same logits reverses the ranking of the softmax map
    m2 = DnAAttention(C, H, variant='apm')
    _, maps = m2(torch.randn(1, 5, C), return_attn=True)
    assert torch.equal(maps['pos'].argmax(-1), maps['neg'].argmin(-1))


#: variant → the extra heads DnA computes by a projection of its own, its mixing weights
DNA_CONTRACT = {
    'apm': ((), []),
    'apm_alpha': ((), ['alpha']),
    'qpm_v': (('q_neg',), ['alpha']),
    'q_vpm': (('v_neg',), ['alpha']),
    'qpm_vpm': (('q_neg', 'v_neg'), ['alpha']),
}


@pytest.mark.parametrize('variant', sorted(DNA_VARIANTS))
def test_dna_states_its_branches_and_weights_by_the_member_contract(variant: str) -> None:
    """What general code asks a member (the forms, the fitting, the analyses), for DnA: both
    branches' heads, the ones of its own projections, α by name, its variant for the fitting;
    the heads of ``project`` are the ones ``branch_heads`` names, shared where not its own."""
    m = DnAAttention(C, H, variant=variant)
    assert DnAAttention.branch_heads() == {'pos': ('q', 'k', 'v'), 'neg': ('q_neg', 'k', 'v_neg')}
    assert DnAAttention.extra_heads() == {'q_neg': 'q', 'v_neg': 'v'}
    own, weights = DNA_CONTRACT[variant]
    assert m.own_heads() == own and list(m.mixing_weights()) == weights
    assert m.negative_variant() == variant
    if weights:
        assert m.mixing_weights()['alpha'].value is m.alpha and m.mixing_weights()['alpha'].init == 0.5
    heads = m.project(torch.randn(1, 5, C))
    for name, base in m.extra_heads().items():
        assert (heads[name] is heads[base]) == (name not in own)
    biases = m.position_bias(heads, lambda q: q.sum(-1, keepdim=True))  # one per branch, shared once
    assert len(biases) == 2 and (biases[0] is biases[1]) == ('q_neg' not in own)


@pytest.mark.parametrize('cls', [SoftmaxAttention, DiffAttention, CogAttention])
def test_the_other_members_take_the_contracts_defaults(cls) -> None:
    """One query head for every branch (one position bias), no extra heads, no DnA negative
    branch; Diff's λ is its mixing weight."""
    m = cls(C, H)
    assert m.extra_heads() == {} and m.own_heads() == () and m.negative_variant() is None
    assert set(m.branch_heads()) == set(m.map_names)
    heads = m.project(torch.randn(1, 5, C))
    assert torch.is_tensor(m.position_bias(heads, lambda q: q.sum(-1, keepdim=True)))
    weights = m.mixing_weights()
    if cls is DiffAttention:
        assert list(weights) == ['lambda'] and weights['lambda'].init == m.lambda_init
        assert torch.equal(weights['lambda'].value, m.lambda_full())
    else:
        assert weights == {}


@pytest.mark.parametrize(
    'cls',
    [SoftmaxAttention, DiffAttention]
    + [functools.partial(DnAAttention, variant=v) for v in sorted(DNA_VARIANTS)],
)
def test_fast_and_eager_agree_with_gradients(cls) -> None:
    m = _perturbed(cls(C, H))
    x = torch.randn(2, 9, C, requires_grad=True)
    bias = torch.randn(1, H, 9, 9)
    outs, grads = [], []
    for fused in (True, False):
        m.fused_attn = fused
        m.zero_grad()
        x.grad = None
        y = m(x, attn_mask=bias)
        y.pow(2).sum().backward()
        outs.append(y.detach())
        grads.append({'x': x.grad.clone(), **{n: p.grad.clone() for n, p in m.named_parameters()}})
    assert_close_as(outs[0], outs[1], ulps=REORDERED)
    assert_close_as(grads[0], grads[1], ulps=SUMMED, what='grad')


@pytest.mark.parametrize('variant', sorted(DNA_VARIANTS))
def test_core_on_formula_heads_fast_equals_eager(variant: str) -> None:
    """``attend()`` on the formula's heads (used by analyses and the benchmark): the fused
    route must agree with the eager one, gradients included."""
    m = _perturbed(DnAAttention(C, H, variant=variant))
    x = torch.randn(2, 7, C)
    bias = torch.randn(1, H, 7, 7)
    results = []
    for return_attn in (False, True):
        heads = {k: t.detach().requires_grad_() for k, t in m.project(x, None).items()}
        m.zero_grad()
        out = m.attend(heads, bias, None, return_attn)[0]
        out.pow(2).sum().backward()
        results.append(
            [out.detach()]
            + [t.grad for t in heads.values()]
            + [p.grad for p in m.parameters() if p.grad is not None]
        )
    assert len(results[0]) == len(results[1])
    for i, (fast, eager) in enumerate(zip(*results, strict=True)):  # the output, then gradients
        assert_close_as(fast, eager, ulps=SUMMED if i else REORDERED)


@pytest.mark.parametrize('pair', [False, True])
def test_attn_bias_enters_the_formula_of_both_branches(pair: bool) -> None:
    """``attn_bias`` b: softmax(s Q+K^T + b) V+ + α softmin(s Q-K^T + b) V-, or branch-specific
    (b_pos, b_neg); with an exclusion mask on top."""
    m = _perturbed(DnAAttention(C, H))
    x = torch.randn(2, 6, C)
    bias = (torch.randn(2, H, 6, 6) * 3, torch.randn(2, H, 6, 6) * 3) if pair else torch.randn(2, H, 6, 6) * 3
    mask = torch.zeros(1, 1, 1, 6).masked_fill_(torch.tensor([False] * 4 + [True] * 2), -1e4)
    for fused in (True, False):
        m.fused_attn = fused
        assert_close_as(m(x, attn_bias=bias), reference_dna(m, x, bias=bias), ulps=REORDERED)
        assert_close_as(
            m(x, attn_bias=bias, attn_mask=mask), reference_dna(m, x, bias=bias, mask=mask), ulps=REORDERED
        )
        heads = m.project(x)
        out = m.attend(heads, None, bias, not fused)[0]
        assert_close_as(m.proj(m.merge_heads(out)), reference_dna(m, x, bias=bias), ulps=REORDERED)


@pytest.mark.parametrize('cls', [SoftmaxAttention, DiffAttention, CogAttention])
def test_one_map_members_take_one_bias(cls) -> None:
    m = cls(C, H).eval()
    x = torch.randn(2, 6, C)
    b = torch.randn(1, H, 6, 6)
    y = m(x, attn_bias=b)
    assert not torch.allclose(y, m(x), atol=1e-4)
    if cls is not CogAttention:  # bias and float mask mean the same thing for one softmax
        assert_close_as(y, m(x, attn_mask=b), ulps=REORDERED)
    with pytest.raises(TypeError, match='attn_bias must be one tensor'):
        m(x, attn_bias=(b, b))


MASK_ENCODINGS = ['bool', '-inf', '-1e4', 'finfo.min', 'swin -100']


def _exclusion_mask(keep: torch.Tensor, encoding: str) -> torch.Tensor:
    """``keep [N]`` as an SDPA-style exclusion mask ``[1, 1, 1, N]`` in one encoding."""
    if encoding == 'bool':
        return keep.view(1, 1, 1, -1)
    value = {
        '-inf': float('-inf'),
        '-1e4': -1e4,
        'finfo.min': torch.finfo(torch.float32).min,
        'swin -100': -100.0,
    }[encoding]
    return torch.zeros(1, 1, 1, keep.numel()).masked_fill(~keep.view(1, 1, 1, -1), value)


@pytest.mark.parametrize('encoding', MASK_ENCODINGS)
@pytest.mark.parametrize(
    'cls',
    [
        SoftmaxAttention,
        DnAAttention,
        DiffAttention,
        CogAttention,
        functools.partial(DnAAttention, variant='apm'),
    ],
)
def test_every_mask_encoding_excludes_keys_from_every_branch(cls, encoding: str) -> None:
    """A masked key gets ~0 weight in every map (the softmin branch included: a finite
    negative mask must not be negated into the key the branch attends to most)."""
    m = _perturbed(cls(C, H))
    x = torch.randn(2, 6, C)
    keep = torch.tensor([True, True, True, True, False, False])
    mask = _exclusion_mask(keep, encoding)
    _, maps = m(x, attn_mask=mask, return_attn=True)
    for name, a in maps.items():
        assert a[..., ~keep].abs().max() < 1e-6, (name, a[..., ~keep].abs().max())
    x2 = x.clone()
    x2[:, 4:] = torch.randn(2, 2, C) * 5
    for fused in (True, False):
        m.fused_attn = fused
        assert_close_as(m(x2, attn_mask=mask)[:, :4], m(x, attn_mask=mask)[:, :4], ulps=REORDERED)


@pytest.mark.parametrize('encoding', MASK_ENCODINGS)
@pytest.mark.parametrize(
    'cls',
    [
        SoftmaxCrossAttention,
        DnACrossAttention,
        DiffCrossAttention,
        CogCrossAttention,
        functools.partial(DnACrossAttention, variant='apm'),
        functools.partial(DiffCrossAttention, diff_heads='official'),
        functools.partial(DiffAttention, diff_heads='official'),
    ],
)
def test_every_mask_encoding_excludes_keys_in_the_cross_forms(cls, encoding: str) -> None:
    """The same rule in the cross-attention forms (keys from ``context``, values from
    ``value``) and in Diff's official head layout: a masked context token gets ~0 weight in
    every map, and changing its key or its value changes no output; an ``attn_bias`` of the
    same values is a bias, not an exclusion (the softmin branch then prefers those keys)."""
    m = _perturbed(cls(C, H))
    cross = isinstance(m, (SoftmaxCrossAttention, DnACrossAttention, DiffCrossAttention, CogCrossAttention))
    q, ctx, val = torch.randn(2, 3, C), torch.randn(2, 6, C), torch.randn(2, 6, C)
    keep = torch.tensor([True, True, True, True, False, False])
    mask = _exclusion_mask(keep, encoding)

    def run(ctx, val, **kw):
        return m(q, ctx, value=val, **kw) if cross else m(ctx, **kw)[:, :3]

    _, maps = (
        m(q, ctx, value=val, attn_mask=mask, return_attn=True)
        if cross
        else m(ctx, attn_mask=mask, return_attn=True)
    )
    for name, a in maps.items():
        assert a[..., ~keep].abs().max() < 1e-6, (name, a[..., ~keep].abs().max())
    ctx2, val2 = ctx.clone(), val.clone()
    ctx2[:, 4:] = torch.randn(2, 2, C) * 5
    val2[:, 4:] = torch.randn(2, 2, C) * 5
    for fused in (True, False):
        m.fused_attn = fused
        y = run(ctx, val, attn_mask=mask)
        if not cross:  # the masked tokens' own rows change with them: compare the kept queries
            ctx2[:, :4] = ctx[:, :4]
        assert_close_as(run(ctx2, val2, attn_mask=mask), y, ulps=REORDERED)
    if encoding not in ('bool', '-inf') and isinstance(m, DnACrossAttention):  # the softmin branch
        _, biased = m(q, ctx, value=val, attn_bias=mask, return_attn=True)
        assert biased['neg'][..., ~keep].sum(-1).mean() > 0.5  # softmin(-100 ...) favours them


@pytest.mark.parametrize('cls', [SoftmaxAttention, DnAAttention, DiffAttention, CogAttention])
def test_key_mask_excludes_keys_in_every_branch(cls) -> None:
    """Changing a masked key's token must not change any output (bool and -inf masks)."""
    m = _perturbed(cls(C, H))
    x = torch.randn(2, 6, C)
    keep = torch.tensor([True, True, True, True, False, False])
    bool_mask = keep.view(1, 1, 1, 6)
    float_mask = torch.zeros(1, 1, 1, 6).masked_fill(~bool_mask, float('-inf'))
    x2 = x.clone()
    x2[:, 4:] = torch.randn(2, 2, C) * 5
    for fused in (True, False):
        m.fused_attn = fused
        y_bool = m(x, attn_mask=bool_mask)
        y_float = m(x, attn_mask=float_mask)
        assert_close_as(y_bool, y_float, ulps=REORDERED)
        assert_close_as(m(x2, attn_mask=bool_mask)[:, :4], y_bool[:, :4], ulps=REORDERED)


def test_causal_mask_matches_explicit_mask() -> None:
    m = _perturbed(DnAAttention(C, H))
    x = torch.randn(1, 5, C)
    explicit = torch.ones(5, 5, dtype=torch.bool).tril()
    assert_close_as(m(x, is_causal=True), m(x, attn_mask=explicit), ulps=REORDERED)


@pytest.mark.parametrize(
    'cls', [SoftmaxCrossAttention, DnACrossAttention, DiffCrossAttention, CogCrossAttention]
)
def test_cross_attention_shapes(cls) -> None:
    m = _perturbed(cls(C, H))
    probes, ctx = torch.randn(3, 4, C), torch.randn(3, 11, C)
    out, maps = m(probes, ctx, return_attn=True)
    assert out.shape == (3, 4, C)
    assert all(a.shape == (3, H, 4, 11) for a in maps.values())
    assert_close_as(m(probes, ctx), out, ulps=REORDERED)
    with pytest.raises(ValueError, match='context'):
        m(probes, torch.randn(2, 11, C))


def test_dna_cross_attention_matches_formula() -> None:
    m = _perturbed(DnACrossAttention(C, H))
    probes, ctx = torch.randn(2, 3, C), torch.randn(2, 8, C)
    assert_close_as(m(probes, ctx), reference_dna(m, probes, ctx), ulps=REORDERED)


class _LoRALinear(torch.nn.Linear):
    """A LoRA-style subclass: the weight alone is not what the layer computes."""

    def __init__(self, base: torch.nn.Linear) -> None:
        super().__init__(base.in_features, base.out_features)
        self.load_state_dict(base.state_dict())
        self.down = torch.nn.Linear(base.in_features, 2, bias=False)
        self.up = torch.nn.Linear(2, base.out_features, bias=False)

    def forward(self, x):
        return super().forward(x) + self.up(self.down(x))


@pytest.mark.parametrize('cross', [False, True])
def test_fast_path_does_not_bypass_wrapped_or_hooked_projections(cross: bool) -> None:
    """A LoRA-style subclass or a forward hook on a projection is called on both routes (fast
    == eager, and both differ from the unwrapped)."""
    cls = DnACrossAttention if cross else DnAAttention
    m = _perturbed(cls(C, H))
    x, ctx = torch.randn(2, 5, C), torch.randn(2, 7, C)
    args = (x, ctx) if cross else (x,)
    plain = m(*args)
    m.q_neg, m.qkv = _LoRALinear(m.q_neg), _LoRALinear(m.qkv)
    for lora in (m.q_neg, m.qkv):
        torch.nn.init.normal_(lora.up.weight)
    m.v_neg.register_forward_hook(lambda mod, inp, out: 2 * out)
    outs = []
    for fused in (True, False):
        m.fused_attn = fused
        outs.append(m(*args))
    assert_close_as(outs[0], outs[1], ulps=REORDERED)
    assert not torch.allclose(outs[0], plain, atol=1e-3)


def test_diff_matches_timm_reference() -> None:
    from timm.layers.diff_attention import DiffAttention as TimmDiff

    ours = DiffAttention(C, H, layer_index=3).eval()
    theirs = TimmDiff(C, H, qkv_bias=True, depth=3).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    x = torch.randn(2, 7, C)
    for fused in (True, False):
        ours.fused_attn = fused
        assert_close_as(ours(x), theirs(x), ulps=REORDERED)
    assert math.isclose(ours.lambda_init, 0.8 - 0.6 * math.exp(-0.9))


def test_cog_matches_formula_and_builder_keeps_softmax_at_the_ends() -> None:
    m = CogAttention(C, H).eval()
    x = torch.randn(2, 6, C)
    assert_close_as(m(x), reference_cog(m, x), ulps=REORDERED)
    kinds = [type(build_attention('cog', C, H, layer_index=i, num_layers=4)).__name__ for i in range(4)]
    assert kinds == ['SoftmaxAttention', 'CogAttention', 'CogAttention', 'SoftmaxAttention']
    every = build_attention(dict(type='cog', softmax_first_last=False), C, H, 0, 4)
    assert isinstance(every, CogAttention)
    diff = build_attention('diff', C, H, layer_index=5, num_layers=12)
    assert diff.layer_index == 5
    with pytest.raises(ValueError, match='attention type'):
        build_attention('linear', C, H)


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
@pytest.mark.parametrize('fused', [True, False])
def test_autocast_with_large_logits_is_finite(dtype, fused) -> None:
    m = DnAAttention(64, 2, fused_attn=fused)
    with torch.no_grad():  # q·k / sqrt(d) of magnitude ~50
        m.qkv.weight.mul_(20)
        m.q_neg.weight.mul_(20)
    x = torch.randn(2, 16, 64, requires_grad=True)
    with torch.autocast('cpu', dtype=dtype):
        y, maps = m(x, return_attn=True) if not fused else (m(x), {})
        logits = (
            m.split_heads(m.qkv(x)[..., :64]) @ m.split_heads(m.qkv(x)[..., 64:128]).transpose(-1, -2)
        ) * m.scale
    assert logits.abs().max() > 50
    assert torch.isfinite(y).all()
    y.float().sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize('scope', ['mmaction', 'mmdet'])
def test_registry_builds_from_both_scopes(scope) -> None:
    import importlib

    registry = importlib.import_module(f'{scope}.registry').MODELS
    for name in ('DnAAttention', 'DnACrossAttention', 'SoftmaxAttention', 'DiffAttention', 'CogAttention'):
        m = registry.build(dict(type=name, embed_dims=C, num_heads=H))
        assert type(m).__name__ == name
    m = registry.build(dict(type='DnAAttention', embed_dims=C, num_heads=H, variant='QV±'))
    assert m.variant == 'q_vpm' and m.q_neg is None


@pytest.mark.parametrize(
    'variant,millions',
    [('qpm_vpm', 100.7), ('qpm_v', 93.6), ('q_vpm', 93.6), ('apm_alpha', 86.6), ('apm', 86.6)],
)
def test_timm_vit_b_parameter_counts(variant, millions) -> None:
    """The paper's parameter table (ViT-B/16, 224², 1000 classes); built on the meta device."""
    import timm

    with torch.device('meta'):
        model = timm.create_model('dna_vit_base_patch16_224', attn_cfg=dict(variant=variant))
    assert abs(sum(p.numel() for p in model.parameters()) / 1e6 - millions) < 0.1
    assert all(isinstance(b.attn, DnAAttention) and b.attn.variant == variant for b in model.blocks)


def test_usable_as_timm_attn_layer() -> None:
    from timm.models.vision_transformer import VisionTransformer

    vit = VisionTransformer(
        img_size=32, patch_size=8, embed_dim=C, depth=2, num_heads=H, num_classes=3, attn_layer=DnAAttention
    )
    assert isinstance(vit.blocks[1].attn, DnAAttention)
    assert vit(torch.randn(2, 3, 32, 32)).shape == (2, 3)


def test_cross_attention_with_separate_values_matches_formula() -> None:
    """Keys from ``context``, values from ``value`` (mmcv's key / value inputs)."""
    m = _perturbed(DnACrossAttention(C, H))
    probes, keys, vals = torch.randn(2, 3, C), torch.randn(2, 8, C), torch.randn(2, 8, C)
    ref = reference_dna(m, probes, keys, val=vals)
    for fused in (True, False):
        m.fused_attn = fused
        assert_close_as(m(probes, keys, value=vals), ref, ulps=REORDERED)
    assert not torch.allclose(m(probes, keys).double(), ref, atol=1e-3)
    with pytest.raises(ValueError, match='value has 7 tokens'):
        m(probes, keys, value=vals[:, :7])


@pytest.mark.parametrize('cls', [SoftmaxAttention, DnAAttention, DiffAttention, CogAttention])
def test_float64_stays_float64(cls) -> None:
    m = _perturbed(cls(C, H)).double()
    x = torch.randn(2, 6, C, dtype=torch.float64)
    y, maps = m(x, return_attn=True)
    assert y.dtype == torch.float64 and all(a.dtype == torch.float64 for a in maps.values())
    if cls is DnAAttention:  # fp32 rounding would leave ~1e-7; fp64 agrees to ~1e-15
        assert_close_as(y, reference_dna(m, x), ulps=REORDERED)
    m.fused_attn = True
    assert_close_as(m(x), y, ulps=REORDERED)


def test_diff_official_heads_match_timm_with_half_the_heads() -> None:
    """``diff_heads='official'``: H/2 heads of width 2d, the Differential Transformer's code
    (= timm's DiffAttention(num_heads=H/2)); same parameter count as 'paper'."""
    from timm.layers.diff_attention import DiffAttention as TimmDiff

    ours = DiffAttention(C, H, layer_index=2, diff_heads='official').eval()
    theirs = TimmDiff(C, H // 2, qkv_bias=True, depth=2).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    paper = DiffAttention(C, H, layer_index=2)
    assert (ours.num_heads, ours.head_dim, ours.lambda_q1.numel()) == (H // 2, 2 * C // H, C // H)
    assert sum(p.numel() for p in paper.parameters()) < sum(p.numel() for p in ours.parameters())
    x = torch.randn(2, 7, C)
    for fused in (True, False):
        ours.fused_attn = fused
        assert_close_as(ours(x), theirs(x), ulps=REORDERED)
    with pytest.raises(ValueError, match='even num_heads'):
        DiffAttention(C, 1, diff_heads='official')
    with pytest.raises(ValueError, match="'paper' or 'official'"):
        DiffAttention(C, H, diff_heads='unilm')


class _Calls(torch.nn.Module):
    """A model around one attention: x (and a key mask), as timm's blocks call it."""

    def __init__(self, attn: torch.nn.Module) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return self.attn(x) + self.attn(x, attn_mask=keep)


@pytest.mark.parametrize('fused', [True, False])
@pytest.mark.parametrize(
    'cls',
    [
        SoftmaxAttention,
        DnAAttention,
        functools.partial(DnAAttention, kernel='sdpa_2h'),
        functools.partial(DnAAttention, kernel='sdpa_stacked'),
        DiffAttention,
        CogAttention,
    ],
)
def test_every_member_traces_with_torch_fx(cls, fused: bool) -> None:
    """Symbolic tracing (timm's feature extraction, torchvision's create_feature_extractor)
    follows every member, with and without a mask: the branches on masks are FX leaves."""
    import torch.fx

    model = _Calls(_perturbed(cls(C, H, fused_attn=fused)))
    graph = torch.fx.GraphModule(model, torch.fx.Tracer().trace(model))
    x, keep = torch.randn(2, 7, C), torch.ones(2, 1, 1, 7, dtype=torch.bool)
    keep[1, ..., -2:] = False
    assert_close_as(graph(x, keep), model(x, keep), ulps=ROUNDING)


# -- both branches in one SDPA call: over 2H heads (kernel='sdpa_2h'), over 2M queries ('sdpa_stacked')
def _pair_inputs(kind: str, m_tokens: int, n_tokens: int) -> dict:
    """The additive terms a host hands DnA: none, one bias for both branches, a (b_pos, b_neg)
    pair, a bool / float exclusion mask (shared over the heads, or one per head), and a bias
    pair with a mask on top (ViTDet's relative positions in a padded window)."""
    keep = torch.ones(m_tokens, n_tokens, dtype=torch.bool)
    keep[:, -2:] = False
    bias = lambda: torch.randn(2, H, m_tokens, n_tokens, dtype=torch.float64) * 3  # noqa: E731
    return {
        'none': {},
        'bias': dict(attn_bias=bias()),
        'bias pair': dict(attn_bias=(bias(), bias())),
        'half pair': dict(attn_bias=(bias(), None)),
        'bool mask': dict(attn_mask=keep),
        'float mask per head': dict(attn_mask=torch.randn(1, H, m_tokens, n_tokens, dtype=torch.float64)),
        'pair + mask': dict(
            attn_bias=(bias(), bias()), attn_mask=torch.zeros(m_tokens, n_tokens).masked_fill(~keep, -1e4)
        ),
    }[kind]


PAIR_KINDS = ['none', 'bias', 'bias pair', 'half pair', 'bool mask', 'float mask per head', 'pair + mask']


ONE_CALL = ['sdpa_2h', 'sdpa_stacked']


@pytest.mark.parametrize('kind', PAIR_KINDS)
@pytest.mark.parametrize('variant', sorted(DNA_VARIANTS))
@pytest.mark.parametrize('cross', [False, True])
@pytest.mark.parametrize('kernel', ONE_CALL)
def test_one_call_is_exact_in_float64(kernel: str, cross: bool, variant: str, kind: str) -> None:
    """``kernel='sdpa_2h'``: ``SDPA([Q+, -Q-], [K, K], [V+, α V-])`` halves added;
    ``'sdpa_stacked'``: ``SDPA([Q+; -Q-], K, [V+, V-])``, its diagonal blocks: each equals the eager
    formula (explicit softmax and softmin maps) to float64 rounding, output and every gradient,
    for every variant, self and cross, with every kind of bias and mask."""
    cls = DnACrossAttention if cross else DnAAttention
    one = _perturbed(cls(C, H, variant=variant, kernel=kernel)).double()
    x = torch.randn(2, 5, C, dtype=torch.float64, requires_grad=True)
    ctx = torch.randn(2, 7, C, dtype=torch.float64, requires_grad=True) if cross else None
    extra = _pair_inputs(kind, 5, 7 if cross else 5)
    if kind == 'half pair' and variant in ('apm', 'apm_alpha', 'q_vpm'):
        extra = {}  # a one-sided pair is the same either way; keep the case about the variants
    results = []
    for eager in (False, True):
        one.zero_grad()
        x.grad = None
        y = one(x, ctx, return_attn=eager, **extra) if cross else one(x, return_attn=eager, **extra)
        y = y[0] if eager else y
        y.pow(2).sum().backward()
        results.append([y.detach(), x.grad.clone()] + [p.grad.clone() for p in one.parameters()])
    for i, (fast, ref) in enumerate(zip(*results, strict=True)):  # the output, then gradients
        assert_close_as(fast, ref, ulps=SUMMED if i else REORDERED)
    mask = extra.get('attn_mask')
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float('-inf'))
    ref = reference_dna(one, x.detach(), None if ctx is None else ctx.detach(), extra.get('attn_bias'), mask)
    y = one(x.detach(), ctx.detach(), **extra) if cross else one(x.detach(), **extra)
    assert_close_as(y, ref, ulps=REORDERED)


@pytest.mark.parametrize('kernel', ONE_CALL)
def test_one_call_equals_two_calls_in_float32_and_under_autocast(kernel: str) -> None:
    """A one-call route computes what the two-call route does, in float32 and bf16 autocast."""
    two = _perturbed(DnAAttention(C, H))
    one = DnAAttention(C, H, kernel=kernel).eval()
    one.load_state_dict(two.state_dict())
    x = torch.randn(3, 9, C)
    bias = (torch.randn(1, H, 9, 9), torch.randn(1, H, 9, 9))
    assert_close_as(one(x, attn_bias=bias), two(x, attn_bias=bias), ulps=REORDERED)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        y1, y2 = one(x, attn_bias=bias), two(x, attn_bias=bias)
    assert y1.dtype == y2.dtype == torch.bfloat16
    assert_close_as(y1, y2, ulps=ROUNDING)
    assert f"kernel='{kernel}'" in repr(one)


@pytest.mark.parametrize('kernel', ONE_CALL)
def test_one_call_drops_each_branch_map_independently(kernel: str) -> None:
    """Attention dropout on a one-call route acts on each branch's map (the 2H maps, the 2M
    rows; as two calls do): training outputs vary, their mean is the dropout-free output."""
    torch.manual_seed(0)
    m = _perturbed(DnAAttention(C, H, attn_drop=0.3, kernel=kernel))
    x = torch.randn(1, 6, C)
    clean = m(x)
    m.train()
    runs = torch.stack([m(x) for _ in range(2000)])
    assert runs.std(0).mean() > 1e-3
    torch.testing.assert_close(runs.mean(0), clean, atol=0.02, rtol=0.0)
    # the negative branch's half is dropped too: with α V- alone, training output still varies
    with torch.no_grad():
        m.qkv.weight[2 * C :].zero_()
        m.qkv.bias[2 * C :].zero_()
    assert torch.stack([m(x) for _ in range(20)]).std(0).mean() > 1e-4


def test_an_argument_a_member_does_not_take_is_named_with_what_it_takes() -> None:
    """Built unchecked (a tool's build, without the config check): a misspelt argument names the
    closest one, one no member of its kind has (a variant of softmax) lists what it takes."""
    with pytest.raises(
        ConfigError, match=r"^DnAAttention takes no argument 'varaint'; did you mean 'variant'\?$"
    ):
        build_attention(dict(type='dna', varaint='apm'), C, H)
    with pytest.raises(
        ConfigError, match=r"^SoftmaxAttention takes no argument 'variant'; it takes .*embed_dims"
    ):
        build_attention('softmax:apm', C, H)
