"""A gated member (``gated=True``: ``proj(O ⊙ sigmoid(gate(x)))``) in every host: each form ends
in the member's ``project_out``, so the gate is applied whichever host calls the member
(ViTDet's grid, ``nn.MultiheadAttention``'s call, MViTv2's pooling with the gate reading the
pooled queries' tokens, the holders); and timm's own gated ``Attention`` / ``EvaAttention`` are
hosts whose gate the member takes over."""

from __future__ import annotations

import copy

import pytest
import torch
from test_with_attention import HOSTS
from tolerance import REORDERED, assert_close_as
from torch import Tensor

from dna_mm.models.adapters import swap_attention
from dna_mm.models.attention import AttentionBase
from dna_mm.models.backbones.vitdet import ViTDet

GATED = ('gated', dict(type='DnAAttention', gated=True))


def _gated(model: torch.nn.Module) -> list[AttentionBase]:
    return [m for m in model.modules() if isinstance(m, AttentionBase) and m.gated]


def _loss(out) -> Tensor:
    if isinstance(out, Tensor):
        return out.float().square().mean()
    return sum(_loss(item) for item in out)


def _assert_gates_train(model: torch.nn.Module, x) -> None:
    members = _gated(model)
    assert members
    model.train()
    _loss(model(x)).backward()
    for m in members:
        assert m.gate.weight.grad is not None and m.gate.weight.grad.abs().max() > 0, type(m).__name__


def _open_gates(model: torch.nn.Module) -> None:
    """Every gate at ``sigmoid(40) = 1`` (in float32 and float64 alike): the ungated output."""
    with torch.no_grad():
        for m in _gated(model):
            m.gate.weight.zero_()
            m.gate.bias.fill_(40.0)


def _vitdet(attn_cfg) -> ViTDet:
    torch.manual_seed(0)
    return ViTDet(
        img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, window_size=2,
        window_block_indexes=[0], pretrain_img_size=64, use_rel_pos=True, attn_cfg=attn_cfg,
    )  # fmt: skip


@pytest.mark.parametrize('attn_cfg', GATED, ids=['gated', 'dna gated'])
def test_vitdet_grid_form_gates(attn_cfg) -> None:
    x = torch.randn(1, 3, 64, 64)
    _assert_gates_train(_vitdet(attn_cfg), x)
    gated, plain = _vitdet('gated').eval(), _vitdet('softmax').eval()
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if '.gate.' not in k}, strict=True)
    with torch.no_grad():
        assert (gated(x)[0] - plain(x)[0]).abs().max() > 1e-4  # the gate acts
        _open_gates(gated)
        assert_close_as(gated(x)[0], plain(x)[0], ulps=REORDERED, what='ViTDet')


#: the hosts whose form gives the member the host's call (ViTDet's: above), and holders
FORMS = {
    'nn.MultiheadAttention': 'nn.TransformerEncoder',
    'nn.MultiheadAttention (torchvision)': 'torchvision ViT',
    'nn.MultiheadAttention (UniFormerV2 Extractor, CLIP blocks)': 'UniFormerV2',
    'nn.MultiheadAttention (TimeSformer divided steps)': 'MMAction2 TimeSformer (divided)',
    'MViTv2 pooling (pooled queries)': 'MViTv2',
    'holder: Video Swin': 'Video Swin',
    'holder: mmcv MultiheadAttention': 'DETR layers',
}


@pytest.mark.parametrize('attn_cfg', GATED, ids=['gated', 'dna gated'])
@pytest.mark.parametrize('form', list(FORMS))
def test_each_form_trains_the_gate(form: str, attn_cfg) -> None:
    build, make_input = HOSTS[FORMS[form]]
    torch.manual_seed(0)
    model = build()
    swap_attention(model, attn_cfg)
    _assert_gates_train(model, make_input())


@pytest.mark.parametrize('host', list(HOSTS))
def test_an_open_gate_gives_the_ungated_member_in_every_host(host: str) -> None:
    """Where the gate sits: after the heads, before ``proj``, on every route of every host."""
    build, make_input = HOSTS[host]
    torch.manual_seed(0)
    original, x = build(), make_input()
    gated, plain = copy.deepcopy(original), copy.deepcopy(original)
    swap_attention(gated, 'gated')
    swap_attention(plain, 'softmax')
    gated.eval()
    plain.eval()
    with torch.no_grad():
        _open_gates(gated)
        assert_close_as(gated(x), plain(x), ulps=REORDERED, what=host)


def _timm_hosts(gated: bool) -> torch.nn.Module:
    from timm.layers import Attention
    from timm.models.eva import EvaAttention

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        Attention(32, num_heads=4, qkv_bias=True, gated=gated),
        EvaAttention(32, num_heads=4, qkv_bias=True, gated=gated, scale_norm=False),
        EvaAttention(32, num_heads=4, qkv_bias=True, qkv_fused=False, gated=gated, scale_norm=False),
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(('bias', 'q_bias', 'v_bias')):
                p.normal_(std=0.5)
    return model.eval()


def test_timms_gated_attentions_are_hosts() -> None:
    """timm's ``Attention(gated=True)`` and ``EvaAttention(gated=True)``: the member takes their
    gate (``gated=True``, the key ``gate`` read from their layout); softmax gives their output,
    their state dict loads strictly, DnA starts close."""
    host = _timm_hosts(gated=True)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        ref = host(x)
    soft = copy.deepcopy(host)
    swap_attention(soft, 'softmax')
    assert len(_gated(soft)) == 3
    again = copy.deepcopy(_timm_hosts(gated=True))
    torch.manual_seed(1)
    swap_attention(again, 'softmax')
    again.load_state_dict(host.state_dict(), strict=True)
    dna = copy.deepcopy(host)
    swap_attention(dna, 'dna')
    with torch.no_grad():
        assert_close_as(soft(x), ref, ulps=REORDERED, what='timm gated, swapped')
        assert_close_as(again.eval()(x), ref, ulps=REORDERED, what='timm gated, loaded')
        assert ((dna(x) - ref).norm() / ref.norm()).item() < 1e-3
    _assert_gates_train(dna, x)
