"""Multi-view testing: the views of the dataset configs (the authors' 1 clip x 3 crops), and
MMAction2's ``max_testing_views`` giving the same scores with less memory."""

from __future__ import annotations

import pytest
import torch
from conftest import DEMO_CONFIG, REPO
from mmaction.registry import MODELS
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from tolerance import REORDERED, assert_close_as

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.errors import ConfigError


def _views(pipeline: list[dict]) -> int:
    clips = next(t['num_clips'] for t in pipeline if t['type'] == 'SampleFrames')
    crops = {'ThreeCrop': 3, 'TenCrop': 10}
    return clips * next((crops[t['type']] for t in pipeline if t['type'] in crops), 1)


@pytest.mark.parametrize(
    'name', ['k400', 'ntu60', 'ntu60_xview', 'smarthome_cs', 'smarthome_cv1', 'smarthome_cv2']
)
def test_dataset_configs_test_on_three_views_validate_on_one(name) -> None:
    cfg = Config.fromfile(str(REPO / 'configs' / f'timesformer_dna_{name}.py'))
    assert _views(cfg.test_dataloader.dataset.pipeline) == 3 and cfg.test_dataloader.batch_size == 1
    assert _views(cfg.val_dataloader.dataset.pipeline) == 1
    assert cfg.model.test_cfg == dict(max_testing_views=None)


def test_max_testing_views_gives_the_same_scores(tiny_video_set) -> None:
    """2 clips x 3 crops of a real clip: scores with all 6 views in one pass equal those with
    1 or 4 views a pass (the last pass shorter)."""
    cfg = Config.fromfile(DEMO_CONFIG)
    pipeline = [dict(t) for t in cfg.test_pipeline]
    pipeline[1].update(num_clips=2)  # SampleFrames
    pipeline[3] = dict(type='Resize', scale=(48, 32), keep_ratio=False)  # crops that differ
    pipeline.insert(4, dict(type='ThreeCrop', crop_size=32))
    video = next((tiny_video_set / 'videos').glob('*.mp4'))
    sample = Compose(pipeline)(dict(filename=str(video), label=0, start_index=0, modality='RGB'))
    assert sample['inputs'].shape[0] == 6  # views
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).eval()
    scores, passes = {}, []
    model.backbone.register_forward_pre_hook(lambda _m, args: passes.append(args[0].shape[0]))
    for views in (None, 1, 4):
        model.test_cfg = dict(max_testing_views=views)
        with torch.no_grad():
            (pred,) = model.test_step(pseudo_collate([sample]))
        scores[views] = pred.pred_scores.item
    assert passes == [6, 1, 1, 1, 1, 1, 1, 4, 2]  # clips per backbone pass
    assert_close_as(scores[1], scores[None], ulps=REORDERED)
    assert_close_as(scores[4], scores[None], ulps=REORDERED)
    assert not torch.allclose(scores[None], torch.full_like(scores[None], 0.25))  # not uniform


def test_max_testing_views_needs_batch_size_one() -> None:
    cfg = Config.fromfile(DEMO_CONFIG)  # val / test batch 8
    cfg.model.test_cfg = dict(max_testing_views=1)
    with pytest.raises(ConfigError, match=r'val_dataloader.batch_size must be 1 with model.test_cfg.max_t'):
        check_config(cfg, 'train')
    cfg.val_dataloader.batch_size = cfg.test_dataloader.batch_size = 1
    check_config(cfg, 'train')
    cfg.model.test_cfg = dict(max_testing_views=0)
    with pytest.raises(ConfigError, match='max_testing_views must be a positive int'):
        check_config(cfg, 'test')


@pytest.mark.parametrize(
    ('part', 'key', 'message'),
    [
        (
            'test_cfg',
            'max_testing_view',
            r"model.test_cfg.max_testing_view is not a key Recognizer3D reads "
            r"\(did you mean 'max_testing_views'\?",
        ),
        (
            'test_cfg',
            'average_clips',
            r'model.test_cfg.average_clips is read by no MMAction2 1.x recognizer: '
            r".*model.cls_head.average_clips",
        ),
        ('train_cfg', 'blending', r'model.train_cfg.blending .*model.data_preprocessor.blending'),
        (
            'train_cfg',
            'max_testing_views',
            r'model.train_cfg.max_testing_views is not a key Recognizer3D '
            r'reads \(it reads: none\)',
        ),
    ],
)
def test_recognizer_cfg_keys_it_does_not_read_are_named(part, key, message) -> None:
    """MMAction2's recognizer reads its ``test_cfg`` with ``.get``: a misspelt key would test with
    every view in one pass, silently; an MMAction2 0.x key is named where 1.x reads it."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.val_dataloader.batch_size = cfg.test_dataloader.batch_size = 1
    cfg.model[part] = {key: 1}
    with pytest.raises(ConfigError, match=message):
        check_config(cfg, 'test')


def test_recognizer_cfg_keys_it_reads_pass() -> None:
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.val_dataloader.batch_size = cfg.test_dataloader.batch_size = 1
    cfg.model.test_cfg = dict(max_testing_views=2, fcn_test=False)
    cfg.model.train_cfg = None
    check_config(cfg, 'train')
    cfg.model.type = 'Recognizer2D'
    cfg.model.test_cfg = dict(num_segs=3)
    check_config(cfg, 'test')


def test_recognizer_cfg_of_another_recognizer_type_is_its_own() -> None:
    """A recognizer that is not one of MMAction2's (a subclass may read more keys) is left alone."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.model.type = 'MyRecognizer'
    cfg.model.test_cfg = dict(my_key=1)
    check_config(cfg, 'test')
    cfg.model.type = 'Recognizer3D'
    with pytest.raises(ConfigError, match='model.test_cfg.my_key is not a key Recognizer3D reads'):
        check_config(cfg, 'test')
