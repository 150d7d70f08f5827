"""A user's two-branch member, with names of its own (no ``q_neg``, ``v_neg`` or ``alpha``),
defined and registered here, runs in the hosts that read a member's branches by the member
contract of :class:`~dna_mm.models.attention.AttentionBase` alone (``branch_heads``,
``own_heads``, ``position_bias``, ``mixing_weights``): ViTDet with relative positions (each
branch's bias from its own queries), MMAction2's MViTv2 through ``with_attention`` (its second
queries and values pooled by a pooling of their own, started from the host's), and the
analyses (both maps, C(V, V₂) of its two value projections, its mixing weight ``gamma``)."""

from __future__ import annotations

import copy
import types
from typing import Optional

import pytest
import torch
from mmengine.registry import MODELS, init_default_scope
from torch import Tensor, nn

import dna_mm  # noqa: F401  (registers the hosts)
from dna_mm.analysis.collector import AttentionCollector
from dna_mm.analysis.report import parameter_records
from dna_mm.models.adapters import swap_attention
from dna_mm.models.attention import AttentionBase, BranchHeads, MixingWeight
from dna_mm.models.attention.functional import BiasArg, split_bias
from dna_mm.models.backbones.vitdet import ViTDet
from dna_mm.models.layers.mvit_attention import PoolingForm
from dna_mm.models.layers.positions import decomposed_rel_pos
from dna_mm.models.sites import find_attention_sites

#: what DnA names its negative branch: the member below has none of it
DNA_NAMES = ('q_neg', 'v_neg', 'alpha')
TINY_MVIT = dict(
    type='MViT',
    arch=dict(embed_dims=16, num_layers=3, num_heads=1, downscale_indices=[1]),
    spatial_size=32,
    temporal_size=4,
    adaptive_kv_stride=(1, 4, 4),
)


class TwinAttention(AttentionBase):
    """``softmax(s Q Kᵀ + b₁) V + γ_h softmax(s Q₂ Kᵀ + b₂) V₂``: a second branch of queries
    ``Q₂`` (``query2``) and values ``V₂`` (``value2``) of its own, mixed by ``γ [H]``
    (``gamma``), which it starts itself when softmax weights are loaded (``own_start``)."""

    short_name = 'twin'
    map_names = ('first', 'second')
    own_start = ('query2', 'value2', 'gamma')

    def __init__(self, embed_dims: int, num_heads: int = 8, qkv_bias: bool = True, **kwargs) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, **kwargs)
        dd = self.factory_kwargs
        self.query2 = nn.Linear(embed_dims, embed_dims, bias=qkv_bias, **dd)
        self.value2 = nn.Linear(self.vdim, embed_dims, bias=qkv_bias, **dd)
        self.gamma = nn.Parameter(torch.full((self.num_heads,), 0.5, **dd))

    @classmethod
    def branch_heads(cls) -> dict[str, BranchHeads]:
        return {'first': BranchHeads(), 'second': BranchHeads(q='q2', v='v2')}

    def project(
        self, x: Tensor, context: Optional[Tensor] = None, value: Optional[Tensor] = None
    ) -> dict[str, Tensor]:
        heads = super().project(x, context, value)
        values = value if value is not None else (x if context is None else context)
        heads['q2'] = self.split_heads(self.query2(x))
        heads['v2'] = self.split_heads(self.value2(values))
        return heads

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        b1, b2 = split_bias(attn_bias, type(self).__name__)
        o1, a1 = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, b1, eager)
        o2, a2 = self.softmax_branch(heads['q2'], heads['k'], heads['v2'], attn_mask, b2, eager)
        out = o1 + self.gamma.to(o2).view(1, -1, 1, 1) * o2
        return out, ({'first': a1, 'second': a2} if eager else {})

    def neg_coefficient(self) -> Tensor:
        return self.gamma.reshape(1, -1, 1, 1)

    def mixing_weights(self) -> dict[str, MixingWeight]:
        return {'gamma': MixingWeight(self.gamma, 0.5)}


@pytest.fixture(scope='module', autouse=True)
def twin():
    """``TwinAttention`` registered for this module's tests only (other tests see the shipped
    family)."""
    MODELS.register_module(module=TwinAttention)
    yield TwinAttention
    MODELS._module_dict.pop('TwinAttention', None)


def _members(model: nn.Module) -> list[TwinAttention]:
    return [m for m in model.modules() if type(m) is TwinAttention]


def _spy(member: TwinAttention, seen: list) -> None:
    """Record each ``attend`` call's heads, bias and maps (eager, as the analyses' hook runs)."""
    attend = member.attend

    def spy(heads, attn_mask, attn_bias, eager):
        out, maps = attend(heads, attn_mask, attn_bias, True)
        seen.append((heads, attn_bias, maps))
        return out, maps

    member.attend = spy


def test_the_contract_gives_its_heads_and_weights() -> None:
    attn = TwinAttention(32, 4)
    assert TwinAttention.extra_heads() == {'q2': 'q', 'v2': 'v'} and attn.own_heads() == ('q2', 'v2')
    assert list(attn.mixing_weights()) == ['gamma'] and attn.negative_variant() is None
    assert not any(hasattr(attn, name) for name in DNA_NAMES)
    out, maps = attn(torch.randn(2, 5, 32), return_attn=True)
    assert out.shape == (2, 5, 32) and sorted(maps) == ['first', 'second']


def _vitdet() -> ViTDet:
    torch.manual_seed(0)
    model = ViTDet(
        img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, window_size=2,
        window_block_indexes=[0], pretrain_img_size=64, use_rel_pos=True, attn_cfg='twin',
    )  # fmt: skip
    with torch.no_grad():  # away from zero tables
        for m in _members(model):
            m.rel_pos_h.normal_(std=0.5)
            m.rel_pos_w.normal_(std=0.5)
    return model


def test_vitdet_gives_each_branch_the_relative_positions_of_its_own_queries() -> None:
    model = _vitdet()
    members = _members(model)
    assert len(members) == 2 and not any(hasattr(m, n) for m in members for n in DNA_NAMES)
    keys = {k.split('.', 3)[-1] for k in model.state_dict() if k.startswith('blocks.0.attn.')}
    assert {'query2.weight', 'value2.weight', 'gamma', 'rel_pos_h', 'rel_pos_w'} <= keys
    seen: list = []
    for m in members:
        _spy(m, seen)
    model(torch.randn(1, 3, 64, 64))[0].float().square().mean().backward()
    for m, (heads, bias, _) in zip(members, seen, strict=True):
        side = (m.rel_pos_h.shape[0] + 1) // 2  # the window (2) or the grid (4)
        grid = (side, side)
        assert isinstance(bias, tuple) and len(bias) == 2
        assert torch.equal(bias[0], decomposed_rel_pos(heads['q'], m.rel_pos_h, m.rel_pos_w, grid, grid))
        assert torch.equal(bias[1], decomposed_rel_pos(heads['q2'], m.rel_pos_h, m.rel_pos_w, grid, grid))
        assert not torch.allclose(bias[0], bias[1])
        assert m.query2.weight.grad.abs().sum() > 0 and m.rel_pos_h.grad.abs().sum() > 0
    # the tables train through the second branch alone
    model.zero_grad()
    seen.clear()
    model(torch.randn(1, 3, 64, 64))
    sum((maps['second'] * torch.randn_like(maps['second'])).sum() for _, _, maps in seen).backward()
    assert all(m.rel_pos_h.grad.abs().max() > 1e-6 for m in members)


def test_the_analyses_read_both_branches_and_its_mixing_weight() -> None:
    model = _vitdet().eval()
    sites = find_attention_sites(model)
    assert [s.branches for s in sites] == [('first', 'second')] * 2
    assert all(s.value_heads == ('v', 'v2') and s.has_separate_values and s.alpha is None for s in sites)
    collector = AttentionCollector(model, hist_bins=20)
    with collector, torch.no_grad():
        model(torch.randn(1, 3, 64, 64))
    records = collector.records()
    assert {r['branch'] for r in records['entropy']} == {'first', 'second'}
    assert len(records['cvv']) == len(records['branch_cosine']) == len(records['intruders']) == 2
    params = parameter_records(types.SimpleNamespace(model=model))
    assert params['alpha'] == [] and [r['init'] for r in params['gamma']] == [0.5, 0.5]
    assert params['gamma'][0]['per_head'] == pytest.approx([0.5, 0.5])


def _mvit() -> nn.Module:
    init_default_scope('mmaction')
    torch.manual_seed(0)
    model = MODELS.build(TINY_MVIT)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'rel_pos' in name:
                p.normal_(std=0.5)
    return model.double().eval()


def test_mvit_pools_its_second_queries_and_values_with_their_own_pooling() -> None:
    host = _mvit()
    model = copy.deepcopy(host)
    names = swap_attention(model, 'twin')
    members = _members(model)
    assert len(members) == len(names) == 3
    for m in members:
        assert isinstance(m.host_form, PoolingForm)
        assert not any(hasattr(m, n) for n in DNA_NAMES) and not hasattr(m, 'pool_q_neg')
        for own, base in (('q2', 'q'), ('v2', 'v')):  # started from the host's pooling, copied
            for kind in ('pool', 'norm'):
                for key, value in getattr(m, f'{kind}_{base}').state_dict().items():
                    assert torch.equal(getattr(m, f'{kind}_{own}').state_dict()[key], value)
    attn = members[1]  # the stage change: in_dims 16 → 32, pooled queries
    assert attn.host_form.in_dims == 16 and attn.query2.in_features == 16 and attn.embed_dims == 32
    # its own checkpoint round-trips strictly
    again = copy.deepcopy(host)
    swap_attention(again, 'twin')
    again.load_state_dict(model.state_dict(), strict=True)

    seen: list = []
    _spy(attn, seen)
    x = torch.randn(1, 3, 4, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        model(x)
        attn.norm_q2.weight.mul_(2)  # the second queries' pooling norm doubled: Q₂ and R(Q₂) double
        attn.norm_q2.bias.mul_(2)
        model(x)
    (heads, bias, _), (heads_2, bias_2, _) = seen
    assert isinstance(bias, tuple) and len(bias) == 2 and not torch.allclose(bias[0], bias[1])
    assert torch.equal(heads_2['q'], heads['q']) and torch.equal(bias_2[0], bias[0])
    assert torch.equal(heads_2['q2'], 2 * heads['q2']) and torch.equal(bias_2[1], 2 * bias[1])
    # the relative position tables and the second pooling train through the second branch alone
    seen.clear()
    model.train()
    model(x)
    maps = seen[0][2]['second']
    (maps * torch.randn_like(maps)).sum().backward()
    for table in (attn.rel_pos_h, attn.rel_pos_w, attn.rel_pos_t, attn.norm_q2.weight):
        assert table.grad is not None and table.grad.abs().max() > 1e-6
