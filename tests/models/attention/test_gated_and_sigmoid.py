"""Two members of issue #61 and the gate every member takes by one setting.

* ``gated`` (:class:`GatedAttention`) is timm's ``Attention(gated=True)``: its state dict loads
  strictly, the output and every gradient agree;
* ``gated=True`` on any member adds ``gate.weight`` / ``gate.bias`` (timm's keys) and multiplies
  the merged heads by ``sigmoid(gate(x))`` before ``proj``; without it the module is unchanged;
* ``sigmoid`` (:class:`SigmoidAttention`) is ``sigmoid(s Q Kᵀ − log n + b) V``, written out in
  float64 below, with and without masks (a masked key: weight 0, ``n`` all the keys);
* the three build in every host this folder reaches (timm's ViT and ``nn.TransformerEncoderLayer``
  through ``swap_attention``, ``DnATimeSformer``, ``ViTDet``), forward and backward finite, every
  gate reached by the gradient."""

from __future__ import annotations

import math

import pytest
import timm
import torch
import torch.nn.functional as F
from conftest import tiny_backbone
from mmengine.registry import MODELS
from tolerance import REORDERED, SUMMED, assert_close_as

import dna_mm  # noqa: F401  (registers the family and the hosts)
from dna_mm.models.adapters import swap_attention
from dna_mm.models.attention import (
    AttentionBase,
    DnAAttention,
    GatedAttention,
    GatedCrossAttention,
    SigmoidAttention,
    SigmoidCrossAttention,
    attention_types,
    build_attention,
)

C, H = 32, 4
D = C // H


def _heads(t: torch.Tensor) -> torch.Tensor:
    b, n, _ = t.shape
    return t.reshape(b, n, H, D).transpose(1, 2)


def _merged(t: torch.Tensor) -> torch.Tensor:
    b, _, n, _ = t.shape
    return t.transpose(1, 2).reshape(b, n, C)


# -- gated: timm's Attention(gated=True) -----------------------------------------------------------
@pytest.mark.parametrize('fused', [True, False])
def test_gated_is_timms_gated_attention(fused: bool) -> None:
    torch.manual_seed(0)
    ref = timm.layers.Attention(C, H, qkv_bias=True, gated=True)
    ref.fused_attn = fused
    ours = GatedAttention(C, H, fused_attn=fused)
    assert list(ours.state_dict()) == list(ref.state_dict())  # qkv, gate, proj: timm's keys and order
    ours.load_state_dict(ref.state_dict(), strict=True)
    for name, p in ours.state_dict().items():
        assert torch.equal(p, ref.state_dict()[name])
    x = torch.randn(2, 9, C, requires_grad=True)
    outs, grads = [], []
    for module in (ref, ours):
        x.grad = None
        y = module(x)
        y.square().sum().backward()
        outs.append(y.detach())
        grads.append({'x': x.grad.clone(), **{n: p.grad.clone() for n, p in module.named_parameters()}})
    assert_close_as(outs[1], outs[0], ulps=REORDERED)
    assert_close_as(grads[1], grads[0], ulps=SUMMED, what='grad')


def test_gated_cross_form_gates_by_the_queries() -> None:
    m = GatedCrossAttention(C, H).double()
    q, ctx = torch.randn(2, 3, C, dtype=torch.float64), torch.randn(2, 7, C, dtype=torch.float64)
    with torch.no_grad():
        m.proj.weight.copy_(torch.eye(C))
        m.proj.bias.zero_()
        plain = GatedAttention(C, H, gated=False).double()
        plain.load_state_dict(m.state_dict(), strict=False)
        want = plain(q, context=ctx) * torch.sigmoid(F.linear(q, m.gate.weight, m.gate.bias))
        assert_close_as(m(q, ctx), want, ulps=REORDERED)


# -- gated=True on any member ----------------------------------------------------------------------
UNGATED_KEYS = {  # the keys of earlier releases
    'DnAAttention': [
        'alpha', 'qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias',
        'q_neg.weight', 'q_neg.bias', 'v_neg.weight', 'v_neg.bias',
    ],
    'SoftmaxAttention': ['qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias'],
}  # fmt: skip


@pytest.mark.parametrize('name', sorted(n for n in attention_types() if 'Cross' not in n))
def test_gate_false_changes_nothing_and_true_adds_timms_keys(name: str) -> None:
    """Every registered member: ``gated=False`` (default) has no gate, the same keys and, from
    one seed, the same values as before; ``gated=True`` adds ``gate.weight`` / ``gate.bias``
    (none with ``qkv_bias=False``) and nothing else."""
    torch.manual_seed(0)
    off = build_attention(dict(type=name, gated=False), C, H)
    assert not off.gated and off.gate is None
    if name == 'GatedAttention':  # gated by default; gated=False is softmax's module
        assert list(off.state_dict()) == UNGATED_KEYS['SoftmaxAttention']
        return
    torch.manual_seed(0)
    default = build_attention(name, C, H)
    assert list(default.state_dict()) == list(off.state_dict())
    if name in UNGATED_KEYS:
        assert list(default.state_dict()) == UNGATED_KEYS[name]
    for key, value in default.state_dict().items():
        assert torch.equal(value, off.state_dict()[key]), key
    on = build_attention(dict(type=name, gated=True), C, H)
    assert set(on.state_dict()) - set(default.state_dict()) == {'gate.weight', 'gate.bias'}
    assert on.own_start[-1] == 'gate.' and 'gated=True' in repr(on)
    no_bias = build_attention(dict(type=name, gated=True, qkv_bias=False), C, H)
    assert 'gate.weight' in no_bias.state_dict() and 'gate.bias' not in no_bias.state_dict()


def test_a_layer_rule_keeps_the_gate() -> None:
    """Cog's first and last layer are softmax: gated, as the config says, like its middle ones."""
    cfg = dict(type='CogAttention', gated=True)
    layers = [build_attention(cfg, C, H, layer_index=i, num_layers=3) for i in range(3)]
    assert [type(m).__name__ for m in layers] == ['SoftmaxAttention', 'CogAttention', 'SoftmaxAttention']
    assert all(m.gated for m in layers)


@pytest.mark.parametrize('variant', ['qpm_vpm', 'apm'])
def test_gated_dna_is_dna_times_the_gate(variant: str) -> None:
    """``proj`` set to the identity: gated DnA's output is DnA's heads, merged, times
    ``sigmoid(x W_gᵀ + b_g)`` (float64, the gate written out); the gradient reaches the gate."""
    torch.manual_seed(0)
    gated = DnAAttention(C, H, variant=variant, gated=True).double()
    plain = DnAAttention(C, H, variant=variant).double()
    with torch.no_grad():
        for m in (gated, plain):
            m.proj.weight.copy_(torch.eye(C))
            m.proj.bias.zero_()
        if gated.alpha is not None:
            gated.alpha.uniform_(-1.0, 1.0)
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if not k.startswith('gate.')})
    x = torch.randn(2, 6, C, dtype=torch.float64)
    gate = 1.0 / (1.0 + torch.exp(-(x @ gated.gate.weight.T + gated.gate.bias)))
    assert_close_as(gated(x), plain(x) * gate, ulps=REORDERED)
    gated(x).sum().backward()
    assert gated.gate.weight.grad.abs().sum() > 0


def test_a_gated_member_loads_softmax_weights_and_starts_its_gate() -> None:
    """A softmax file (no gate) into a gated DnA through ``swap_attention``: the gate keeps its
    start (``own_start``), the rest is the host's."""
    model = timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=8, num_classes=3)
    qkv = model.blocks[0].attn.qkv.weight.detach().clone()
    swap_attention(model, dict(type='DnAAttention', gated=True))
    member = model.blocks[0].attn
    assert isinstance(member, DnAAttention) and member.gated
    assert torch.equal(member.qkv.weight, qkv)


@pytest.mark.parametrize('name', ['softmax', 'dna', 'diff'])
def test_a_gated_member_takes_its_ungated_checkpoint(name: str) -> None:
    """A member's own file, saved without a gate, fitted to the gated member: every tensor is
    kept and only the gate, which the member starts itself, is missing (Diff has a group of its
    own, ``lambda_*``, that the file does have)."""
    from dna_mm.models.fitting import adapt_attentions

    torch.manual_seed(0)
    plain = build_attention(name, embed_dims=16, num_heads=2)
    gated = build_attention(dict(type=type(plain).__name__, gated=True), embed_dims=16, num_heads=2)
    sd, generated = adapt_attentions(gated, plain.state_dict())
    assert generated == [] and sd.keys() == plain.state_dict().keys()
    missing, unexpected = gated.load_state_dict(sd, strict=False)
    assert unexpected == [] and sorted(missing) == ['gate.bias', 'gate.weight']


# -- sigmoid ---------------------------------------------------------------------------------------
def reference_sigmoid(m, x, ctx=None, keep=None, mask=None, bias=None):
    """``proj(sigmoid(s Q Kᵀ − log n + b + m) V)`` in float64: ``n`` the keys, ``keep`` a bool
    mask (False: the weight is 0), ``mask`` an additive one, ``b`` a bias inside the logits."""
    x = x.double()
    ctx = x if ctx is None else ctx.double()
    w, b = m.qkv.weight.double(), m.qkv.bias.double()
    q = _heads(x @ w[:C].T + b[:C])
    k = _heads(ctx @ w[C : 2 * C].T + b[C : 2 * C])
    v = _heads(ctx @ w[2 * C :].T + b[2 * C :])
    n = ctx.shape[1]
    z = (q @ k.transpose(-1, -2)) / math.sqrt(D) - math.log(n)
    if bias is not None:
        z = z + bias.double()
    if mask is not None:
        z = z + mask.double()
    weights = 1.0 / (1.0 + torch.exp(-z))
    if keep is not None:
        weights = torch.where(keep, weights, torch.zeros((), dtype=torch.float64))
    return _merged(weights @ v) @ m.proj.weight.double().T + m.proj.bias.double(), weights


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('kind', ['none', 'bool', '-inf', 'bias'])
def test_sigmoid_is_the_formula(kind: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    m = SigmoidAttention(C, H).to(dtype)
    x = torch.randn(2, 7, C, dtype=dtype)
    keep = torch.ones(2, 1, 7, 7, dtype=torch.bool)
    keep[1, ..., 4:] = False  # the second sample's last three keys
    args, ref = {}, {}
    if kind == 'bool':
        args, ref = dict(attn_mask=keep), dict(keep=keep)
    elif kind == '-inf':
        args = dict(attn_mask=torch.zeros(2, 1, 7, 7, dtype=dtype).masked_fill(~keep, float('-inf')))
        ref = dict(keep=keep)
    elif kind == 'bias':
        bias = torch.randn(2, H, 7, 7, dtype=dtype)
        args, ref = dict(attn_bias=bias), dict(bias=bias)
    want, want_w = reference_sigmoid(m, x, **ref)
    got, maps = m(x, return_attn=True, **args)
    assert_close_as(got, want, ulps=REORDERED)
    assert_close_as(maps['attn'], want_w, ulps=REORDERED)
    if kind in ('bool', '-inf'):
        assert torch.equal(maps['attn'][1, ..., 4:], torch.zeros_like(maps['attn'][1, ..., 4:]))
        assert maps['attn'][0].sum(-1).max() < 7  # not normalised: each weight its own sigmoid


def test_sigmoid_masked_keys_change_nothing_and_get_no_gradient() -> None:
    """A masked key's token changes no output and gets no gradient (sigmoid(−inf) = 0 exactly);
    a row with every key masked is 0, not NaN; Swin's −100 is a weight below e^-100."""
    m = SigmoidAttention(C, H)
    x = torch.randn(2, 6, C, requires_grad=True)
    keep = torch.tensor([True, True, True, True, False, False])
    m(x, attn_mask=keep).sum().backward()
    assert torch.isfinite(x.grad).all()
    x2 = x.detach().clone()
    x2[:, 4:] = torch.randn(2, 2, C) * 5
    assert_close_as(m(x2, attn_mask=keep)[:, :4], m(x.detach(), attn_mask=keep)[:, :4], ulps=REORDERED)
    _, maps = m(x.detach(), attn_mask=torch.zeros(6, 6).masked_fill(~keep, -100.0), return_attn=True)
    assert maps['attn'][..., ~keep].max() < math.exp(-90)
    nothing = torch.zeros(6, dtype=torch.bool)
    out = m(x.detach(), attn_mask=nothing)
    assert torch.isfinite(out).all()
    assert_close_as(out, m.proj.bias.expand_as(out), ulps=REORDERED)


def test_sigmoid_cross_form_counts_the_context_tokens_and_takes_a_fixed_bias() -> None:
    torch.manual_seed(0)
    m = SigmoidCrossAttention(C, H).double()
    q, ctx = torch.randn(2, 3, C, dtype=torch.float64), torch.randn(2, 11, C, dtype=torch.float64)
    assert_close_as(m(q, ctx), reference_sigmoid(m, q, ctx)[0], ulps=REORDERED)
    fixed = SigmoidAttention(C, H, sigmoid_bias=-10.0).double()
    fixed.load_state_dict(m.state_dict())
    x = torch.randn(2, 5, C, dtype=torch.float64)
    shift = torch.full((5, 5), math.log(5) - 10.0, dtype=torch.float64)  # -10 = -log 5 + shift
    assert_close_as(fixed(x), reference_sigmoid(m, x, mask=shift)[0], ulps=REORDERED)
    with pytest.raises(ValueError, match='sigmoid_bias must be a finite number'):
        SigmoidAttention(C, H, sigmoid_bias=float('inf'))


def test_the_members_state_their_maps() -> None:
    assert SigmoidAttention.map_names == ('attn',) and not SigmoidAttention.signed_maps
    assert not SigmoidAttention.normalised_maps and SigmoidAttention.takes_position_bias
    assert GatedAttention.normalised_maps and GatedAttention.map_names == ('attn',)
    assert (GatedAttention.label, SigmoidAttention.label) == ('gated softmax', 'sigmoid')
    assert SigmoidCrossAttention.own_short_name() is None and GatedCrossAttention.own_short_name() is None


# -- in every host of this folder ------------------------------------------------------------------
def _timm_vit(cfg):
    model = timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=8, num_classes=3)
    swap_attention(model, cfg)
    return model, torch.randn(2, 3, 32, 32)


def _torch_layer(cfg):
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    swap_attention(layer, cfg)
    return layer, torch.randn(2, 5, 32)


def _timesformer(cfg):
    model = MODELS.build(tiny_backbone('DnATimeSformer', attn_cfg=cfg))
    with torch.no_grad():  # MMAction2 starts temporal_fc at zero: no gradient would reach a temporal step
        for name, p in model.named_parameters():
            if 'temporal_fc' in name:
                p.normal_(std=0.2)
    return model, torch.randn(2, 3, 4, 32, 32)


def _vitdet(cfg):
    from dna_mm.models.backbones.vitdet import ViTDet

    model = ViTDet(**{k: v for k, v in tiny_backbone('ViTDet', attn_cfg=cfg).items() if k != 'type'})
    return model, torch.randn(1, 3, 32, 32)


HOSTS = {'timm ViT': _timm_vit, 'TransformerEncoderLayer': _torch_layer}
HOSTS.update({'DnATimeSformer': _timesformer, 'ViTDet': _vitdet})
CONFIGS = {'gated': 'gated', 'sigmoid': 'sigmoid', 'gated DnA': dict(type='DnAAttention', gated=True)}


@pytest.mark.parametrize('host', list(HOSTS))
@pytest.mark.parametrize('attn', list(CONFIGS))
def test_builds_and_trains_in_every_host(attn: str, host: str) -> None:
    torch.manual_seed(0)
    model, x = HOSTS[host](CONFIGS[attn])
    members = [m for m in model.modules() if isinstance(m, AttentionBase)]
    want = {'gated': GatedAttention, 'sigmoid': SigmoidAttention, 'gated DnA': DnAAttention}[attn]
    assert members and all(type(m) is want for m in members)
    out = model(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    assert torch.isfinite(out).all()
    out.float().square().mean().backward()
    for m in members:
        assert m.qkv.weight.grad is not None and torch.isfinite(m.qkv.weight.grad).all()
        if m.gated:  # the host's form applies the gate: it is in the graph
            assert m.gate.weight.grad is not None and m.gate.weight.grad.abs().sum() > 0
    assert all(m.gated for m in members) == (attn != 'sigmoid')


# -- traced and compiled ----------------------------------------------------------------------------
class _Calls(torch.nn.Module):
    """The member called with a mask, as a host calls it (FX traces the mask as an input)."""

    def __init__(self, attn: torch.nn.Module) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return self.attn(x, attn_mask=keep)


@pytest.mark.parametrize('attn', list(CONFIGS))
def test_traced_and_compiled_as_one_graph(attn: str) -> None:
    """FX (the gate's check and sigmoid's weights are leaves) and ``torch.compile(fullgraph=True)``
    (one graph, no break) give the eager output."""
    import torch._dynamo
    import torch.fx

    torch.manual_seed(0)
    model = _Calls(build_attention(CONFIGS[attn], C, H).eval())
    x, keep = torch.randn(2, 7, C), torch.ones(2, 1, 1, 7, dtype=torch.bool)
    keep[1, ..., -2:] = False
    want = model(x, keep)
    graph = torch.fx.GraphModule(model, torch.fx.Tracer().trace(model))
    assert_close_as(graph(x, keep), want, ulps=REORDERED)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x, keep)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    assert_close_as(torch.compile(model, backend='eager', fullgraph=True)(x, keep), want, ulps=REORDERED)
    torch._dynamo.reset()
