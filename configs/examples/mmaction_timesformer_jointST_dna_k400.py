# DnA in a model class MMAction2 ships, by config alone: MMAction2's own `TimeSformer` (joint
# space-time), its layers written with mmcv's `MultiheadAttention` as an MMAction2 config
# writes them, and `with_attention` swapping every one for DnA (dna_mm's `TokenAttention`).
_base_ = [
    '../_base_/models/timesformer_dna.py',
    '../_base_/datasets/k400.py',
    '../_base_/schedules/sgd_15e.py',
    '../_base_/default_runtime.py',
]
embed_dims, num_heads, num_layers = 768, 12, 12
joint_timesformer = dict(
    type='TimeSformer',  # MMAction2's class, unchanged
    num_frames=8,
    img_size=224,
    patch_size=16,
    embed_dims=embed_dims,
    num_heads=num_heads,
    num_transformer_layers=num_layers,
    attention_type='joint_space_time',
    pretrained=None,
    transformer_layers=dict(
        type='TransformerLayerSequence',
        num_layers=num_layers,
        transformerlayers=dict(
            type='BaseTransformerLayer',
            attn_cfgs=[
                dict(
                    type='MultiheadAttention',
                    embed_dims=embed_dims,
                    num_heads=num_heads,
                    batch_first=True,
                    dropout_layer=dict(type='DropPath', drop_prob=0.1),
                )
            ],
            ffn_cfgs=dict(
                type='FFN',
                embed_dims=embed_dims,
                feedforward_channels=4 * embed_dims,
                num_fcs=2,
                act_cfg=dict(type='GELU'),
                dropout_layer=dict(type='DropPath', drop_prob=0.1),
            ),
            operation_order=('norm', 'self_attn', 'norm', 'ffn'),
            norm_cfg=dict(type='LN', eps=1e-6),
            batch_first=True,
        ),
    ),
)
model = dict(
    backbone=dict(
        _delete_=True,
        type='with_attention',
        model=joint_timesformer,
        attn_cfg=dict(type='DnAAttention', variant='qpm_vpm'),
    )
)
