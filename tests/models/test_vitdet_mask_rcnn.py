"""ViTDet Mask R-CNN: configs, a real train step and predict on generated COCO images, the COCO
generator and checker, MMDetection's stock train.py + our test.py (stopped by a signal, and gone
on with)."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY_MASK_RCNN, coco_run_options, load_tool, run_cmd, run_main
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmengine.hooks import Hook
from mmengine.registry import HOOKS, init_default_scope

import dna_mm  # noqa: F401
from dna_mm.preparation.coco_check import check_coco
from dna_mm.synthetic.coco_shapes import COCO_CLASSES, CocoDatasetSpec, ensure_coco_dataset

pytest.importorskip('mmdet.models')  # Mask R-CNN needs mmcv's compiled ops (RoIAlign, nms)
from mmdet.registry import DATASETS, MODELS  # noqa: E402

CONFIGS = {  # leaf config -> (attention class, window, rel-pos)
    'vitdet_dna_coco.py': ('DnAAttention', 0, False),
    'vitdet_softmax_coco.py': ('SoftmaxAttention', 0, False),
    'vitdet_diff_coco.py': ('DiffAttention', 0, False),
    'vitdet_dna_coco_lsj.py': ('DnAAttention', 14, True),
    'vitdet_softmax_coco_lsj.py': ('SoftmaxAttention', 14, True),
    'vitdet_dna_demo.py': ('DnAAttention', 4, True),
}
TINY_SPEC = CocoDatasetSpec(
    train_images=4, test_images=2, size=64, min_object=18, max_object=30, max_objects=2
)


def _tiny(name: str, **extra) -> Config:
    cfg = Config.fromfile(str(REPO / 'configs' / name))
    opts = dict(TINY_MASK_RCNN, **extra)
    if cfg.model.roi_head.bbox_head.type != 'Shared2FCBBoxHead':
        opts['model.roi_head.bbox_head.conv_out_channels'] = 16
    if cfg.model.backbone.window_size:
        opts.update({'model.backbone.window_size': 4, 'model.backbone.img_size': 64})
    cfg.merge_from_dict(opts)
    return cfg


@pytest.mark.parametrize('name', sorted(CONFIGS))
def test_config_parses_and_builds(name: str) -> None:
    cfg = Config.fromfile(str(REPO / 'configs' / name))
    assert cfg.default_scope == 'mmdet'
    assert cfg.custom_imports == dict(imports=['dna_mm'], allow_failed_imports=False)
    attn, window, rel_pos = CONFIGS[name]
    b = cfg.model.backbone
    assert (b.window_size, b.use_rel_pos) == (window, rel_pos)
    assert cfg.test_evaluator.type == 'CocoMetric' and cfg.test_evaluator.metric == ['bbox', 'segm']
    if name != 'vitdet_dna_demo.py':  # the paper's COCO setting / the ViTDet recipe (Appendix C)
        assert cfg.model.neck.out_channels == 256 and cfg.model.neck.num_outs == 5
        assert cfg.model.train_cfg.rpn_proposal.nms_pre == 2000
        assert cfg.model.test_cfg.rpn.nms_pre == 1000
        assert cfg.model.train_cfg.rpn_proposal.max_per_img == 1000
        assert cfg.model.test_cfg.rpn.nms.iou_threshold == 0.7
        assert cfg.model.train_cfg.rcnn.assigner.pos_iou_thr == 0.5
        assert cfg.model.test_cfg.rcnn.score_thr == 0.05
        assert cfg.model.test_cfg.rcnn.nms.iou_threshold == 0.5
        assert cfg.train_cfg.max_iters == 184375
        opt = cfg.optim_wrapper.optimizer
        assert (opt.type, opt.lr, opt.weight_decay, opt.betas) == ('AdamW', 1e-4, 0.1, (0.9, 0.999))
        flips = [t for t in cfg.train_dataloader.dataset.pipeline if t.type == 'RandomFlip']
        assert flips and flips[0].prob == 0.5
        if rel_pos:  # LSJ recipe
            assert b.img_size == 1024 and b.drop_path_rate == 0.1
            assert b.window_block_indexes == [0, 1, 3, 4, 6, 7, 9, 10]
            assert cfg.optim_wrapper.constructor == 'LayerDecayOptimizerConstructor'
            assert cfg.optim_wrapper.paramwise_cfg.decay_rate == 0.7
            assert cfg.auto_scale_lr.base_batch_size == 64
            lsj = cfg.train_dataloader.dataset.pipeline
            assert [t.type for t in lsj][3:7] == ['RandomResize', 'RandomCrop', 'FilterAnnotations', 'Pad']
            assert lsj[3].ratio_range == (0.1, 2.0) and lsj[4].crop_size == (1024, 1024)
        else:  # the paper's 224 setting
            assert b.img_size == 224 and opt.eps == 1e-6 and cfg.auto_scale_lr.base_batch_size == 32
    init_default_scope('mmdet')
    model = MODELS.build(_tiny(name).model)
    kinds = {type(block.attn).__name__ for block in model.backbone.blocks}
    assert attn in kinds
    assert type(model.neck).__name__ == 'SimpleFPN'
    if rel_pos:
        assert model.backbone.blocks[0].attn.rel_pos_h.shape == (7, 16)  # window 4 after shrinking
    with pytest.raises(ValueError, match='takes_position_bias = False.*set use_rel_pos=False'):
        MODELS.build(
            _tiny(name, **{'model.backbone.attn_cfg': 'diff', 'model.backbone.use_rel_pos': True}).model
        )


@pytest.fixture(scope='module')
def tiny_coco(tmp_path_factory) -> Path:
    return ensure_coco_dataset(tmp_path_factory.mktemp('coco'), TINY_SPEC)


def test_mask_rcnn_train_step_and_predict(tiny_coco: Path) -> None:
    cfg = _tiny('vitdet_dna_demo.py', **coco_run_options(tiny_coco), **{'model.test_cfg.rcnn.score_thr': 0.0})
    init_default_scope('mmdet')
    model = MODELS.build(cfg.model)
    train = DATASETS.build(cfg.train_dataloader.dataset)
    batch = model.data_preprocessor(pseudo_collate([train[0], train[1]]), True)
    assert batch['inputs'].shape == (2, 3, 64, 64)
    model.train()
    losses = model(**batch, mode='loss')
    assert {'loss_rpn_cls', 'loss_rpn_bbox', 'loss_cls', 'loss_bbox', 'loss_mask'} <= set(losses)
    loss, _ = model.parse_losses(losses)
    assert torch.isfinite(loss)
    loss.backward()
    attn = model.backbone.blocks[0].attn  # windowed, rel-pos, DnA
    for name in ('q_neg.weight', 'v_neg.weight', 'alpha', 'rel_pos_h', 'rel_pos_w'):
        grad = attn.get_parameter(name).grad
        assert grad is not None and grad.abs().sum() > 0, name
    assert model.backbone.blocks[1].attn.rel_pos_h.grad.abs().sum() > 0  # global block
    model.eval()
    test = DATASETS.build(cfg.test_dataloader.dataset)
    with torch.no_grad():
        data = model.data_preprocessor(pseudo_collate([test[0]]), False)
        result = model(**data, mode='predict')[0].pred_instances
    n = len(result)
    assert n > 0 and result.bboxes.shape == (n, 4) and result.labels.max() < len(COCO_CLASSES)
    assert result.masks.shape == (n, 64, 64) and result.masks.dtype == torch.bool


def test_coco_generator_and_checker(tiny_coco: Path, tmp_path: Path, capsys) -> None:
    ann = tiny_coco / 'annotations' / 'instances_train.json'
    data = json.loads(ann.read_text())
    assert [c['name'] for c in data['categories']] == list(COCO_CLASSES)
    assert len(data['images']) == 4 and len(data['annotations']) >= 4
    first = dict(data['annotations'][0])
    assert len(first['segmentation'][0]) >= 6 and first['bbox'][2] > 0 and first['iscrowd'] == 0
    report = check_coco(ann, tiny_coco / 'images' / 'train', check_sizes=True)
    assert report.ok, report.format()
    assert sum(report.per_category.values()) == len(data['annotations'])
    # the same file reused while the spec matches (meta.json)
    mtime = ann.stat().st_mtime_ns
    ensure_coco_dataset(tiny_coco, TINY_SPEC)
    assert ann.stat().st_mtime_ns == mtime
    # break it in every way the checker names
    data['images'][1]['file_name'] = 'nowhere.png'
    data['annotations'][0]['bbox'] = [10, 10, 0, 5]
    data['annotations'][1]['segmentation'] = [[1, 2, 3, 4, 5]]
    data['annotations'].append(dict(first, id=999, category_id=42))
    data['annotations'].append(dict(first, id=1000, image_id=77))
    data['categories'].append(dict(id=9, name='square'))
    bad = tmp_path / 'bad.json'
    bad.write_text(json.dumps(data))
    checker = load_tool('tools/data/coco/check_annotations.py')
    assert checker.main(['--ann-file', str(bad), '--image-dir', str(tiny_coco / 'images' / 'train')]) == 1
    out = capsys.readouterr().out
    for message in (
        'missing image file: 1: ',
        'nowhere.png',
        'empty bbox (w or h <= 0): 1',
        'bad polygon (need an even count >= 6 of numbers): 1',
        'annotation of an unknown category_id: 1',
        'category_id 42',
        'annotation of an unknown image_id: 1',
        'duplicate category name: 1',
    ):
        assert message in out, (message, out)
    assert 'annotations[0] (id 1)' in out
    (tmp_path / 'broken.json').write_text('{"images": [')
    with pytest.raises(SystemExit) as done:
        checker.main(['--ann-file', str(tmp_path / 'broken.json')])
    err = capsys.readouterr().err
    assert done.value.code == 2 and 'check_annotations.py: error: ' in err and 'cannot read COCO JSON' in err


@HOOKS.register_module(force=True)
class SigusrAfterFirstTestBatch(Hook):
    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if batch_idx == 0:
            os.kill(os.getpid(), signal.SIGUSR1)


@pytest.mark.integration
def test_stock_mmdet_train_then_our_test(tiny_coco: Path, tmp_path: Path) -> None:
    """MMDetection's own tools/train.py runs the config (custom_imports), tools/test.py tests
    its checkpoint, prints bbox / segm AP and dumps predictions; a test stopped by a signal
    after its first image saves its progress, and the same command gives the same AP and
    predictions."""
    import mmdet

    stock_train = Path(mmdet.__file__).parent / '.mim' / 'tools' / 'train.py'
    opts = dict(TINY_MASK_RCNN, **coco_run_options(tiny_coco))
    opts.update(
        {
            'model.backbone.window_size': 4,
            'model.backbone.img_size': 64,
            'train_cfg.max_iters': 1,
            'default_hooks.checkpoint.interval': 1,
            'default_hooks.logger.interval': 1,
            'model.test_cfg.rcnn.score_thr': 0.0,
            'test_dataloader.batch_size': 1,
        }
    )
    cli = [f'{k}={json.dumps(v) if isinstance(v, list) else v}' for k, v in opts.items()]
    work = tmp_path / 'work'
    run_cmd(
        [
            sys.executable,
            str(stock_train),
            'configs/vitdet_dna_demo.py',
            '--work-dir',
            str(work),
            '--cfg-options',
            *cli,
        ],
        timeout=900,
    )
    ckpt = work / 'iter_1.pth'
    assert ckpt.is_file()
    out = run_main(
        [
            'tools/test.py',
            'configs/vitdet_dna_demo.py',
            str(ckpt),
            '--work-dir',
            str(work),
            '--dump',
            str(tmp_path / 'preds.pkl'),
            '--cfg-options',
            *cli,
        ]
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith('Test results:'))
    for name in ('bbox AP', 'bbox AP50', 'bbox AP75', 'segm AP', 'segm AP50', 'segm AP75'):
        assert re.search(rf'{name}: \d+\.\d\d', line), line
    with open(tmp_path / 'preds.pkl', 'rb') as f:
        preds = pickle.load(f)
    assert len(preds) == TINY_SPEC.test_images
    assert {'bboxes', 'scores', 'labels', 'masks'} <= set(preds[0]['pred_instances'])

    stopping = tmp_path / 'stopping.py'
    stopping.write_text(
        f"_base_ = [{str(REPO / 'configs/vitdet_dna_demo.py')!r}]\n"
        "custom_hooks = [dict(type='SigusrAfterFirstTestBatch')]\n"
    )
    again = ['--work-dir', str(tmp_path / 'again'), '--dump', str(tmp_path / 'again.pkl')]
    again += ['--cfg-options', *cli]
    stopped = run_main(['tools/test.py', str(stopping), str(ckpt), *again], check=False)
    assert stopped.returncode == 128 + signal.SIGUSR1, stopped.stdout[-3000:] + stopped.stderr[-3000:]
    assert 'stopped by SIGUSR1: saved its progress (batch 1 of 2)' in stopped.stdout + stopped.stderr
    rest = run_main(['tools/test.py', 'configs/vitdet_dna_demo.py', str(ckpt), *again])
    assert 'test: continuing at batch 2 of 2 (rank 0)' in rest.stdout + rest.stderr
    assert next(ln for ln in rest.stdout.splitlines() if ln.startswith('Test results:')) == line
    with open(tmp_path / 'again.pkl', 'rb') as f:
        preds_again = pickle.load(f)
    assert [p['img_id'] for p in preds_again] == [p['img_id'] for p in preds]
    for one, other in zip(preds_again, preds, strict=True):
        for key in ('bboxes', 'scores', 'labels'):
            assert torch.equal(one['pred_instances'][key], other['pred_instances'][key])
        assert one['pred_instances']['masks'] == other['pred_instances']['masks']  # RLE

    # --dump NAME.json on a config whose test_evaluator is a list (a work dir's config after a
    # test with --dump .pkl): the COCO results files of its CocoMetric, the same AP
    listed = tmp_path / 'listed.py'
    listed.write_text(
        f"_base_ = [{str(REPO / 'configs/vitdet_dna_demo.py')!r}]\n"
        f"test_evaluator = [{{{{_base_.test_evaluator}}}}, dict(type='DumpDetResults', out_file_path="
        f"{str(tmp_path / 'listed.pkl')!r})]\n"
    )
    listed_cli = [o.replace('test_evaluator.', 'test_evaluator.0.') for o in cli]
    run = ['tools/test.py', str(listed), str(ckpt), '--work-dir', str(tmp_path / 'listed')]
    out = run_main([*run, '--dump', str(tmp_path / 'r.json'), '--cfg-options', *listed_cli]).stdout
    assert next(ln for ln in out.splitlines() if ln.startswith('Test results:')) == line
    assert (tmp_path / 'r.bbox.json').is_file() and (tmp_path / 'r.segm.json').is_file()
