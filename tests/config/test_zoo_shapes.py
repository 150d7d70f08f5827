"""What the OpenMMLab packages' own configs write, and mmengine runs, passes the config check
(:func:`dna_mm.config.check_config`): a config inherited from MMDetection's, MMAction2's or
MMPretrain's zoo must not be refused for a shape that works. Each case is one their configs have
(named), on a shipped config of ours."""

from __future__ import annotations

import pytest
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config

import dna_mm  # noqa: F401
from dna_mm.config import check_config
from dna_mm.errors import ConfigError

COCO = str(REPO / 'configs' / 'vitdet_dna_coco.py')


def test_the_stock_test_tools_tta_keys_are_read() -> None:
    """``tta_model`` / ``tta_pipeline`` (MMDetection's CenterNet, 122 of its configs): its
    ``tools/test.py --tta`` reads them."""
    cfg = Config.fromfile(COCO)
    cfg.tta_model = dict(
        type='DetTTAModel', tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100)
    )
    cfg.tta_pipeline = [dict(type='LoadImageFromFile')]
    check_config(cfg, 'test')


def test_a_detector_that_reads_its_classes_from_text_is_not_held_to_a_datasets_count() -> None:
    """GLIP / Grounding DINO (a ``language_model``): the head's ``num_classes`` (256) is the text's
    length, each dataset names its own classes."""
    cfg = Config.fromfile(COCO)
    cfg.train_dataloader.dataset.metainfo = dict(classes=('a', 'b', 'c'))
    with pytest.raises(ConfigError, match=r'num_classes \(80\) must be the number of classes of the data: 3'):
        check_config(cfg, 'train')
    cfg.model.language_model = dict(type='BertModel', name='bert-base-uncased')
    check_config(cfg, 'train')


def test_a_filter_cfg_passes_where_nothing_reads_it() -> None:
    """MMDetection's ODVG and CrowdHuman configs give ``filter_cfg`` to datasets that keep
    mmengine's ``filter_data``, which reads none of it: a no-op, not refused."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    cfg.train_dataloader.dataset.filter_cfg = dict(filter_empty_gt=True, min_size=32)
    check_config(cfg, 'train')


@pytest.mark.parametrize('key', ['val_interval', 'max_epochs'])
def test_a_whole_float_length_or_interval_passes(key: str) -> None:
    """MMDetection's V3Det configs compute ``val_interval=57300.0``; mmengine's loops take it
    (``int()`` and an assertion for the lengths, ``%`` for the intervals). 1.5 is still named."""
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.label_map = None
    cfg.train_cfg[key] = 2.0
    check_config(cfg, 'train')
    cfg.train_cfg[key] = 1.5
    with pytest.raises(ConfigError, match=rf'train_cfg\.{key} must be an int > 0, got 1\.5'):
        check_config(cfg, 'train')
