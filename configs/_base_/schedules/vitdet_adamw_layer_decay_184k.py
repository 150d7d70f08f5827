# The ViTDet recipe's optimisation (MMDetection projects/ViTDet): AdamW lr 1e-4, weight decay
# 0.1, betas (0.9, 0.999), layer-wise lr decay 0.7 over 12 blocks, AMP, 184,375 iterations at
# batch 64 (= 100 COCO epochs), warm-up 250 iterations, lr x0.1 at epochs 88 and 96.
_base_ = ['./vitdet_adamw_184k.py']
optim_wrapper = dict(
    _delete_=True,
    type='AutoAmpOptimWrapper',
    dtype='float16',  # mmcv's RoIAlign has no bf16 kernel (docs/mixed_precision.md)
    constructor='LayerDecayOptimizerConstructor',
    paramwise_cfg=dict(decay_rate=0.7, decay_type='layer_wise', num_layers=12),
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
)
auto_scale_lr = dict(enable=False, base_batch_size=64)
