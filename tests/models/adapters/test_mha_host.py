"""torch ``nn.MultiheadAttention`` as a ``with_attention`` host: the swapped module against the
real one (self and cross attention, both layouts and unbatched, masks of each kind,
``need_weights``), masks reaching both DnA branches, refusals by name, torchvision's
``vit_b_16``. (The host's checkpoint loading, torchvision's ``VisionTransformer`` and
``nn.TransformerEncoder`` run through the shared host tests of ``test_with_attention.py``.)"""

from __future__ import annotations

import copy

import pytest
import torch
from tolerance import REORDERED, ROUNDING, assert_close_as
from torch import nn

from dna_mm.errors import UnsupportedModelError
from dna_mm.models import DnAAttention, SoftmaxAttention
from dna_mm.models.adapters import swap_attention

E, H, N, L, S = 32, 4, 2, 5, 7


def _model(batch_first: bool, bias: bool = True, dropout: float = 0.0, **kwargs) -> nn.Module:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, H, dropout=dropout, bias=bias, batch_first=batch_first, **kwargs)
    if bias:
        with torch.no_grad():  # zero-initialised in the host
            mha.in_proj_bias.normal_(std=0.5)
            mha.out_proj.bias.normal_(std=0.5)
    return nn.ModuleDict(dict(attn=mha)).eval()


def _swapped(model: nn.Module, attn_cfg: str) -> nn.Module:
    model = copy.deepcopy(model)
    assert swap_attention(model, attn_cfg) == ['attn']
    return model.eval()


def _masks(m: int, s: int, batched: bool) -> dict[str, dict[str, torch.Tensor]]:
    """Each kind of mask ``nn.MultiheadAttention`` takes, for ``m`` queries and ``s`` keys; every
    query keeps at least one key (a row with none is NaN in the host too)."""
    g = torch.Generator().manual_seed(1)
    keep = torch.rand(m, s, generator=g) < 0.6
    keep[:, 0] = True
    padding = torch.zeros(N, s, dtype=torch.bool)
    padding[1, -2:] = True
    float_padding = torch.zeros(N, s).masked_fill_(padding, -1e4)
    float_padding[0] = torch.randn(s, generator=g)
    cases = {
        'none': {},
        'bool attn_mask [L, S]': dict(attn_mask=~keep),
        'float attn_mask [L, S]': dict(attn_mask=torch.randn(m, s, generator=g)),
        'float attn_mask [N·H, L, S]': dict(attn_mask=torch.randn(N * H, m, s, generator=g)),
        'bool key_padding_mask': dict(key_padding_mask=padding),
        'float key_padding_mask': dict(key_padding_mask=float_padding),
        'bool attn_mask + key_padding_mask': dict(attn_mask=~keep, key_padding_mask=padding),
    }
    if m == s:
        causal = torch.ones(m, s, dtype=torch.bool).triu_(1)  # True = not allowed
        cases['causal (attn_mask + is_causal)'] = dict(attn_mask=causal, is_causal=True)
    if not batched:
        cases = {k: v for k, v in cases.items() if 'N·H' not in k and 'key_padding' not in k}
    return cases


def _inputs(mode: str, batch_first: bool, batched: bool = True, kdim: int = E, vdim: int = E):
    g = torch.Generator().manual_seed(2)

    def shape(n: int, width: int = E) -> tuple[int, ...]:
        if not batched:
            return n, width
        return (N, n, width) if batch_first else (n, N, width)

    x = torch.randn(*shape(L), generator=g)
    if mode == 'self':
        return x, x, x, L
    memory = torch.randn(*shape(S, kdim), generator=g)
    value = memory if mode == 'cross' else torch.randn(*shape(S, vdim), generator=g)
    return x, memory, value, S


@pytest.mark.parametrize('mode', ['self', 'cross', 'cross, separate value'])
@pytest.mark.parametrize('layout', ['sequence-first', 'batch_first', 'unbatched'])
def test_the_swapped_module_equals_nn_multihead_attention(mode: str, layout: str) -> None:
    """Softmax inside: the host's output and weights (averaged and per head) to round-off with every
    mask kind; DnA initialised from it: output within 1e-3 relative, and its positive map is the
    host's map."""
    batch_first, batched = layout == 'batch_first', layout != 'unbatched'
    host = _model(batch_first)
    soft, dna = _swapped(host, 'softmax'), _swapped(host, 'dna')
    assert isinstance(soft.attn, SoftmaxAttention) and isinstance(dna.attn, DnAAttention)
    q, k, v, s = _inputs(mode, batch_first, batched)
    for name, masks in _masks(L, s, batched).items():
        with torch.no_grad():
            for average in (True, False):
                ref, ref_w = host.attn(q, k, v, average_attn_weights=average, **masks)
                out, w = soft.attn(q, k, v, average_attn_weights=average, **masks)
                assert out.shape == ref.shape and w.shape == ref_w.shape, name
                assert_close_as(out, ref, ulps=REORDERED, what=name)
                assert_close_as(w, ref_w, ulps=REORDERED, what=name)
                out, w = dna.attn(q, k, v, average_attn_weights=average, **masks)
                assert ((out - ref).norm() / ref.norm()).item() < 1e-3, name
                assert_close_as(w, ref_w, ulps=REORDERED, what=name)
            ref, none = host.attn(q, k, v, need_weights=False, **masks)
            assert none is None
            out, w = soft.attn(q, k, v, need_weights=False, **masks)  # the fused route
            assert w is None
            assert_close_as(out, ref, ulps=REORDERED, what=name)


@pytest.mark.parametrize(
    'layout,mode,kdim,vdim',
    [('sequence-first', 'cross, separate value', 24, 20), ('batch_first', 'cross', 24, 24)],
)
def test_separate_projections_kdim_vdim(layout: str, mode: str, kdim: int, vdim: int) -> None:
    """A host with ``kdim`` / ``vdim`` other than ``E`` (separate ``q/k/v_proj_weight``, packed
    ``in_proj_bias``; OpenCLIP's attentional pooler): the same exactness with masks, its state
    dict loads strictly with the negative branch generated (``Q- = 1e-4·Q``, ``V- = -1e-4·V``)."""
    batch_first = layout == 'batch_first'
    host = _model(batch_first, kdim=kdim, vdim=vdim)
    soft, dna = _swapped(host, 'softmax'), _swapped(host, 'dna')
    assert dna.attn.k_proj.in_features == kdim and dna.attn.v_neg.in_features == vdim
    assert_close_as(dna.attn.v_neg.weight, -1e-4 * host.attn.v_proj_weight, ulps=ROUNDING)
    assert_close_as(dna.attn.q_neg.bias, 1e-4 * host.attn.in_proj_bias[:E], ulps=ROUNDING)
    q, k, v, s = _inputs(mode, batch_first, kdim=kdim, vdim=vdim)
    masks = _masks(L, s, batched=True)
    for name in ('none', 'bool attn_mask [L, S]', 'float key_padding_mask'):
        with torch.no_grad():
            ref, ref_w = host.attn(q, k, v, **masks[name])
            out, w = soft.attn(q, k, v, **masks[name])
            assert_close_as(out, ref, ulps=REORDERED, what=name)
            assert_close_as(w, ref_w, ulps=REORDERED, what=name)
            out = dna.attn(q, k, v, need_weights=False, **masks[name])[0]
            assert ((out - ref).norm() / ref.norm()).item() < 1e-3, name
    torch.manual_seed(3)  # other weights, loaded over
    fresh = _swapped(nn.ModuleDict(dict(attn=nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim))), 'dna')
    fresh.load_state_dict(host.state_dict(), strict=True)
    fresh.attn.batch_first = batch_first
    with torch.no_grad():
        assert_close_as(fresh.attn(q, k, v)[0], dna.attn(q, k, v)[0], ulps=ROUNDING)
    with pytest.raises(ValueError, match=f'expected key of width {kdim}'):
        dna.attn(q, q, q)


def test_masks_exclude_keys_from_both_dna_branches() -> None:
    """A key the host's masks exclude (bool ``attn_mask``, bool / float ``key_padding_mask``)
    has weight 0 in the softmax and in the softmin map; a float ``attn_mask`` keeps its
    additive meaning in the positive branch (its map is the host's)."""
    dna = _swapped(_model(batch_first=True), 'dna')
    captured = {}
    attend = dna.attn.attend

    def spy(heads, attn_mask, attn_bias, eager):
        out, maps = attend(heads, attn_mask, attn_bias, True)
        captured.update(maps)
        return out, maps

    dna.attn.attend = spy
    q, k, v, _ = _inputs('cross', batch_first=True)
    masks = _masks(L, S, batched=True)
    for name in ('bool attn_mask [L, S]', 'bool key_padding_mask', 'bool attn_mask + key_padding_mask'):
        case = masks[name]
        excluded = torch.zeros(N, 1, L, S, dtype=torch.bool)
        if 'attn_mask' in case:
            excluded |= case['attn_mask']
        if 'key_padding_mask' in case:
            excluded |= case['key_padding_mask'][:, None, None, :]
        with torch.no_grad():
            dna.attn(q, k, v, need_weights=False, **case)
        for branch in ('pos', 'neg'):
            weights = captured[branch][excluded.expand_as(captured[branch])]
            assert weights.numel() and weights.abs().max() < 1e-30, (name, branch)
            assert captured[branch][~excluded.expand_as(captured[branch])].min() > 0, (name, branch)
    float_pad = masks['float key_padding_mask']['key_padding_mask']  # -1e4 on padded keys
    with torch.no_grad():
        dna.attn(q, k, v, key_padding_mask=float_pad, need_weights=False)
    for branch in ('pos', 'neg'):
        assert captured[branch][1, :, :, -2:].max() < 1e-30, branch


def test_bias_free_host_and_train_mode_dropout() -> None:
    """``bias=False`` maps to a family without biases (the host's state dict loads strictly);
    the host's attention dropout becomes the family's."""
    host = _model(batch_first=False, bias=False, dropout=0.25)
    dna = _swapped(host, 'dna')
    assert dna.attn.qkv.bias is None and dna.attn.proj.bias is None and dna.attn.dropout == 0.25
    fresh = _swapped(_model(batch_first=False, bias=False), 'dna')
    fresh.load_state_dict(host.state_dict(), strict=True)
    q, k, v, _ = _inputs('self', batch_first=False)
    with torch.no_grad():
        assert_close_as(fresh.attn(q, k, v)[0], dna.attn(q, k, v)[0], ulps=ROUNDING)
    dna.train()
    a, b = dna.attn(q, k, v, need_weights=False)[0], dna.attn(q, k, v, need_weights=False)[0]
    assert (a - b).abs().max() > 1e-4  # attention dropout active in training


@pytest.mark.parametrize(
    'kwargs,match',
    [
        (dict(add_bias_kv=True), 'add_bias_kv=True or add_zero_attn=True'),
        (dict(add_zero_attn=True), 'add_bias_kv=True or add_zero_attn=True'),
    ],
)
def test_what_the_family_lacks_is_refused_by_name(kwargs: dict, match: str) -> None:
    model = nn.ModuleDict(dict(ok=nn.MultiheadAttention(E, H), bad=nn.MultiheadAttention(E, H, **kwargs)))
    with pytest.raises(
        UnsupportedModelError, match=rf'torch\.nn\.modules\.activation\.MultiheadAttention: {match}'
    ):
        swap_attention(model, 'dna')
    assert type(model['ok']) is nn.MultiheadAttention  # nothing swapped


def test_is_causal_without_a_mask_is_the_hosts_error() -> None:
    dna = _swapped(_model(batch_first=True), 'dna')
    q, k, v, _ = _inputs('self', batch_first=True)
    with pytest.raises(RuntimeError, match='is_causal'):
        _model(batch_first=True).attn(q, k, v, is_causal=True)
    with pytest.raises(RuntimeError, match='is_causal=True needs attn_mask'):
        dna.attn(q, k, v, is_causal=True)


@pytest.mark.slow
def test_torchvision_vit_b_16() -> None:
    """torchvision's ``vit_b_16`` (random weights, head made non-zero): softmax inside equals it,
    DnA generated from it is within 1e-3 relative."""
    from torchvision.models import vit_b_16

    torch.manual_seed(0)
    vit = vit_b_16(weights=None).eval()
    with torch.no_grad():
        vit.heads.head.weight.normal_(std=0.02)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ref = vit(x)
        soft = copy.deepcopy(vit)
        assert len(swap_attention(soft, 'softmax')) == 12
        assert_close_as(soft.eval()(x), ref, ulps=REORDERED)
        swap_attention(vit, 'dna')
        assert ((vit.eval()(x) - ref).norm() / ref.norm()).item() < 1e-3


class ResidualAttentionBlock(nn.Module):
    """A CLIP-style block (OpenAI CLIP / OpenCLIP name it so): pre-norm, ``nn.MultiheadAttention``
    called with a float causal mask (``-inf`` above the diagonal, as CLIP's text tower)."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(E), attn
        self.register_buffer('attn_mask', torch.full((L, L), float('-inf')).triu_(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [L, N, E]
        y = self.ln_1(x)
        return x + self.attn(y, y, y, need_weights=False, attn_mask=self.attn_mask)[0]


class AttentionalPooler(nn.Module):
    """A CoCa-style pooler (OpenCLIP names it so): learned queries attend to the tokens through
    an ``nn.MultiheadAttention`` whose keys are wider than its queries (``kdim = vdim = E``)."""

    def __init__(self, width: int = 16, queries: int = 3) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.randn(queries, width))
        self.attn = nn.MultiheadAttention(width, H, kdim=E, vdim=E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [L, N, E] -> [queries, N, width]
        q = self.query[:, None].expand(-1, x.shape[1], -1)
        return self.attn(q, x, x, need_weights=False)[0]


def test_clip_style_blocks_are_walked_through_and_others_of_that_name_refused() -> None:
    """Blocks named like attention whose ``attn`` is an ``nn.MultiheadAttention`` are walked
    through (their attention swapped, exact with softmax inside); a block of the same name
    around another attention class is still refused by name."""
    torch.manual_seed(0)
    blocks = [ResidualAttentionBlock(nn.MultiheadAttention(E, H)) for _ in range(2)]
    clip = nn.Sequential(*blocks, AttentionalPooler()).eval()
    x = torch.randn(L, N, E)
    soft = _swapped_all(clip, 'softmax', ['0.attn', '1.attn', '2.attn'])
    dna = _swapped_all(clip, 'dna', ['0.attn', '1.attn', '2.attn'])
    with torch.no_grad():
        ref = clip(x)
        assert_close_as(soft(x), ref, ulps=REORDERED)
        assert ((dna(x) - ref).norm() / ref.norm()).item() < 1e-3
    from timm.layers import Attention

    other = nn.Sequential(ResidualAttentionBlock(Attention(E, num_heads=H)))
    with pytest.raises(
        UnsupportedModelError, match=r'unsupported attention module\(s\): 0 \(.*ResidualAttentionBlock\)'
    ):
        swap_attention(other, 'dna')


def _swapped_all(model: nn.Module, attn_cfg: str, names: list[str]) -> nn.Module:
    model = copy.deepcopy(model)
    assert swap_attention(model, attn_cfg) == names
    return model.eval()


def test_a_timesformer_step_asks_for_the_weights_and_gets_the_fused_route() -> None:
    """MMAction2's divided steps call ``attn(q, q, q)[0]`` (``need_weights=True``, dropped):
    their form never takes the eager route for that, and returns what ``need_weights=False``
    returns; a plain ``nn.MultiheadAttention`` form still returns the weights."""
    from mmaction.models.common.transformer import DividedTemporalAttentionWithNorm

    from dna_mm.models.layers.video_attention import from_divided

    step = from_divided(DividedTemporalAttentionWithNorm(E, H, num_frames=4), 'dna', 0, 1).eval()
    member = step.attn
    routes = []
    attend = member.attend

    def spy(heads, attn_mask, attn_bias, eager):
        routes.append(eager)
        return attend(heads, attn_mask, attn_bias, eager)

    member.attend = spy
    t = torch.randn(4, 6, E)  # [T, B·P, C], as the step calls it
    with torch.no_grad():
        out, weights = member(t, t, t)  # need_weights=True, the host's default
        ref, _ = member(t, t, t, need_weights=False)
        step(torch.randn(2, 1 + 4 * 3, E))
    assert weights is None and routes == [False, False, False]
    assert_close_as(out, ref, ulps=REORDERED)
    plain = _swapped(_model(batch_first=False), 'dna').eval()
    with torch.no_grad():
        assert plain.attn(t, t, t)[1] is not None
