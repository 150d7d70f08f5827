"""The OpenMMLab stack works with dna_mm imported: registries, compiled ops, a stock script, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import DEMO_CONFIG, run_tool, tiny_backbone, tiny_run_options, tiny_runner

import dna_mm


def test_recognizer3d_with_small_timesformer_forward() -> None:
    from mmaction.registry import MODELS
    from mmaction.utils import register_all_modules

    register_all_modules()
    model = MODELS.build(
        dict(
            type='Recognizer3D',
            backbone=tiny_backbone('DnATimeSformer'),
            cls_head=dict(type='TimeSformerHead', num_classes=5, in_channels=32),
            data_preprocessor=dict(
                type='ActionDataPreprocessor', mean=[127.5] * 3, std=[127.5] * 3, format_shape='NCTHW'
            ),
        )
    )
    model.init_weights()
    feats = model.extract_feat(torch.randn(2, 1, 3, 4, 32, 32))[0]
    assert feats.shape == (2, 32)
    scores = model.cls_head(feats)
    assert scores.shape == (2, 5) and torch.isfinite(scores).all()


def test_mask_rcnn_forward_uses_compiled_ops() -> None:
    import mmdet
    from mmcv.ops import RoIAlign, nms  # compiled ops (fail on mmcv-lite)
    from mmdet.registry import MODELS
    from mmdet.structures import DetDataSample
    from mmdet.utils import register_all_modules
    from mmengine.config import Config

    register_all_modules()
    cfg_path = Path(mmdet.__file__).parent / '.mim/configs/mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'
    cfg = Config.fromfile(str(cfg_path))
    cfg.model.backbone.update(depth=18, init_cfg=None)
    cfg.model.neck.in_channels = [64, 128, 256, 512]
    model = MODELS.build(cfg.model).eval()
    sample = DetDataSample(
        metainfo=dict(
            img_shape=(128, 128), ori_shape=(128, 128), scale_factor=(1.0, 1.0), pad_shape=(128, 128)
        )
    )
    data = model.data_preprocessor(
        dict(inputs=[torch.randint(0, 255, (3, 128, 128), dtype=torch.uint8)], data_samples=[sample]),
        training=False,
    )
    with torch.no_grad():
        out = model(**data, mode='predict')[0]
    assert {'bboxes', 'scores', 'labels'} <= set(out.pred_instances.keys())
    assert out.pred_instances.bboxes.shape[-1] == 4
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 10.0, 10.0], [50.0, 50.0, 60.0, 60.0]])
    kept, _ = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    assert kept.shape[0] == 2
    assert RoIAlign((2, 2), 1.0)(
        torch.randn(1, 1, 8, 8), torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]])
    ).shape == (1, 1, 2, 2)


def test_registered_where_both_frameworks_look() -> None:
    from mmaction.registry import MODELS as ACTION
    from mmdet.registry import MODELS as DET

    assert ACTION.get('DnATimeSformer') is dna_mm.models.backbones.DnATimeSformer
    assert DET.get('DnAAttention') is dna_mm.models.DnAAttention
    assert ACTION.get('DnAAttention') is dna_mm.models.DnAAttention


@pytest.mark.integration
def test_stock_mmaction_train_script_with_custom_imports(tiny_video_set, tmp_path) -> None:
    """The demo config's `custom_imports = ['dna_mm']` is all the stock script needs."""
    import mmaction

    script = Path(mmaction.__file__).parent / '.mim' / 'tools' / 'train.py'
    proc = run_tool(
        [
            str(script),
            DEMO_CONFIG,
            '--work-dir',
            str(tmp_path),
            '--cfg-options',
            *tiny_run_options(tiny_video_set),
        ]
    )
    assert 'custom_imports' in (proc.stdout + proc.stderr)
    weights = dna_mm.checkpoint.read_checkpoint(str(tmp_path / 'epoch_1.pth'))['state_dict']
    assert any(k.endswith('attn.q_neg.weight') for k in weights)  # dna_mm's modules were used


def test_resume_continues_from_an_mmengine_checkpoint(tiny_video_set, tmp_path) -> None:
    runner = tiny_runner(tmp_path, tiny_video_set, 1)
    runner.train()
    resumed = tiny_runner(tmp_path, tiny_video_set, 2, resume=True)
    resumed.train()
    assert resumed.epoch == 2 and (tmp_path / 'epoch_2.pth').exists()
    assert resumed.iter == 8  # 4 iterations per epoch, continued, not restarted
    # the log history pickled in the checkpoint (HistoryBuffer) came back: both epochs' losses
    assert len(resumed.message_hub.get_scalar('train/loss').data[0]) == 8
