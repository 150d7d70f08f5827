"""The host table (``dna_mm.models.adapters.hosts``): every row's form is a ``from_host`` in
``dna_mm.models.layers``, a host whose library is not installed is left out, and a swapped model
pickles (its forms' classes and its hooks are module-level)."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
import timm
import torch
from tolerance import ROUNDING, assert_close_as
from torch import nn

from dna_mm.family import NEGATIVE_INIT
from dna_mm.models.adapters import hosts, swap_attention
from dna_mm.models.attention import DnAAttention


def test_every_host_of_the_table_has_a_form_and_is_found_here() -> None:
    specs = hosts.host_specs()
    assert [s.name for s in specs.values()] == [s.name for s in hosts.HOSTS]  # all installed here
    for spec in hosts.HOSTS:
        module, _, name = spec.form.partition(':')
        form = getattr(__import__(f'dna_mm.models.layers.{module}', fromlist=[name]), name)
        assert callable(form), spec.form


def test_a_host_of_a_library_not_installed_or_of_another_version_is_left_out(monkeypatch) -> None:
    missing = dataclasses.replace(
        hosts.HOSTS[0], name='missing', host='dna_mm_no_such_library.layers:Attention'
    )
    renamed = dataclasses.replace(
        hosts.HOSTS[0], name='renamed', host='timm.layers.attention:NoSuchAttention'
    )
    monkeypatch.setattr(hosts, 'HOSTS', (*hosts.HOSTS, missing, renamed))
    monkeypatch.setattr(hosts, 'CONTAINERS', (*hosts.CONTAINERS, 'dna_mm_no_such_library:Block'))
    names = [s.name for s in hosts.host_specs().values()]
    assert 'missing' not in names and 'renamed' not in names
    assert len(names) == len(hosts.HOSTS) - 2
    assert len(hosts.container_classes()) == len(hosts.CONTAINERS) - 1


@pytest.mark.parametrize('host', ['timm', 'torch mha'])
def test_a_swapped_model_pickles(host: str) -> None:
    if host == 'timm':
        model = timm.create_model('vit_tiny_patch16_224', depth=1, num_classes=2, img_size=32)
        x = torch.randn(1, 3, 32, 32)
    else:
        model, x = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0), torch.randn(5, 1, 16)
    swap_attention(model, 'dna')
    model.eval()
    copy = pickle.loads(pickle.dumps(model))
    with torch.no_grad():
        assert_close_as(copy(x), model(x), ulps=ROUNDING)
    assert copy.state_dict().keys() == model.state_dict().keys()


def test_init_weights_regenerates_the_negative_branch_of_separate_projections() -> None:
    """``nn.MultiheadAttention`` with ``kdim`` / ``vdim``: after the replacement's
    ``init_weights`` the negative branch is the one rule on ``q_proj`` / ``v_proj``."""
    model = nn.Sequential(nn.MultiheadAttention(16, 2, kdim=8, vdim=12))
    swap_attention(model, 'dna')
    attn = model[0]
    with torch.no_grad():  # a host's own init re-draws the projections
        for p in attn.parameters():
            p.normal_()
    attn.init_weights()
    assert isinstance(attn, DnAAttention) and not attn._qkv_same_embed_dim
    assert_close_as(attn.q_neg.weight, NEGATIVE_INIT.q_neg_scale * attn.q_proj.weight, ulps=ROUNDING)
    assert_close_as(attn.v_neg.bias, NEGATIVE_INIT.v_neg_scale * attn.v_proj.bias, ulps=ROUNDING)
    assert torch.equal(attn.alpha, torch.full_like(attn.alpha, NEGATIVE_INIT.alpha))
