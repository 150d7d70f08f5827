# The DnA paper's COCO optimisation: AdamW lr 1e-4, weight decay 0.1, eps 1e-6,
# betas (0.9, 0.999), 184,375 iterations at batch 32. The paper gives no lr schedule; this uses
# ViTDet's: linear warm-up over 250 iterations, lr x0.1 at 88.9% and 96.3% of the run.
# AutoAmpOptimWrapper (dna_mm): AMP on CUDA, full precision on CPU; fp16 (+ GradScaler) on every
# GPU, since mmcv's RoIAlign kernels have no bf16 (docs/mixed_precision.md).
max_iters = 184375
interval = 5000

optim_wrapper = dict(
    type='AutoAmpOptimWrapper',
    dtype='float16',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.1),
    paramwise_cfg=dict(
        custom_keys={
            'backbone.pos_embed': dict(decay_mult=0.0),
            # an attention member's gains (DnA's per-head alpha, Diff's lambda vectors): not
            # decayed, as LayerDecayOptimizerConstructor and the ImageNet pre-training do
            'alpha': dict(decay_mult=0.0),
            'lambda_': dict(decay_mult=0.0),
        }
    ),
)

param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),
    dict(type='MultiStepLR', begin=0, end=max_iters, by_epoch=False, milestones=[163889, 177546], gamma=0.1),
]

# dna_mm's IterBasedTrainLoop: a resumed run repeats the interrupted one exactly (with the
# runtime's RNGStateHook)
train_cfg = dict(
    type='ResumableIterBasedTrainLoop',
    max_iters=max_iters,
    val_interval=interval,
    dynamic_intervals=[(max_iters // interval * interval + 1, max_iters)],
)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='ResumableTestLoop')  # a stopped test goes on where it stood

# lr is for 32 images per iteration; `--auto-scale-lr` rescales it to the actual batch
auto_scale_lr = dict(enable=False, base_batch_size=32)
