"""A member of your own in one file (``docs/attention/relu_attention.py``, the complete example of
docs/attention.md), registered by importing it, runs by config with no edit of dna_mm: in
``DnATimeSformer`` (both steps, or one), in ``ViTDet`` (windows and relative positions: the bias
reaches its ``attend``) and through ``with_attention`` in every host; forward and backward, the
analyses' hook sees its maps, a softmax checkpoint loads into it."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch
from conftest import REPO
from mmengine.registry import MODELS
from test_with_attention import HOSTS, _mmaction_timesformer

from dna_mm.models import DnAAttention
from dna_mm.models.adapters import swap_attention
from dna_mm.models.backbones.vitdet import ViTDet

EXAMPLE = REPO / 'docs' / 'attention' / 'relu_attention.py'


@pytest.fixture(scope='module')
def relu():
    """The example file imported as a user's module (registering its two classes), and its
    registrations removed after, so that other tests see the shipped family only."""
    spec = importlib.util.spec_from_file_location('relu_attention', EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for name in ('ReLUAttention', 'ReLUCrossAttention'):
        MODELS._module_dict.pop(name, None)


def _members(model: torch.nn.Module, cls: type) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m) is cls]


def _forward_backward_and_maps(model: torch.nn.Module, x, member: torch.nn.Module) -> None:
    """A forward and backward through ``model``; the analyses' hook on ``member`` sees its map."""
    seen = []
    handle = member.register_attend_hook(lambda m, maps, heads: seen.append(maps['attn']))
    out = model(x)
    handle.remove()
    out = out[0] if isinstance(out, (tuple, list)) else out
    out.float().square().mean().backward()
    assert seen and seen[0].dim() == 4 and torch.isfinite(seen[0]).all()
    assert member.qkv.weight.grad is not None and member.qkv.weight.grad.abs().sum() > 0


def test_timesformer_both_steps_and_one(relu) -> None:
    build = dict(type='DnATimeSformer', num_frames=2, img_size=32, patch_size=16, embed_dims=32)
    build.update(num_heads=2, num_transformer_layers=2)
    model = MODELS.build(dict(build, attn_cfg='relu'))
    assert len(_members(model, relu.ReLUAttention)) == 4
    # the last (spatial) one: a temporal step's output starts at zero (MMAction2's zero temporal_fc)
    _forward_backward_and_maps(model, torch.randn(2, 3, 2, 32, 32), _members(model, relu.ReLUAttention)[-1])
    mixed = MODELS.build(dict(build, attn_cfg=dict(temporal='ReLUAttention', spatial='dna')))
    assert len(_members(mixed, relu.ReLUAttention)) == 2 and len(_members(mixed, DnAAttention)) == 2


def test_vitdet_windows_and_relative_positions_reach_attend(relu) -> None:
    torch.manual_seed(0)
    model = ViTDet(
        img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, window_size=2,
        window_block_indexes=[0], pretrain_img_size=64, use_rel_pos=True, attn_cfg='relu',
    )  # fmt: skip
    members = _members(model, relu.ReLUAttention)
    assert [tuple(m.rel_pos_h.shape) for m in members] == [(3, 16), (7, 16)]  # a window of 2, the grid of 4
    x = torch.randn(1, 3, 64, 64)
    _forward_backward_and_maps(model, x, members[1])
    with torch.no_grad():  # the relative positions are a bias inside its formula
        before = model(x)[0].clone()
        for m in members:
            m.rel_pos_h.normal_(std=0.5)
        assert (model(x)[0] - before).abs().max() > 1e-4
    model.zero_grad()
    model(x)[0].square().mean().backward()
    assert all(m.rel_pos_h.grad.abs().sum() > 0 for m in members)


@pytest.mark.parametrize('host', [*HOSTS, 'MMAction2 TimeSformer (mmcv layers)'])
def test_every_with_attention_host(relu, host: str) -> None:
    torch.manual_seed(0)
    if host in HOSTS:
        build, make_input = HOSTS[host]
        original, x = build(), make_input()
    else:
        original, x = _mmaction_timesformer('joint_space_time'), torch.randn(1, 3, 4, 32, 32)
    model = copy.deepcopy(original)
    names = swap_attention(model, 'relu')
    members = _members(model, relu.ReLUAttention)
    assert names and len(members) == len(names)
    model.train()
    _forward_backward_and_maps(model, x, members[-1])
    # the host's softmax weights (its own state dict, as a zoo checkpoint) load into it strictly
    again = copy.deepcopy(original)
    swap_attention(again, 'relu')
    again.load_state_dict(original.state_dict(), strict=True)
    swapped_softmax = copy.deepcopy(original)
    swap_attention(swapped_softmax, 'softmax')
    for key, value in swapped_softmax.state_dict().items():  # the base's parameters: the same tensors
        assert torch.equal(again.state_dict()[key], value), key


def test_the_cross_form(relu) -> None:
    attn = relu.ReLUCrossAttention(32, 4)
    out, maps = attn(torch.randn(2, 3, 32), context=torch.randn(2, 7, 32), return_attn=True)
    assert out.shape == (2, 3, 32) and maps['attn'].shape == (2, 4, 3, 7)
    assert (maps['attn'] >= 0).all()
