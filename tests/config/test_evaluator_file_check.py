"""An evaluator's ``ann_file`` that is another split's file (dna_mm.config.check): MMDetection's
``CocoMetric`` scores the predictions against its own file's annotations, matched by image id, so
another split's gives a wrong AP and no error; one line names both files before any work."""

from __future__ import annotations

import pytest
from conftest import REPO
from mmengine.config import Config

from dna_mm.config.check import check_config
from dna_mm.errors import ConfigError

COCO = str(REPO / 'configs' / 'vitdet_dna_coco.py')


def test_an_evaluator_on_another_splits_file_is_named() -> None:
    cfg = Config.fromfile(COCO)
    check_config(cfg, 'train')  # as shipped: each evaluator on its own loader's file
    check_config(cfg, 'test')
    cfg.val_evaluator.ann_file = 'data/coco/annotations/instances_train2017.json'  # copied from train
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'train')
    assert str(err.value) == (
        'val_evaluator.ann_file is data/coco/annotations/instances_train2017.json, the file of '
        'train_dataloader.dataset, and val_dataloader.dataset reads '
        'data/coco/annotations/instances_val2017.json: the metric would score the val predictions '
        "against another split's annotations (a wrong AP, no error); give it "
        'data/coco/annotations/instances_val2017.json'
    )
    cfg = Config.fromfile(COCO)
    cfg.test_evaluator = dict(cfg.test_evaluator, ann_file='data/coco/annotations/instances_train2017.json')
    with pytest.raises(
        ConfigError, match=r'^test_evaluator.ann_file is .*instances_train2017.json, the file of '
    ):
        check_config(cfg, 'test')


def test_a_file_of_no_loader_and_format_only_pass() -> None:
    cfg = Config.fromfile(COCO)
    cfg.val_evaluator.ann_file = 'data/coco/annotations/instances_val2017_full.json'  # a subset's full file
    check_config(cfg, 'train')
    cfg.test_evaluator = dict(
        cfg.test_evaluator, ann_file='data/coco/annotations/instances_train2017.json', format_only=True
    )
    check_config(cfg, 'test')  # a submission's file: nothing is scored
