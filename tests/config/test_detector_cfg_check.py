"""The keys of an MMDetection two-stage detector's ``model.train_cfg`` / ``model.test_cfg``
(dna_mm.config.check.detector): MMDetection reads them with ``.get`` or as attributes, so a
misspelt one is dropped and training changes without a word (``rpn_proposa``: the RPN proposes
with ``test_cfg.rpn``); each is named with its full key and the closest valid name."""

from __future__ import annotations

from pathlib import Path

import mmdet
import pytest
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config

from dna_mm.config.check.detector import detector_cfg_problems

COCO = str(REPO / 'configs' / 'vitdet_dna_coco.py')
DETECTORS = sorted(str(p) for p in (REPO / 'configs').glob('vitdet_*.py'))
#: MMDetection's Mask R-CNN, whose train_cfg / test_cfg its projects/ViTDet config keeps
MMDET_MASK_RCNN = Path(mmdet.__file__).parent / '.mim/configs/_base_/models/mask-rcnn_r50_fpn.py'


def _misspelt(at: str, key: str, typo: str) -> dict:
    """The model of the shipped ViTDet config with ``model.{at}.{key}`` renamed ``typo``."""
    model = Config.fromfile(COCO).model
    node = model
    for part in at.split('.'):
        node = node[part]
    node[typo] = node.pop(key)
    return model


#: ``(where, the key, its typo, what the message says it is not)``
TYPOS = [
    ('train_cfg', 'rpn_proposal', 'rpn_proposa', 'a key MaskRCNN reads'),
    ('test_cfg.rpn', 'nms_pre', 'nms_pr', 'a key MaskRCNN reads'),
    ('test_cfg.rcnn', 'mask_thr_binary', 'mask_thr_binar', 'a key MaskRCNN reads'),
    ('train_cfg.rpn', 'allowed_border', 'alowed_border', 'a key MaskRCNN reads'),
    ('train_cfg.rcnn', 'mask_size', 'mask_sise', 'a key MaskRCNN reads'),
    ('train_cfg.rcnn.sampler', 'add_gt_as_proposals', 'add_gt_as_proposal', 'an argument of RandomSampler'),
    ('train_cfg.rpn.assigner', 'ignore_iof_thr', 'ignore_iof_th', 'an argument of MaxIoUAssigner'),
]


@pytest.mark.parametrize(('at', 'key', 'typo', 'what'), TYPOS, ids=[t[2] for t in TYPOS])
def test_a_misspelt_key_is_named_with_the_right_one(at, key, typo, what) -> None:
    problems = detector_cfg_problems(_misspelt(at, key, typo))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f'model.{at}.{typo} is not {what} (did you mean {key!r}? valid: ')


def test_the_message_lists_the_valid_keys() -> None:
    assert detector_cfg_problems(_misspelt('train_cfg', 'rpn_proposal', 'rpn_proposa')) == [
        "model.train_cfg.rpn_proposa is not a key MaskRCNN reads (did you mean 'rpn_proposal'? "
        'valid: rpn, rpn_proposal, rcnn)'
    ]
    assert detector_cfg_problems(_misspelt('test_cfg.rpn', 'nms_pre', 'nms_pr')) == [
        "model.test_cfg.rpn.nms_pr is not a key MaskRCNN reads (did you mean 'nms_pre'? "
        'valid: nms_pre, min_bbox_size, nms, max_per_img)'
    ]


@pytest.mark.parametrize('path', [*DETECTORS, str(MMDET_MASK_RCNN)], ids=lambda p: Path(p).stem)
def test_the_shipped_and_mmdetections_configs_pass(path) -> None:
    if not Path(path).is_file():
        pytest.skip(f'{path} is not installed')
    assert detector_cfg_problems(Config.fromfile(path).model) == []


def test_the_keys_only_a_mask_head_reads_need_one() -> None:
    model = Config.fromfile(COCO).model
    model.roi_head.mask_head = None  # a Faster R-CNN with Mask R-CNN's cfgs
    assert [p.split(' ')[0] for p in detector_cfg_problems(model)] == [
        'model.train_cfg.rcnn.mask_size',
        'model.test_cfg.rcnn.mask_thr_binary',
    ]


def test_a_head_that_reads_its_own_keys_is_left_alone() -> None:
    model = Config.fromfile(COCO).model
    model.roi_head.type = 'DynamicRoIHead'  # reads train_cfg.rcnn.dynamic_rcnn
    model.train_cfg.rcnn.dynamic_rcnn = dict(iou_topk=75, beta_topk=10, update_iter_interval=100)
    assert detector_cfg_problems(model) == []


def test_another_model_gives_none() -> None:
    assert detector_cfg_problems(Config.fromfile(DEMO_CONFIG).model) == []  # MMAction2's Recognizer3D
    assert detector_cfg_problems(dict(type='RetinaNet', roi_head=dict(), train_cfg=dict(nms_pr=1))) == []
    assert detector_cfg_problems(dict(type='NoSuchDetector', roi_head=dict(), train_cfg=dict(x=1))) == []
    assert detector_cfg_problems(None) == [] and detector_cfg_problems('MaskRCNN') == []


@pytest.mark.parametrize('mode', ['train', 'test'])
def test_check_config_and_model_problems_name_it_in_both_modes(mode: str) -> None:
    """What ``tools/train.py`` / ``test.py`` check before the build, and the benchmarks' model check."""
    from dna_mm.config.check import check_config, model_problems
    from dna_mm.errors import ConfigError

    cfg = Config.fromfile(COCO)
    cfg.model.test_cfg.rpn['nms_pr'] = cfg.model.test_cfg.rpn.pop('nms_pre')
    with pytest.raises(ConfigError, match=r"model\.test_cfg\.rpn\.nms_pr is not a key"):
        check_config(cfg, mode)
    assert any('model.test_cfg.rpn.nms_pr' in p for p in model_problems(cfg))


def test_a_box_coders_misspelt_argument_is_named_since_mmdetection_drops_it() -> None:
    """``BaseBBoxCoder`` takes ``**kwargs`` and never reads them: ``target_std`` for
    ``target_stds`` trained with the default stds (1, 1, 1, 1), without a word."""
    from mmdet.models.task_modules.coders import DeltaXYWHBBoxCoder

    from dna_mm.config.check import check_config
    from dna_mm.config.check.detector import task_util_problems
    from dna_mm.errors import ConfigError

    cfg = Config.fromfile(COCO)
    assert task_util_problems(cfg) == []
    coder = cfg.model.roi_head.bbox_head.bbox_coder
    coder['target_std'] = coder.pop('target_stds')
    assert DeltaXYWHBBoxCoder(target_std=(0.1, 0.1, 0.2, 0.2)).stds == (1.0, 1.0, 1.0, 1.0)  # what it did
    with pytest.raises(ConfigError) as err:
        check_config(cfg, 'test')
    assert str(err.value) == (
        "model.roi_head.bbox_head.bbox_coder.target_std is not an argument of DeltaXYWHBBoxCoder (did you "
        "mean 'target_stds'? valid: target_means, target_stds, clip_border, add_ctr_clamp, ctr_clamp, "
        'use_box_type)'
    )
