# An ImageNet classifier on a timm ViT-B/16 (MMPretrain's ImageClassifier + TIMMBackbone): the
# class token after the last norm (dna_mm's ClsTokenNeck) into a linear head; stochastic depth
# 0.15, label smoothing 0.1, Mixup 0.8 / CutMix 1.0. A leaf sets the timm model (or swaps its
# attention with with_attention). The checkpoint's backbone keys are timm's under
# `backbone.timm_model.`: the video and detection configs read it as it is (`pretrained=`).
model_name = 'dna_vit_base_patch16_224'
embed_dims = 768
model = dict(
    type='ImageClassifier',
    backbone=dict(type='TIMMBackbone', model_name=model_name, drop_path_rate=0.15),
    neck=dict(type='ClsTokenNeck'),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=embed_dims,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=0.02),
    ),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]),
)
