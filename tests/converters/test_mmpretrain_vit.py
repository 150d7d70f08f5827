"""MMPretrain's own ViT files (its ``VisionTransformer`` classifier built from its shipped config,
an ``MAE`` pre-training on ``MAEViT``), written as MMEngine saves them, initialise the video and
detection backbones: a TimeSformer over one frame with softmax is MMPretrain's ViT, DnA starts
next to it; ViTDet reads every block; a ViT with layer scale is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import save_checkpoint
from tolerance import REORDERED, assert_close_as

import dna_mm  # noqa: F401  (registers DnATimeSformer and ViTDet)
from dna_mm.checkpoint import CheckpointMismatchError, load_whole_model
from dna_mm.errors import PretrainedMismatchError
from dna_mm.models.backbones import load_pretrained
from dna_mm.models.backbones.vitdet import ViTDet

#: MMPretrain's ViT made tiny: 2 blocks, 32 wide, 4 heads, 32 px in 8-pixel patches
ARCH = dict(embed_dims=32, num_layers=2, num_heads=4, feedforward_channels=128)
IMG, PATCH = 32, 8


def _mmpretrain(model: dict) -> torch.nn.Module:
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    return MODELS.build(model).eval()


def _classifier(tmp_path: Path, **backbone: object) -> tuple[torch.nn.Module, Path]:
    """MMPretrain's ViT-B classifier config (``mmpretrain::vision_transformer``) made tiny, and
    its checkpoint as MMEngine's runner saves it."""
    child = tmp_path / 'vit.py'
    child.write_text("_base_ = ['mmpretrain::vision_transformer/vit-base-p16_64xb64_in1k.py']\n")
    cfg = Config.fromfile(str(child))
    cfg.model.backbone.update(arch=ARCH, img_size=IMG, patch_size=PATCH, drop_rate=0.0, **backbone)
    cfg.model.head.update(in_channels=32, hidden_dim=64, num_classes=4)
    classifier = _mmpretrain(cfg.model)
    path = tmp_path / 'epoch_300.pth'
    save_checkpoint(dict(meta=dict(epoch=300), state_dict=classifier.state_dict()), str(path))
    return classifier, path


def _timesformer(attn_cfg: str, **kwargs: object) -> torch.nn.Module:
    from mmaction.registry import MODELS

    torch.manual_seed(1)  # other weights than the file's
    backbone = dict(
        type='DnATimeSformer',
        img_size=IMG,
        patch_size=PATCH,
        embed_dims=32,
        num_heads=4,
        num_transformer_layers=2,
        attn_cfg=attn_cfg,
        drop_path_rate=0.0,
        **{'num_frames': 1, 'attention_type': 'space_only', **kwargs},
    )
    return MODELS.build(backbone)


@pytest.mark.parametrize('attn_cfg', ['softmax', 'dna'])
def test_a_timesformer_over_one_frame_is_mmpretrains_vit(attn_cfg: str, tmp_path) -> None:
    classifier, path = _classifier(tmp_path)
    model = _timesformer(attn_cfg, pretrained=str(path))
    report = load_pretrained(model, str(path))
    assert not report['missing'] and not report['unexpected'], report
    assert len(report['generated']) == (0 if attn_cfg == 'softmax' else 2 * 5)  # q_neg, v_neg, alpha
    model.eval()
    images = torch.randn(2, 3, IMG, IMG)
    with torch.no_grad():
        ref = classifier.backbone(images)[-1]  # its CLS token after the final norm [2, 32]
        out = model(images.unsqueeze(2))  # [B, C, T=1, H, W]
    if attn_cfg == 'softmax':
        assert_close_as(out, ref, ulps=REORDERED)
    else:  # the negative branch starts small: near the softmax model, not equal to it
        assert ((out - ref).norm() / ref.norm()).item() < 1e-2
        assert not torch.allclose(out, ref)


def test_a_divided_timesformer_copies_the_spatial_attention_into_the_temporal_one(tmp_path) -> None:
    classifier, path = _classifier(tmp_path)
    model = _timesformer('dna', num_frames=2, attention_type='divided_space_time')
    report = load_pretrained(model, str(path))
    assert not report['missing'] and not report['unexpected'] and 'time_embed' in report['video_init']
    stock = classifier.backbone.layers[1]
    layer = model.transformer_layers.layers[1]
    for attention in layer.attentions:  # temporal, then spatial: each starts as the image's
        assert torch.equal(attention.attn.qkv.weight, stock.attn.qkv.weight)
        assert torch.equal(attention.norm.weight, stock.ln1.weight)
    assert torch.equal(layer.ffns[0].layers[1].weight, stock.ffn.layers[1].weight)
    assert torch.equal(model.norm.bias, classifier.backbone.ln1.bias)


def _vitdet() -> ViTDet:
    torch.manual_seed(1)
    return ViTDet(
        img_size=IMG,
        patch_size=PATCH,
        embed_dim=32,
        depth=2,
        num_heads=4,
        window_size=2,
        window_block_indexes=(0,),
        use_rel_pos=True,
        pretrain_img_size=IMG,
        attn_cfg='dna',
    )


def test_vitdet_reads_every_block_of_a_classifier_and_of_an_mae(tmp_path) -> None:
    classifier, path = _classifier(tmp_path)
    mae = _mmpretrain(
        dict(
            type='MAE',
            backbone=dict(type='MAEViT', arch=ARCH, img_size=IMG, patch_size=PATCH, mask_ratio=0.75),
            neck=dict(
                type='MAEPretrainDecoder',
                num_patches=(IMG // PATCH) ** 2,
                patch_size=PATCH,
                embed_dim=32,
                decoder_embed_dim=16,
                decoder_depth=1,
                decoder_num_heads=2,
            ),
            head=dict(
                type='MAEPretrainHead',
                patch_size=PATCH,
                loss=dict(type='PixelReconstructionLoss', criterion='L2'),
            ),
        )
    )
    mae_path = tmp_path / 'mae.pth'
    save_checkpoint(dict(meta=dict(epoch=1600), state_dict=mae.state_dict()), str(mae_path))
    rel_pos = sorted(f'blocks.{i}.attn.rel_pos_{a}' for i in range(2) for a in 'hw')
    for image, file in ((classifier, path), (mae, mae_path)):
        model = _vitdet()
        report = load_pretrained(model, str(file))
        assert report['missing'] == rel_pos and not report['unexpected'], report
        assert {'cls_token', 'norm.weight'} <= set(report['unused'])
        assert any(k.startswith('neck.' if image is mae else 'head.') for k in report['unused'])
        stock = image.backbone
        assert torch.equal(model.patch_embed.proj.weight, stock.patch_embed.projection.weight)
        for block, layer in zip(model.blocks, stock.layers, strict=True):
            assert torch.equal(block.attn.qkv.weight, layer.attn.qkv.weight)
            assert torch.equal(block.norm2.weight, layer.ln2.weight)
            assert torch.equal(block.mlp.fc1.weight, layer.ffn.layers[0][0].weight)


def test_layer_scale_is_refused_in_one_line_naming_the_key(tmp_path) -> None:
    """Loading all but the layer scale would change what the blocks compute: refused."""
    _, path = _classifier(tmp_path, layer_scale_init_value=0.1)
    for model in (_timesformer('dna'), _vitdet()):
        with pytest.raises(PretrainedMismatchError) as err:
            load_pretrained(model, str(path))
        line = str(err.value)
        assert '\n' not in line and line.startswith(f'{path}: layers.0.attn.gamma1.weight: '), line
        assert 'layer scale' in line


def test_as_a_whole_models_checkpoint_it_names_the_backbones_option(tmp_path) -> None:
    from mmaction.registry import MODELS

    _, path = _classifier(tmp_path)
    model = MODELS.build(
        dict(
            type='Recognizer3D',
            _scope_='mmaction',
            backbone=dict(
                type='DnATimeSformer',
                num_frames=2,
                img_size=IMG,
                patch_size=PATCH,
                embed_dims=32,
                num_heads=4,
                num_transformer_layers=2,
            ),
            cls_head=dict(type='TimeSformerHead', num_classes=4, in_channels=32),
        )
    )
    with pytest.raises(CheckpointMismatchError) as err:
        load_whole_model(model, str(path))
    line = str(err.value)
    assert "it holds an image ViT's weights (layout mmpretrain_vit: " in line, line
    assert f'--cfg-options model.backbone.pretrained={path} ' in line
