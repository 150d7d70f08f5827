"""dna_mm.config.build, the one home of config → model: a file or a ``package::`` name read, options
merged, the default scope set (the config's, else the library that has the model's type),
pretrained weights cleared when asked, the model or a part built in that scope."""

from __future__ import annotations

import pytest
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config
from mmengine.registry import DefaultScope

from dna_mm.config.build import build_part, clear_pretrained_weights, default_scope, read_config
from dna_mm.config.model import model_from_config
from dna_mm.errors import ConfigError, MissingFileError
from dna_mm.models.backbones.timesformer import DnATimeSformer

TINY = {
    'model.backbone.num_transformer_layers': 1,
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.cls_head.in_channels': 32,
}


def test_a_file_and_its_package_name_read_the_same_config() -> None:
    by_file = read_config(DEMO_CONFIG, {'model.backbone.attn_cfg': 'softmax'})
    by_name = read_config('dna_mm::timesformer_dna_demo.py', {'model.backbone.attn_cfg': 'softmax'})
    assert by_file.to_dict() == by_name.to_dict()
    assert by_file.model.backbone.attn_cfg == 'softmax'
    assert DefaultScope.get_current_instance().scope_name == 'mmaction'


def test_a_missing_config_is_one_line_naming_it(tmp_path) -> None:
    with pytest.raises(MissingFileError, match=f'^config {tmp_path / "no.py"} does not exist$'):
        read_config(tmp_path / 'no.py')
    with pytest.raises(MissingFileError, match=f'^config {tmp_path} is a folder, not a file$'):
        read_config(tmp_path)
    with pytest.raises(FileNotFoundError, match='dna_mm ships no such config'):
        read_config('dna_mm::no_such.py')


def test_a_config_object_is_copied_not_changed() -> None:
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.model.backbone.pretrained = 'some/file.pth'
    read = read_config(cfg, {'model.backbone.embed_dims': 32}, clear_pretrained=True)
    assert read.model.backbone.pretrained is None and read.model.backbone.embed_dims == 32
    assert cfg.model.backbone.pretrained == 'some/file.pth' and cfg.model.backbone.embed_dims != 32


def test_pretrained_weights_are_cleared_at_any_depth_and_other_inits_kept() -> None:
    model = dict(
        type='X',
        init_cfg=[dict(type='Pretrained', checkpoint='a.pth'), dict(type='TruncNormal', layer='Linear')],
        backbone=dict(
            type='with_attention',
            model=dict(type='Y', pretrained='b.pth', init_cfg=dict(type='Pretrained', checkpoint='c')),
        ),
        timm=dict(type='TIMMBackbone', pretrained=True),
        kept=dict(pretrained=False, init_cfg=dict(type='Kaiming')),
    )
    cleared = clear_pretrained_weights(model)
    assert sorted(cleared) == [
        'backbone.model.init_cfg',
        'backbone.model.pretrained',
        'init_cfg',
        'timm.pretrained',
    ]
    assert model['init_cfg'] == [dict(type='TruncNormal', layer='Linear')]
    assert model['backbone']['model'] == dict(type='Y', pretrained=None, init_cfg=None)
    assert model['timm']['pretrained'] is False
    assert model['kept'] == dict(pretrained=False, init_cfg=dict(type='Kaiming'))


def test_the_default_scope_is_the_configs_else_the_library_of_the_models_type(tmp_path) -> None:
    assert default_scope(Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_demo.py'))) == 'mmdet'
    assert default_scope(Config(dict(model=dict(type='Recognizer3D')))) == 'mmaction'
    assert default_scope(Config(dict(model=dict(type='ImageClassifier')))) == 'mmpretrain'
    assert default_scope(Config(dict(model=dict(type='DnATimeSformer')))) is None  # the root's: kept
    assert default_scope(Config(dict(train_pipeline=[]))) is None
    path = tmp_path / 'no_scope.py'  # a recognizer config without default_scope builds in MMAction2's
    path.write_text(f"_base_ = ['{DEMO_CONFIG}']\n")
    cfg = Config.fromfile(str(path))
    cfg.pop('default_scope')
    with DefaultScope.overwrite_default_scope('mmdet'):
        _, model = model_from_config(cfg, TINY)
        assert DefaultScope.get_current_instance().scope_name == 'mmaction'
    assert type(model).__name__ == 'Recognizer3D'


def test_the_model_and_its_parts_build() -> None:
    cfg, model = model_from_config(DEMO_CONFIG, TINY)
    assert type(model).__name__ == 'Recognizer3D' and isinstance(model.backbone, DnATimeSformer)
    backbone = build_part(cfg, 'backbone')
    assert isinstance(backbone, DnATimeSformer) and backbone.embed_dims == 32
    assert type(build_part(cfg, 'cls_head')).__name__ == 'TimeSformerHead'
    with pytest.raises(ConfigError, match='the config has no model.neck to build'):
        build_part(cfg, 'neck')


def test_a_model_takes_the_top_level_data_preprocessor_as_the_runner_gives_it(tmp_path) -> None:
    """MMPretrain's configs (the ImageNet ones) keep the normalisation in a top-level
    ``data_preprocessor``, which MMEngine's runner merges into the model: the model built here
    preprocesses a batch as the runner's does (RGB, ImageNet mean / std), not as a bare
    ``ClsDataPreprocessor`` (BGR pixels 0-255)."""
    import torch
    from mmengine.runner import Runner
    from mmpretrain.structures import DataSample

    options = {'model.backbone.img_size': 32, 'model.backbone.patch_size': 8, 'model.backbone.depth': 1}
    cfg, model = model_from_config(REPO / 'configs' / 'imagenet' / 'dna_vit-t16_in1k.py', options)
    assert 'data_preprocessor' not in cfg.model and cfg.data_preprocessor.to_rgb  # the case at hand
    runner_cfg = cfg.copy()
    runner_cfg.work_dir = str(tmp_path)
    runner_model = Runner.from_cfg(runner_cfg).model  # mmengine's own merge

    image = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8)
    batch = dict(inputs=[image], data_samples=[DataSample().set_gt_label(0)])
    got = model.data_preprocessor(batch, False)['inputs']
    assert torch.equal(got, runner_model.data_preprocessor(batch, False)['inputs'])
    mean, std = (torch.tensor(cfg.data_preprocessor[k]).view(3, 1, 1) for k in ('mean', 'std'))
    expected = (image.flip(0).float() - mean) / std  # BGR → RGB, then normalised
    assert torch.allclose(got[0], expected, rtol=1e-6, atol=1e-5)
    # a model dict with its own data_preprocessor keeps it (the runner's setdefault)
    own = dict(type='ClsDataPreprocessor', mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0])
    cfg.model.data_preprocessor = own
    assert torch.equal(build_part(cfg).data_preprocessor(batch, False)['inputs'][0], image.float())
