# `make demo-det`: a tiny ViTDet-DnA Mask R-CNN (4 blocks of 96 channels, window 4 + global blocks,
# rel-pos; narrow neck and heads) trained from scratch on the generated shapes set
# (dna_mm/synthetic/coco_shapes.py, 3 classes, 128x128 PNGs + COCO json) on CPU in minutes.
# Heads narrowed and a 2-fc box head, so that a CPU step costs well under a second.
_base_ = [
    '_base_/models/vitdet_mask_rcnn.py',
    '_base_/datasets/coco_instance_224.py',
    '_base_/schedules/vitdet_adamw_184k.py',
    '_base_/default_runtime_det.py',
]
import os.path as osp  # noqa: E402 (after _base_: mmengine reads a config that imports first as a lazy one)

# The images: data/demo_coco of the checkout this config is in (`make demo-det` writes them there),
# found from any folder; an installed dna_mm has no checkout: data/demo_coco of the folder you run
# in, where `dna_mm demo_det` writes them.
checkout = osp.dirname(osp.realpath('{{ fileDirname }}'))
in_checkout = osp.isdir(osp.join(checkout, 'dna_mm'))
data_root = osp.join(checkout, 'data', 'demo_coco', '') if in_checkout else 'data/demo_coco/'
classes = ('square', 'disc', 'triangle')
size = 128
width = 96
channels = 64

model = dict(
    data_preprocessor=dict(batch_augments=None),
    backbone=dict(
        attn_cfg='dna',
        img_size=size,
        embed_dim=width,
        depth=4,
        num_heads=4,
        window_size=4,
        window_block_indexes=[0, 2],
        use_rel_pos=True,
        pretrain_img_size=size,
    ),
    neck=dict(
        backbone_channel=width, in_channels=[width // 4, width // 2, width, width], out_channels=channels
    ),
    rpn_head=dict(in_channels=channels, feat_channels=channels),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=channels),
        # the standard 2-fc box head: ViTDet's 4 convs over every sampled RoI dominate a CPU step
        bbox_head=dict(
            _delete_=True,
            type='Shared2FCBBoxHead',
            in_channels=channels,
            fc_out_channels=256,
            roi_feat_size=7,
            num_classes=len(classes),
            bbox_coder=dict(
                type='DeltaXYWHBBoxCoder', target_means=[0.0, 0.0, 0.0, 0.0], target_stds=[0.1, 0.1, 0.2, 0.2]
            ),
            reg_class_agnostic=False,
            loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
            loss_bbox=dict(type='L1Loss', loss_weight=1.0),
        ),
        mask_roi_extractor=dict(out_channels=channels),
        mask_head=dict(
            num_convs=2, in_channels=channels, conv_out_channels=channels, num_classes=len(classes)
        ),
    ),
    train_cfg=dict(rpn_proposal=dict(nms_pre=1000, max_per_img=200), rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(rpn=dict(nms_pre=500, max_per_img=200)),
)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(size, size), keep_ratio=True),  # sets scale_factor (1 here)
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
metainfo = dict(classes=classes)
# data loading is cheap here (128x128 PNGs): no worker processes competing for the 2 cores
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_train.json',
        data_prefix=dict(img='images/train/'),
        filter_cfg=dict(filter_empty_gt=True, min_size=8),
        pipeline=train_pipeline,
    ),
)
test_dataloader = dict(
    batch_size=8,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        ann_file='annotations/instances_test.json',
        data_prefix=dict(img='images/test/'),
        pipeline=test_pipeline,
    ),
)
test_evaluator = dict(ann_file=data_root + 'annotations/instances_test.json')
# Validation is defined (MMDetection's tools read it, e.g. analysis_tools/get_flops.py) but
# not run while training (val_begin after the last iteration): tools/test.py evaluates the last
# checkpoint (make demo-det).
val_dataloader = test_dataloader
val_evaluator = test_evaluator

max_iters = 500
optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.05), clip_grad=dict(max_norm=10.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=0, end=max_iters, T_max=max_iters, eta_min=1e-5),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters, val_begin=10**9, dynamic_intervals=None)
default_hooks = dict(
    logger=dict(interval=25),
    checkpoint=dict(interval=max_iters, max_keep_ckpts=1),
    visualization=dict(draw=False),
)
randomness = dict(seed=0)
