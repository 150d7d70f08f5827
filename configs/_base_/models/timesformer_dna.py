# TimeSformer-B/16, divided space-time, DnA (Q±V±) in both the temporal and the spatial
# attention of every block. Baselines override `temporal_attn` / `spatial_attn`.
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
        temporal_attn=dict(type='DnAAttention', variant='qpm_vpm'),
        spatial_attn=dict(type='DnAAttention', variant='qpm_vpm'),
        drop_path_rate=0.1,
        norm_cfg=dict(type='LN', eps=1e-6),
    ),
    cls_head=dict(
        type='TimeSformerHead', num_classes=400, in_channels=768, dropout_ratio=0.5, average_clips='prob'
    ),
    data_preprocessor=dict(
        type='ActionDataPreprocessor',
        mean=[127.5, 127.5, 127.5],
        std=[127.5, 127.5, 127.5],
        format_shape='NCTHW',
    ),
)
