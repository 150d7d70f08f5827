# The standard ViTDet-B Mask R-CNN recipe (MMDetection projects/ViTDet = detectron2's ViTDet):
# 1024x1024 inputs, window attention (14) with global blocks 2, 5, 8, 11, decomposed relative
# positions, drop path 0.1, MAE initialisation. DnA by default; a softmax MAE file gets the
# DnA negative branch generated on load (Q- = 1e-4 Q, V- = -1e-4 V, alpha = 0.5).
# Block norms: LN eps 1e-6 (detectron2 and the reference class's default; MMDetection's config
# passes dict(type='LN'), which mmcv builds with eps 1e-5).
_base_ = ['./vitdet_mask_rcnn.py']
model = dict(
    data_preprocessor=dict(batch_augments=[dict(type='BatchFixedSizePad', size=(1024, 1024), pad_mask=True)]),
    backbone=dict(
        img_size=1024,
        drop_path_rate=0.1,
        window_size=14,
        window_block_indexes=[0, 1, 3, 4, 6, 7, 9, 10],
        use_rel_pos=True,
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/mae_pretrain_vit_base.pth'),
    ),
)
