# The DnA paper's video recipe: SGD lr 0.005, momentum 0.9, wd 1e-4, 15 epochs, lr x0.1 at
# epochs 11 and 14, batch 8 per GPU. AutoAmpOptimWrapper (dna_mm): bf16 on GPUs from sm80, fp16 +
# GradScaler on older ones, plain on CPU (docs/mixed_precision.md).
# dna_mm's EpochBasedTrainLoop: a resumed run repeats the interrupted one exactly (with the
# runtime's RNGStateHook)
train_cfg = dict(type='ResumableEpochBasedTrainLoop', max_epochs=15, val_begin=1, val_interval=1)

optim_wrapper = dict(
    type='AutoAmpOptimWrapper',
    optimizer=dict(type='SGD', lr=0.005, momentum=0.9, weight_decay=1e-4, nesterov=True),
    # One weight decay for every parameter, the embeddings (cls_token, pos_embed, time_embed)
    # included, as the authors' TimeSformer code has it. (MMAction2's TimeSformer config names
    # them '.backbone.cls_token', ... to exempt them; mmengine matches a key against
    # 'backbone.cls_token', so those keys exempt nothing there either.)
    paramwise_cfg=dict(
        custom_keys={
            # the one exception: an attention member's gains (DnA's per-head alpha, Diff's lambda
            # vectors) are not decayed, as in the ImageNet pre-training (timm: no decay on 1-d
            # parameters)
            'alpha': dict(decay_mult=0.0),
            'lambda_': dict(decay_mult=0.0),
        }
    ),
    clip_grad=dict(max_norm=40, norm_type=2),
)

param_scheduler = [dict(type='MultiStepLR', begin=0, end=15, by_epoch=True, milestones=[11, 14], gamma=0.1)]

# The recipe's global batch: 64 clips per optimizer step (8 GPUs x 8 clips; the authors' code
# accumulates gradients to GLOBAL_BATCH_SIZE = 64). tools/train.py reaches it on any number of
# GPUs by gradient accumulation (world size x batch x steps, logged; docs/training.md);
# `--global-batch none` turns it off, `--auto-scale-lr` rescales the lr to the actual batch instead.
global_batch_size = 64
auto_scale_lr = dict(enable=False, base_batch_size=global_batch_size)
