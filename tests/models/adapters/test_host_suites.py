"""What the hosts' own test suites assert of a model, asserted with DnA inside: MMPretrain 1.2's
``test_vision_transformer.py::test_structure`` reads each layer's ``attn.num_heads``,
``embed_dims`` and ``out_drop.drop_prob``; every form keeps the plain settings of its host
(``num_heads``, ``embed_dims``, ``head_dims``, ``scale``, ``window_size``, ...), which the hosts'
libraries and suites read. (MMAction2's TimeSformer suite: ``tests/models/backbones/
test_timesformer.py``.) The suites themselves run against swapped models as in the report of
issue #61, from a scratch folder; their code is not part of this repository."""

from __future__ import annotations

import copy

import pytest
import torch
from mmengine.registry import MODELS, init_default_scope
from test_with_attention import HOSTS

from dna_mm.models import DnAAttention
from dna_mm.models.adapters import swap_attention
from dna_mm.models.adapters.hosts import host_specs

_SETTING = (bool, int, float, str, type(None))


def _settings(module: torch.nn.Module) -> dict[str, object]:
    """The plain attributes of ``module``: numbers, flags, strings, and tuples of them."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith('_')
        and name != 'training'
        and (
            isinstance(value, _SETTING)
            or (isinstance(value, (tuple, list)) and all(isinstance(v, _SETTING) for v in value))
        )
    }


@pytest.mark.parametrize('host', list(HOSTS))
def test_every_form_keeps_its_hosts_settings(host: str) -> None:
    build, _ = HOSTS[host]
    original = build()
    specs = host_specs()
    hosts: list[tuple[str, torch.nn.Module]] = []
    for name, m in original.named_modules():  # as the swap finds them: not inside another host
        if type(m) in specs and not any(name.startswith(f'{outer}.') for outer, _ in hosts):
            hosts.append((name, m))
    model = copy.deepcopy(original)
    swap_attention(model, 'dna')
    for name, attention in hosts:
        form = model.get_submodule(name)
        for key, value in _settings(attention).items():
            assert getattr(form, key) == value, f'{host}: {name}.{key}'


def test_mmpretrain_vit_structure_with_dna_inside() -> None:
    """MMPretrain's ``test_structure`` on a custom arch and on the depth's drop-path rates."""
    init_default_scope('mmpretrain')
    arch = dict(embed_dims=32, num_layers=4, num_heads=4, feedforward_channels=64)
    cfg = dict(type='VisionTransformer', arch=arch, img_size=32, patch_size=8, drop_path_rate=0.1)
    model = MODELS.build(dict(type='with_attention', model=cfg, attn_cfg='dna'))
    assert model.embed_dims == 32 and model.num_layers == 4 and len(model.layers) == 4
    for i, layer in enumerate(model.layers):
        assert isinstance(layer.attn.attn, DnAAttention)
        assert (layer.attn.embed_dims, layer.attn.num_heads, layer.attn.head_dims) == (32, 4, 8)
        assert layer.attn.input_dims == 32 and layer.attn.v_shortcut is False
        assert layer.ffn.feedforward_channels == 64
        assert layer.attn.out_drop.drop_prob == pytest.approx(0.1 * i / 3)
        assert layer.ffn.dropout_layer.drop_prob == pytest.approx(0.1 * i / 3)
    (cls_token,) = model(torch.randn(1, 3, 32, 32))  # MMPretrain 1.2's default out_type
    assert cls_token.shape == (1, 32)
