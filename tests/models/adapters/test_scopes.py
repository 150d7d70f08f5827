"""Any registry, any scope: every dna_mm model, and ``with_attention`` over another library's
model, builds the same model (module types, parameter names and values) whether it is reached
through MMEngine's, MMAction2's, MMDetection's or MMPretrain's ``MODELS``, with no default scope
or with any of theirs, from plain Python."""

from __future__ import annotations

import copy
from collections import OrderedDict

import pytest
import torch
from mmengine.registry import MODELS, DefaultScope
from test_with_attention import TINY_MVIT, TINY_UNIFORMERV2

from dna_mm.errors import ConfigError
from dna_mm.models.scopes import LIBRARIES, library_registries

#: one config per dna_mm model kind, and with_attention over each library's models
CASES = {
    'with_attention over mmaction.MViT': dict(
        type='with_attention', model=dict(TINY_MVIT, type='mmaction.MViT'), attn_cfg='dna'
    ),
    'with_attention over UniFormerV2 (MMAction2 only)': dict(type='with_attention', model=TINY_UNIFORMERV2),
    'with_attention over mmpretrain.VisionTransformer': dict(
        type='with_attention',
        model=dict(
            type='mmpretrain.VisionTransformer',
            arch=dict(embed_dims=32, num_layers=2, num_heads=4, feedforward_channels=64),
            img_size=32,
            patch_size=8,
        ),
        attn_cfg='diff',
    ),
    'DnATimeSformer': dict(
        type='DnATimeSformer',
        num_frames=2,
        img_size=32,
        patch_size=16,
        embed_dims=32,
        num_heads=2,
        num_transformer_layers=2,
        attn_cfg=dict(temporal='dna', spatial='cog'),
    ),
    'ViTDet': dict(
        type='ViTDet',
        img_size=64,
        patch_size=16,
        embed_dim=32,
        depth=2,
        num_heads=2,
        window_size=2,
        window_block_indexes=[0],
        pretrain_img_size=64,
        use_rel_pos=True,
    ),
    'SimpleFPN': dict(
        type='SimpleFPN',
        backbone_channel=32,
        in_channels=[8, 16, 32, 32],
        out_channels=8,
        num_outs=5,
        norm_cfg=dict(type='LN2d', eps=1e-6),
    ),
}
REGISTRIES = ('mmengine', *LIBRARIES)
SCOPES = (None, 'mmengine', *LIBRARIES)


@pytest.fixture
def no_default_scope(monkeypatch):
    """No default scope, whatever earlier tests in this process set (plain Python)."""
    monkeypatch.setattr(DefaultScope, '_instance_dict', OrderedDict())
    assert DefaultScope.get_current_instance() is None


def _registry(name: str):
    return MODELS if name == 'mmengine' else library_registries()[name]


def _build(cfg: dict, registry: str, scope: str | None) -> torch.nn.Module:
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope(scope):
        return _registry(registry).build(copy.deepcopy(cfg))


def _fingerprint(model: torch.nn.Module) -> tuple[list[str], dict[str, torch.Tensor]]:
    types = [f'{n}:{type(m).__module__}.{type(m).__qualname__}' for n, m in model.named_modules()]
    return types, model.state_dict()


@pytest.mark.parametrize('case', list(CASES))
def test_the_same_model_from_every_registry_and_scope(case: str, no_default_scope) -> None:
    types, weights = _fingerprint(_build(CASES[case], 'mmengine', None))
    for registry in REGISTRIES:
        for scope in SCOPES:
            other_types, other_weights = _fingerprint(_build(CASES[case], registry, scope))
            where = f'{registry} registry, default scope {scope}'
            assert other_types == types, where
            assert other_weights.keys() == weights.keys(), where
            for key, value in weights.items():
                assert torch.equal(other_weights[key], value), f'{where}: {key}'


def test_a_library_registry_builds_its_own_model_without_a_default_scope(no_default_scope) -> None:
    """The failure this fixes: ``mmaction.registry.MODELS`` and a bare ``MViT`` (also an
    MMPretrain model) build MMAction2's, as that registry would on its own."""
    bare = dict(CASES['with_attention over mmaction.MViT'], model=TINY_MVIT)  # type='MViT'
    model = _build(bare, 'mmaction', None)
    assert type(model).__module__ == 'mmaction.models.backbones.mvit'
    named = _build(CASES['with_attention over mmaction.MViT'], 'mmengine', None)
    assert _fingerprint(model)[0] == _fingerprint(named)[0]


def test_a_type_of_several_libraries_asks_which(no_default_scope) -> None:
    bare = dict(type='with_attention', model=TINY_MVIT)
    which = r"'MViT' is in mmaction and mmpretrain: say which, as type='mmaction.MViT' or _scope_='mmaction'"
    with pytest.raises(ConfigError, match=which):
        _build(bare, 'mmengine', None)
    with pytest.raises(ConfigError, match=r"'NoSuchNet' is not in the registry of mmaction, mmdet"):
        _build(dict(type='with_attention', model=dict(type='NoSuchNet')), 'mmengine', None)


def test_every_dna_mm_model_is_registered_in_the_root() -> None:
    """So that every library's registry reaches it through its parent; each library holds only
    its own ``with_attention`` (which builds ``model`` from that library's models)."""
    import dna_mm  # noqa: F401

    ours = {n for n, c in MODELS.module_dict.items() if c.__module__.startswith('dna_mm.')}
    assert {'DnATimeSformer', 'ViTDet', 'SimpleFPN', 'DnAAttention', 'with_attention'} <= ours
    for scope, registry in library_registries().items():
        elsewhere = {n for n, c in registry.module_dict.items() if c.__module__.startswith('dna_mm.')}
        assert elsewhere == {'with_attention'}, scope
