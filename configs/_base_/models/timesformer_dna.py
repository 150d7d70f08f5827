# TimeSformer-B/16, divided space-time, DnA (Q±V±) in both the temporal and the spatial
# attention of every block. Baselines override `attn_cfg` (one per step:
# attn_cfg=dict(_delete_=True, temporal=..., spatial=...): replace the base's dict, do not merge into it).
model = dict(
    type='Recognizer3D',
    backbone=dict(
        type='DnATimeSformer',
        # Local file: ImageNet (DnA-)ViT, timm ViT, or a softmax / DnA TimeSformer checkpoint.
        pretrained=None,
        num_frames=8,
        img_size=224,
        patch_size=16,
        embed_dims=768,
        num_heads=12,
        num_transformer_layers=12,
        in_channels=3,
        dropout_ratio=0.0,
        attention_type='divided_space_time',
        attn_cfg=dict(type='DnAAttention', variant='qpm_vpm'),
        drop_path_rate=0.1,
        norm_cfg=dict(type='LN', eps=1e-6),
    ),
    cls_head=dict(
        type='TimeSformerHead',
        num_classes=400,
        in_channels=768,
        dropout_ratio=0.5,
        average_clips='prob',
        # the head's default, written out: a child sets loss_cls.loss_weight / class_weight on it
        loss_cls=dict(type='CrossEntropyLoss'),
    ),
    # Input normalisation of the authors' video code (PySlowFast's DATA.MEAN / DATA.STD):
    # (x / 255 - 0.45) / 0.225 per channel. Their TimeSformer checkpoints (K400, NTU, Smarthome)
    # were trained on it; fine-tuning from them, or testing them, needs the same pixels.
    # MMAction2's own TimeSformer configs use mean = std = 127.5 (made for the JAX ImageNet-21k
    # ViT): to start from MMAction2's checkpoints set mean=[127.5] * 3, std=[127.5] * 3 here.
    # Test views (clips x crops, 3 in the dataset bases) go through the backbone
    # `max_testing_views` at a time (MMAction2's Recognizer3D; None: all at once). A bound such
    # as 1 caps test memory at one clip's; it needs val / test batch_size=1 (docs/training.md).
    test_cfg=dict(max_testing_views=None),
    data_preprocessor=dict(
        type='ActionDataPreprocessor', mean=[0.45 * 255] * 3, std=[0.225 * 255] * 3, format_shape='NCTHW'
    ),
)
