"""The refusal of a whole-model checkpoint that does not match the model: one line (a few keys of
each kind and the counts), and advice that works: a partial load when some of the file fits, the
backbone's own initialisation when the file is an image ViT's weights; a partial load of nothing
is refused (it would train or test the model's own start, with exit status 0)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import timm
import torch
from conftest import DEMO_CONFIG, REPO, TINY_MASK_RCNN, run_main, tiny_backbone, tiny_run_options
from mmengine.config import Config

import dna_mm  # noqa: F401  (registers the backbones and dna_vit_*)
from dna_mm.checkpoint import CheckpointMismatchError, load_whole_model
from dna_mm.converters import unwrap
from dna_mm.converters.timesformer import state_dict_of

#: a 2-block ViT-T at 32 pixels in 8-pixel patches: the image models and the recognizer alike
VIT_T = dict(img_size=32, patch_size=8, depth=2)
#: timm ViT keys → the TimeSformer backbone's (the converter's mapping of an image ViT)
BACKBONE_KEYS = {
    'patch_embed.proj.weight': 'patch_embed.projection.weight',
    'blocks.1.mlp.fc2.weight': 'transformer_layers.layers.1.ffns.0.layers.1.weight',
}


def _recognizer(**backbone: object) -> torch.nn.Module:
    """A tiny TimeSformer-DnA recognizer 192 wide (ViT-T's width), 4 classes."""
    from mmaction.registry import MODELS

    torch.manual_seed(0)
    return MODELS.build(
        dict(
            type='Recognizer3D',
            _scope_='mmaction',
            backbone=tiny_backbone('DnATimeSformer', embed_dims=192, num_heads=3, **backbone),
            cls_head=dict(type='TimeSformerHead', num_classes=4, in_channels=192),
        )
    )


def _timm_state_dict(tmp_path: Path) -> Path:
    """``timm.create_model('vit_tiny_patch16_224').state_dict()``, saved as it is."""
    path = tmp_path / 'timm_vit.pth'
    torch.save(timm.create_model('vit_tiny_patch16_224', pretrained=False, **VIT_T).state_dict(), path)
    return path


def _deit_file(tmp_path: Path) -> Path:
    """A ``dna_vit_tiny_patch16_224`` as DeiT's (and the authors' ``vit/main.py``) training saves it."""
    path = tmp_path / 'checkpoint.pth'
    model = timm.create_model('dna_vit_tiny_patch16_224', pretrained=False, **VIT_T)
    torch.save({'model': model.state_dict(), 'epoch': 299}, path)
    return path


def _imagenet_epoch(tmp_path: Path) -> Path:
    """The ``epoch_N.pth`` of dna_mm's ImageNet route: MMPretrain's ``ImageClassifier`` on
    ``TIMMBackbone`` (``backbone.timm_model.*``), in mmengine's layout."""
    from mmpretrain.registry import MODELS

    classifier = MODELS.build(
        dict(
            type='ImageClassifier',
            _scope_='mmpretrain',
            backbone=dict(type='TIMMBackbone', model_name='dna_vit_tiny_patch16_224', **VIT_T),
            neck=dict(type='ClsTokenNeck'),
            head=dict(type='LinearClsHead', num_classes=4, in_channels=192),
        )
    )
    path = tmp_path / 'epoch_1.pth'
    torch.save({'meta': {'epoch': 1}, 'state_dict': classifier.state_dict()}, path)
    return path


IMAGE_FILES = {
    'timm ViT': _timm_state_dict,
    'dna_vit_* (DeiT)': _deit_file,
    'ImageNet epoch': _imagenet_epoch,
}


def test_a_mismatch_is_one_line_with_the_counts_and_a_few_keys(tmp_path) -> None:
    """Defect A: a checkpoint of the model with a block missing, extra weights and another head:
    one line, each kind counted with its first keys, and the partial-load advice."""
    model = _recognizer()
    state = dict(model.state_dict())
    dropped = [k for k in state if k.startswith('backbone.transformer_layers.layers.1.')]
    for key in dropped:
        del state[key]
    state.update({f'extra.{i}.weight': torch.zeros(1) for i in range(25)})
    state['cls_head.fc_cls.weight'], state['cls_head.fc_cls.bias'] = torch.zeros(7, 192), torch.zeros(7)
    torch.save({'meta': {}, 'state_dict': state}, tmp_path / 'other.pth')
    with pytest.raises(CheckpointMismatchError) as err:
        load_whole_model(model, str(tmp_path / 'other.pth'))
    line = str(err.value)
    assert (
        '\n' not in line
        and len(dropped) > 20
        and len(line.replace(str(tmp_path / 'other.pth'), 'FILE')) < 500
    ), line
    assert line.startswith(f'checkpoint {tmp_path / "other.pth"} does not match the model (')
    assert f'missing {len(dropped)} ({", ".join(dropped[:2])} and {len(dropped) - 2} more)' in line
    assert 'unexpected 25 (extra.0.weight, extra.1.weight and 23 more)' in line
    assert (
        'shape mismatch 2 (cls_head.fc_cls.weight: checkpoint [7, 192] vs model [4, 192] and 1 more)' in line
    )
    assert line.endswith('or --partial-load (config: load_partial = True) to load what matches')


@pytest.mark.parametrize('kind', sorted(IMAGE_FILES))
def test_an_image_vit_file_says_to_initialise_the_backbone_and_that_works(kind: str, tmp_path) -> None:
    """Defect B: an image ViT's weights as a recognizer's whole-model checkpoint match none of its
    weights: refused, strict or partial (nothing loaded), with the one route that reads them, the
    backbone's ``pretrained``; that route loads them."""
    path = IMAGE_FILES[kind](tmp_path)
    model = _recognizer()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for strict in (True, False):
        with pytest.raises(CheckpointMismatchError) as err:
            load_whole_model(model, str(path), strict=strict)
        line = str(err.value)
        assert '\n' not in line and len(line.replace(str(path), 'FILE')) < 400, line
        assert f'checkpoint {path} does not match the model (0 of its ' in line
        first_keys = ', '.join(list(state_dict_of(torch.load(path, weights_only=True)))[:2])
        assert f"it holds an image ViT's weights (layout timm_vit: {first_keys} and " in line  # the file's
        assert f'initialise the backbone from it with --cfg-options model.backbone.pretrained={path} ' in line
        assert '--partial-load' not in line
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing loaded

    option = re.search(r'--cfg-options model\.backbone\.pretrained=(\S+)', line).group(1)
    followed = _recognizer(pretrained=option)
    followed.backbone.init_weights()
    image = unwrap(torch.load(path, weights_only=True))  # the file's tensors, prefixes stripped
    for key in ('patch_embed.proj.weight', 'blocks.1.mlp.fc2.weight'):
        assert torch.equal(followed.state_dict()[f'backbone.{BACKBONE_KEYS[key]}'], image[key]), key


def test_a_detectors_image_vit_file_names_its_init_cfg(tmp_path) -> None:
    """A ViTDet detector (no ``pretrained`` argument) is told its ``init_cfg`` keys, which load the
    file into its backbone."""
    pytest.importorskip('mmdet.models')  # Mask R-CNN needs mmcv's compiled ops
    from mmdet.registry import MODELS

    cfg = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_demo.py'))
    cfg.merge_from_dict(dict(TINY_MASK_RCNN, **{'model._scope_': 'mmdet'}))
    path = tmp_path / 'vit.pth'
    vit = timm.create_model('vit_tiny_patch16_224', pretrained=False, embed_dim=32, num_heads=2, depth=2)
    torch.save(vit.state_dict(), path)
    with pytest.raises(CheckpointMismatchError) as err:
        load_whole_model(MODELS.build(cfg.model), str(path), strict=False)
    line = str(err.value)
    option = f'model.backbone.init_cfg.type=Pretrained model.backbone.init_cfg.checkpoint={path} '
    assert '\n' not in line and f'--cfg-options {option}' in line, line
    del cfg.model.backbone['init_cfg']  # as the demo config, which has none: the two keys make it
    cfg.merge_from_dict(dict(o.split('=', 1) for o in option.split()))
    detector = MODELS.build(cfg.model)
    detector.backbone.init_weights()
    assert torch.equal(
        detector.state_dict()['backbone.blocks.0.mlp.fc1.weight'], vit.blocks[0].mlp.fc1.weight
    )


def test_a_detectors_own_checkpoint_of_another_class_count_names_the_heads(tmp_path) -> None:
    """A ViTDet Mask R-CNN's own checkpoint (its backbone's keys read as an image ViT's) for a
    model of another number of classes: the heads' shapes, not an image ViT's file."""
    pytest.importorskip('mmdet.models')  # Mask R-CNN needs mmcv's compiled ops
    from mmdet.registry import MODELS

    cfg = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_demo.py'))
    cfg.merge_from_dict(dict(TINY_MASK_RCNN, **{'model._scope_': 'mmdet'}))
    path = tmp_path / 'iter_12.pth'
    torch.save(dict(state_dict=MODELS.build(cfg.model).state_dict()), path)
    cfg.model.roi_head.bbox_head.num_classes += 1
    cfg.model.roi_head.mask_head.num_classes += 1
    with pytest.raises(CheckpointMismatchError) as err:
        load_whole_model(MODELS.build(cfg.model), str(path))
    line = str(err.value)
    heads = 'shape mismatch 6 (roi_head.bbox_head.fc_cls.weight: checkpoint [4, 32] vs model [5, 32]'
    assert heads in line, line
    assert "image ViT's weights" not in line and '--partial-load' in line, line


def test_a_partial_load_of_nothing_is_refused(tmp_path) -> None:
    """A file of which nothing fits (not an image ViT): ``strict=False`` is refused too, without
    the partial-load advice; the model keeps its values."""
    model = _recognizer()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.save({'state_dict': {'foo': torch.zeros(1)}}, tmp_path / 'foo.pth')
    with pytest.raises(CheckpointMismatchError) as err:
        load_whole_model(model, str(tmp_path / 'foo.pth'), strict=False)
    line = str(err.value)
    assert '\n' not in line and 'unexpected 1 (foo)' in line and '--partial-load' not in line
    assert line.endswith('so a partial load is refused too: use a checkpoint of this model')
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_train_partial_load_of_an_image_vit_stops_with_one_line(tiny_video_set, tmp_path) -> None:
    """The auditor's run: ``tools/train.py CONFIG --partial-load --cfg-options load_from=<a timm
    ViT>`` trained from random weights with exit status 0; now one line, status 2, nothing trained."""
    path = tmp_path / 'timm_vit.pth'
    vit = timm.create_model('vit_tiny_patch16_224', pretrained=False, embed_dim=32, num_heads=2, depth=1)
    torch.save(vit.state_dict(), path)
    work = tmp_path / 'work'
    opts = [*tiny_run_options(tiny_video_set), f'load_from={path}']
    proc = run_main(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--partial-load', '--cfg-options', *opts],
        check=False,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    error, debug = proc.stderr.strip().splitlines()
    assert error.startswith(f'train.py: error: checkpoint {path} does not match the model (0 of its ')
    assert f'model.backbone.pretrained={path} ' in error and debug.startswith('train.py: (--debug')
    assert not list(work.glob('epoch_*.pth'))
