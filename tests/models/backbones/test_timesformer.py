"""TimeSformer with configurable attention: conversion, pretrained layouts, configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from authors_models import AuthorsDnATimeSformer, AuthorsDnAViT, AuthorsQQKV, AuthorsQQKVV
from conftest import REPO, TINY_BACKBONES
from mmaction.registry import MODELS
from mmaction.utils import register_all_modules
from mmengine.config import Config
from tolerance import REORDERED, ROUNDING, assert_close_as

import dna_mm
from dna_mm.converters import rename_mha, softmax_to_dna
from dna_mm.errors import ConfigError, error_line
from dna_mm.models import DiffAttention, DnAAttention, SoftmaxAttention
from dna_mm.models.backbones.timesformer import DnATimeSformer

register_all_modules()
TINY = TINY_BACKBONES['DnATimeSformer']
LAYER = 'transformer_layers.layers'


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def _stock(attention_type: str = 'divided_space_time', **kw):
    model = MODELS.build(dict(type='TimeSformer', attention_type=attention_type, **{**TINY, **kw}))
    model.init_weights()
    for m in model.modules():  # non-zero temporal_fc, so the temporal path counts
        if hasattr(m, 'temporal_fc'):
            torch.nn.init.normal_(m.temporal_fc.weight, std=0.2)
    return model.eval()


def _ours(attention_type: str = 'divided_space_time', **kw):
    return MODELS.build(dict(type='DnATimeSformer', attention_type=attention_type, **{**TINY, **kw})).eval()


@pytest.mark.parametrize('attention_type', ['divided_space_time', 'joint_space_time', 'space_only'])
def test_stock_timesformer_converts_to_dna(attention_type) -> None:
    stock, ours = _stock(attention_type), _ours(attention_type)
    ours.load_state_dict(softmax_to_dna(stock.state_dict(), num_heads=2), strict=True)
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        assert _rel(ours(x), stock(x)) < 1e-3
    n_attn = sum(isinstance(m, DnAAttention) for m in ours.modules())
    assert n_attn == (4 if attention_type == 'divided_space_time' else 2)


def test_explicit_layers_get_the_attention_of_each_step() -> None:
    """``transformer_layers`` written as an MMAction2 config writes them (its own step types, a
    wider FFN): each step gets its ``attn_cfg``; with softmax in both, the stock model's state
    dict loads strictly (``rename_mha``) and it computes the same."""
    ln = dict(type='LN', eps=1e-6)
    step = dict(embed_dims=32, num_heads=2, num_frames=4, norm_cfg=ln)
    layer = dict(
        type='BaseTransformerLayer',
        attn_cfgs=[
            dict(step, type='DividedTemporalAttentionWithNorm'),
            dict(step, type='DividedSpatialAttentionWithNorm'),
        ],
        ffn_cfgs=dict(type='FFNWithNorm', embed_dims=32, feedforward_channels=96, norm_cfg=ln),
        operation_order=('self_attn', 'self_attn', 'ffn'),
    )
    layers = dict(type='TransformerLayerSequence', transformerlayers=[layer] * 2, num_layers=2)
    mixed = _ours(transformer_layers=layers, attn_cfg=dict(temporal='softmax', spatial='dna'))
    assert [type(m.attn) for m in mixed.transformer_layers.layers[1].attentions] == [
        SoftmaxAttention,
        DnAAttention,
    ]
    assert mixed.transformer_layers.layers[1].ffns[0].layers[0][0].out_features == 96  # the layers as written
    stock, ours = _stock(transformer_layers=layers), _ours(transformer_layers=layers, attn_cfg='softmax')
    ours.load_state_dict(rename_mha(stock.state_dict()), strict=True)
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        assert_close_as(ours(x), stock(x), ulps=REORDERED)


def test_attention_choice_per_step() -> None:
    m = _ours(attn_cfg=dict(temporal='softmax', spatial=dict(type='DnAAttention', variant='qpm_v')))
    layer = m.transformer_layers.layers[0]
    assert isinstance(layer.attentions[0].attn, SoftmaxAttention)
    assert isinstance(layer.attentions[1].attn, DnAAttention)
    assert layer.attentions[1].attn.variant == 'qpm_v'
    diff = _ours(attn_cfg='diff')
    assert [layer.attentions[1].attn.layer_index for layer in diff.transformer_layers.layers] == [0, 1]
    assert type(diff.transformer_layers.layers[0].attentions[0].attn).__name__ == 'DiffAttention'
    cog = _ours(attn_cfg=dict(spatial='cog'), num_transformer_layers=3)
    assert [type(layer.attentions[1].attn).__name__ for layer in cog.transformer_layers.layers] == [
        'SoftmaxAttention',
        'CogAttention',
        'SoftmaxAttention',
    ]
    assert isinstance(cog.transformer_layers.layers[1].attentions[0].attn, DnAAttention)  # 'dna' by default
    with pytest.raises(ValueError, match='attention type'):
        _ours(attn_cfg='linear')
    with pytest.raises(ValueError, match='attention_type'):
        _ours(attention_type='divided')
    with pytest.raises(ValueError, match=r"got the keys \['temporl'\]"):
        _ours(attn_cfg=dict(temporl='softmax'))
    with pytest.raises(ValueError, match='use _delete_=True'):  # a per-step override merged onto a type
        _ours(attn_cfg=dict(type='DnAAttention', temporal='softmax'))


@pytest.mark.parametrize(
    'wrong,match',
    [
        (
            dict(attention_type='wrong_attention_type'),
            r"attention_type must be one of .*'wrong_attention_type'",
        ),
        (dict(transformer_layers='wrong_type'), r"transformer_layers must be a layer config .*'wrong_type'"),
    ],
)
def test_a_wrong_argument_is_what_mmaction2s_suite_expects(wrong: dict, match: str) -> None:
    """MMAction2's own ``test_timesformer_backbone`` expects an ``AssertionError`` for an unknown
    ``attention_type`` and a ``transformer_layers`` that is not a config (``TimeSformer(8, 64,
    16, ...)``); dna_mm's tools expect a ``ConfigError`` (a ``ValueError``) of one line: both."""
    with pytest.raises(AssertionError, match=match) as err:
        DnATimeSformer(8, 64, 16, **wrong)
    assert isinstance(err.value, ConfigError) and isinstance(err.value, ValueError)
    with pytest.raises(AssertionError) as built:  # through the registry, under MMEngine's prefix
        _ours(**wrong)
    assert isinstance(built.value, ConfigError)
    assert '\n' not in str(built.value) and error_line(built.value).startswith('DnATimeSformer: ')


def _forms(model: torch.nn.Module) -> list[type]:
    """The class of each DnA member's host form (``None``: held by a module, not given a call)."""
    return [type(getattr(m, 'host_form', None)) for m in model.modules() if isinstance(m, DnAAttention)]


@pytest.mark.parametrize('attention_type', ['divided_space_time', 'joint_space_time', 'space_only'])
def test_one_route_into_each_host_with_with_attention(attention_type: str) -> None:
    """``DnATimeSformer`` gives each of MMAction2's attentions its member by the form builder
    ``with_attention``'s host table names for it (``from_divided``, ``from_host``): MMAction2's
    own TimeSformer swapped by ``with_attention`` has the same modules and keys, and with its
    weights ``DnATimeSformer`` computes exactly what it computes."""
    from dna_mm.models.adapters import swap_attention

    stock = _stock(attention_type)
    swap_attention(stock, 'dna')
    ours = _ours(attention_type)
    assert [type(m) for m in ours.modules()][1:] == [type(m) for m in stock.modules()][1:]
    assert _forms(ours) == _forms(stock)
    ours.load_state_dict(stock.state_dict(), strict=True)
    x = torch.randn(1, 3, 4, 32, 32)
    with torch.no_grad():
        assert torch.equal(ours(x), stock(x))


def test_the_old_step_types_warn_and_keep_their_attention() -> None:
    """``DividedTemporalAttention`` / ``DividedSpatialAttention`` with an ``attn_cfg`` in explicit
    layers (deprecated, one release): a FutureWarning naming MMAction2's type, and the step
    keeps the attention it names."""
    ln = dict(type='LN', eps=1e-6)
    step = dict(embed_dims=32, num_heads=2, num_frames=4, norm_cfg=ln)
    layer = dict(
        type='BaseTransformerLayer',
        attn_cfgs=[
            dict(step, type='DividedTemporalAttention', attn_cfg='softmax'),
            dict(step, type='DividedSpatialAttention', attn_cfg='diff', layer_index=1, num_layers=2),
        ],
        ffn_cfgs=dict(type='FFNWithNorm', embed_dims=32, feedforward_channels=128, norm_cfg=ln),
        operation_order=('self_attn', 'self_attn', 'ffn'),
    )
    layers = dict(type='TransformerLayerSequence', transformerlayers=[layer], num_layers=1)
    with pytest.warns(FutureWarning, match=r"type='DividedTemporalAttentionWithNorm'"):
        model = _ours(transformer_layers=layers, num_transformer_layers=1)
    temporal, spatial = (s.attn for s in model.transformer_layers.layers[0].attentions)
    assert isinstance(temporal, SoftmaxAttention) and isinstance(spatial, DiffAttention)
    assert spatial.layer_index == 1
    with torch.no_grad():
        assert model(torch.randn(1, 3, 4, 32, 32)).shape == (1, 32)


def test_the_old_attention_keys_warn_and_build_the_same_model() -> None:
    """``temporal_attn`` / ``spatial_attn`` (deprecated, one release): a FutureWarning naming
    ``attn_cfg``, and the model ``attn_cfg`` builds."""
    named = r'temporal_attn is deprecated .* use attn_cfg=dict\(temporal='
    with pytest.warns(FutureWarning, match=named) as seen:
        torch.manual_seed(0)
        old = _ours(temporal_attn='softmax', spatial_attn='diff')
    assert any('spatial_attn is deprecated' in str(w.message) for w in seen)
    torch.manual_seed(0)
    new = _ours(attn_cfg=dict(temporal='softmax', spatial='diff'))
    old_sd, new_sd = old.state_dict(), new.state_dict()
    assert old_sd.keys() == new_sd.keys() and all(torch.equal(old_sd[k], new_sd[k]) for k in old_sd)


def test_timesformer_b_parameter_counts() -> None:
    full = dict(num_frames=8, img_size=224, patch_size=16)
    dna = sum(p.numel() for p in MODELS.build(dict(type='DnATimeSformer', **full)).parameters())
    soft = sum(
        p.numel() for p in MODELS.build(dict(type='DnATimeSformer', attn_cfg='softmax', **full)).parameters()
    )
    stock = sum(p.numel() for p in MODELS.build(dict(type='TimeSformer', **full)).parameters())
    assert soft == stock
    assert abs((dna - soft) - 28.3e6) < 0.1e6, dna - soft  # 24 × (2C² + 2C + H)


def _load_log(model, path, caplog) -> str:
    model.init_weights(str(path))
    return caplog.text


def test_pretrained_mmaction_vit_layout(tmp_path) -> None:
    vit = _stock('space_only')  # MMAction2's ViT file layout: norms.0/1, one attention per layer
    sd = {k: v for k, v in vit.state_dict().items() if k != 'time_embed'}
    torch.save({'state_dict': sd}, tmp_path / 'vit.pth')
    ours = _ours()
    report = dna_mm.models.backbones.load_pretrained(ours, str(tmp_path / 'vit.pth'))
    w = vit.state_dict()[f'{LAYER}.0.attentions.0.attn.in_proj_weight']
    got = ours.state_dict()
    for j in (0, 1):  # temporal starts as a copy of spatial
        assert torch.equal(got[f'{LAYER}.0.attentions.{j}.attn.qkv.weight'], w)
        assert_close_as(got[f'{LAYER}.0.attentions.{j}.attn.q_neg.weight'], 1e-4 * w[:32], ulps=ROUNDING)
        assert torch.equal(
            got[f'{LAYER}.0.attentions.{j}.norm.weight'], vit.state_dict()[f'{LAYER}.0.norms.0.weight']
        )
    assert got[f'{LAYER}.1.attentions.0.temporal_fc.weight'].abs().sum() == 0
    assert f'{LAYER}.0.attentions.0.temporal_fc.weight' in report['video_init']
    assert 'time_embed' in report['video_init'] and not report['unexpected']
    assert not report['missing']
    assert len(report['generated']) == 2 * 2 * 5


def test_pretrained_timm_vit_with_resized_position_embedding(tmp_path) -> None:
    from timm.models.vision_transformer import VisionTransformer

    vit = VisionTransformer(img_size=64, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=7)
    torch.save(vit.state_dict(), tmp_path / 'timm.pth')
    ours = _ours()
    report = dna_mm.models.backbones.load_pretrained(ours, str(tmp_path / 'timm.pth'))
    got, ref = ours.state_dict(), vit.state_dict()
    assert torch.equal(got[f'{LAYER}.1.attentions.1.attn.qkv.weight'], ref['blocks.1.attn.qkv.weight'])
    assert torch.equal(got[f'{LAYER}.1.ffns.0.layers.0.0.weight'], ref['blocks.1.mlp.fc1.weight'])
    assert torch.equal(got[f'{LAYER}.1.ffns.0.norm.weight'], ref['blocks.1.norm2.weight'])
    assert torch.equal(got['patch_embed.projection.weight'], ref['patch_embed.proj.weight'])
    assert report['resized'] and got['pos_embed'].shape == (1, 17, 32)
    assert not report['unexpected']


def test_pretrained_authors_dna_timesformer_layout(tmp_path) -> None:
    """A checkpoint of the authors' TimeSformer fork (``DnATransformer`` wrapped as ``model.``,
    saved under ``model_state`` by their checkpoint code) gives the same features."""
    theirs = AuthorsDnATimeSformer(img_size=32, patch=8, dim=32, depth=2, heads=2, num_frames=4).eval()
    with torch.no_grad():
        for block in theirs.blocks:
            torch.nn.init.normal_(block.temporal_fc.weight, std=0.2)
    state = {f'model.{k}': v for k, v in theirs.state_dict().items()}
    torch.save({'epoch': 15, 'model_state': state}, tmp_path / 'checkpoint_epoch_00015.pyth')
    ours = _ours()
    report = dna_mm.models.backbones.load_pretrained(ours, str(tmp_path / 'checkpoint_epoch_00015.pyth'))
    assert not report['missing'] and not report['unexpected'] and not report['generated']
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        assert_close_as(ours(x), theirs(x), ulps=REORDERED)


def test_pretrained_softmax_timesformer_recognizer_checkpoint(tmp_path) -> None:
    stock = _stock()
    ckpt = {
        'meta': {},
        'state_dict': {
            **{f'backbone.{k}': v for k, v in stock.state_dict().items()},
            'cls_head.fc_cls.weight': torch.zeros(5, 32),
        },
    }
    torch.save(ckpt, tmp_path / 'softmax_k400.pth')
    ours = _ours()
    report = dna_mm.models.backbones.load_pretrained(ours, str(tmp_path / 'softmax_k400.pth'))
    assert not report['missing'] and not report['unexpected']
    x = torch.randn(2, 3, 4, 32, 32)
    with torch.no_grad():
        assert _rel(ours(x), stock(x)) < 1e-3


def test_pretrained_shape_mismatch_names_the_key(tmp_path) -> None:
    torch.save(_stock(embed_dims=64, num_heads=2).state_dict(), tmp_path / 'wide.pth')
    with pytest.raises(ValueError, match=r'wide\.pth: shape mismatch for .*cls_token|shape mismatch'):
        dna_mm.models.backbones.load_pretrained(_ours(), str(tmp_path / 'wide.pth'))
    torch.save({'foo.bar': torch.zeros(1)}, tmp_path / 'alien.pth')
    with pytest.raises(ValueError, match='unrecognised checkpoint layout'):
        dna_mm.models.backbones.load_pretrained(_ours(), str(tmp_path / 'alien.pth'))


# the TimeSformer recipes; configs/examples/ (test_with_attention.py) and configs/vitdet_*
# (test_det.py) build other models and are checked by their own modules
CONFIGS = sorted((REPO / "configs").glob("timesformer_*.py"))


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_config_parses_and_builds(path: Path) -> None:
    cfg = Config.fromfile(str(path))
    assert cfg.custom_imports['imports'][0] == 'dna_mm'
    assert cfg.runner_type == 'DnARunner'
    # heads of 32: the smallest the Triton kernel takes (timesformer_dna_triton_*)
    cfg.model.backbone.update(embed_dims=64, num_heads=2, num_transformer_layers=2, pretrained=None)
    cfg.model.cls_head.in_channels = 64
    model = MODELS.build(cfg.model)
    attn = model.backbone.transformer_layers.layers[1].attentions[-1].attn
    kind = next(k for k in ('dna', 'softmax', 'diff') if f'_{k}_' in path.stem)
    expected = {'dna': DnAAttention, 'softmax': SoftmaxAttention, 'diff': DiffAttention}
    assert isinstance(attn, expected[kind])
    if kind in ('dna', 'softmax'):  # the kernel of each step: the spatial one, then the temporal
        routes = ('triton_temporal', 'triton', '2h', 'stacked')
        kernel = next((k for k in routes if f'_{k}_' in path.stem), '')
        assert attn.kernel == {'triton': 'triton', '2h': 'sdpa_2h'}.get(kernel, 'sdpa')
        temporal = model.backbone.transformer_layers.layers[1].attentions[0].attn
        temporal_kernel = dict(triton_temporal='triton', triton='triton', stacked='sdpa_stacked')
        temporal_kernel['2h'] = 'sdpa_2h'
        assert isinstance(temporal, type(attn)) and temporal.kernel == temporal_kernel.get(kernel, 'sdpa')
    assert cfg.optim_wrapper.type == 'AutoAmpOptimWrapper'
    metrics = cfg.test_evaluator.get('metric_list', ('top_k_accuracy', 'mean_class_accuracy'))
    assert 'mean_class_accuracy' in metrics and 'top_k_accuracy' in metrics
    if 'smarthome_cs' in path.stem:
        assert cfg.model.cls_head.num_classes == 31
    if 'smarthome_cv' in path.stem:
        assert cfg.model.cls_head.num_classes == 19
    if 'ntu60' in path.stem:
        assert cfg.model.cls_head.num_classes == 60
    if 'demo' not in path.stem:  # the class names tools/infer.py prints (the demo's are generated)
        from dna_mm.apis.inference import read_label_map

        assert len(read_label_map(cfg.label_map)) == cfg.model.cls_head.num_classes


@pytest.mark.parametrize(
    'attn_cls,combine', [(AuthorsQQKVV, 'add'), (AuthorsQQKVV, 'sub'), (AuthorsQQKV, 'sub')]
)
def test_pretrained_authors_dna_vit_layout(tmp_path, attn_cls, combine) -> None:
    """The authors' DnA ViTs as their code writes them: ``vit/dna_models.py`` (``qqkvv``, pos_embed
    ``[1, N, C]`` with no CLS row) and ``vit/dna.py`` (subtracting; ``qqkv`` with shared V)."""
    theirs = AuthorsDnAViT(img_size=32, patch=8, dim=32, depth=2, heads=2, attn_cls=attn_cls, combine=combine)
    assert theirs.pos_embed.shape == (1, 16, 32)
    torch.save({'model': theirs.state_dict(), 'epoch': 299}, tmp_path / 'authors_vit.pth')
    ours = _ours(pretrained_combine=combine)
    report = dna_mm.models.backbones.load_pretrained(ours, str(tmp_path / 'authors_vit.pth'), combine=combine)
    assert not report['unexpected'] and not report['missing']
    assert report['generated'] == (
        []
        if attn_cls is AuthorsQQKVV
        else sorted(
            f'{LAYER}.{i}.attentions.{j}.attn.v_neg.{n}'
            for i in (0, 1)
            for j in (0, 1)
            for n in ('bias', 'weight')
        )
    )
    got = ours.state_dict()
    assert torch.equal(got['pos_embed'][0, 0], torch.zeros(32))
    assert torch.equal(got['pos_embed'][:, 1:], theirs.pos_embed.detach())  # loaded
    # every attention (temporal = copy of spatial) computes the authors' attention
    x = torch.randn(2, 5, 32)
    t = x.transpose(0, 1)  # the steps call nn.MultiheadAttention's way, tokens first
    for j in (0, 1):
        attn = ours.transformer_layers.layers[1].attentions[j].attn
        with torch.no_grad():
            got = attn(t, t, t)[0].transpose(0, 1)
            assert_close_as(got, theirs.blocks[1].attn(x), ulps=REORDERED)


def test_pretrained_partial_attention_names_file_and_keys(tmp_path) -> None:
    theirs = AuthorsDnAViT(img_size=32, patch=8, dim=32, depth=2, heads=2)
    sd = {k: v for k, v in theirs.state_dict().items() if 'blocks.1.attn.proj' not in k}
    torch.save({'model': sd}, tmp_path / 'cut.pth')
    with pytest.raises(ValueError, match=r'(?s)cut\.pth: .*attentions\.1\.attn: missing proj'):
        dna_mm.models.backbones.load_pretrained(_ours(), str(tmp_path / 'cut.pth'))
