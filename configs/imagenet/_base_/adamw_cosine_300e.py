# The paper's ImageNet schedule (Table "supp_imnet_hp"): AdamW, lr 1e-3 for a global batch of
# 1024 (the authors' 5e-4 x 1024 / 512), eps 1e-8, weight decay 0.075 (none on norms, biases,
# cls_token, pos_embed, as timm's optimizer factory); cosine from lr to 1e-5 over 300 epochs after
# 5 warm-up epochs from 1e-6; label smoothing 0.1; Mixup 0.8 / CutMix 1.0 switched per batch
# (timm's mixup_mode 'batch', switch probability 0.5). No EMA (the authors ran --no-model-ema).
# The global batch is reached on any number of GPUs by gradient accumulation (tools/train.py).
# Mixed precision as the authors trained (autocast with a loss scaler on CUDA), by dna_mm's
# AutoAmpOptimWrapper: bf16 on GPUs from sm80, fp16 + GradScaler below, full precision on a CPU.
max_epochs, warmup_epochs = 300, 5
lr, warmup_lr, min_lr = 1e-3, 1e-6, 1e-5
global_batch_size = 1024
optim_wrapper = dict(
    type='AutoAmpOptimWrapper',
    optimizer=dict(type='AdamW', lr=lr, weight_decay=0.075, eps=1e-8, betas=(0.9, 0.999)),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={'.cls_token': dict(decay_mult=0.0), '.pos_embed': dict(decay_mult=0.0)},
    ),
)
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=warmup_lr / lr,
        by_epoch=True,
        begin=0,
        end=warmup_epochs,
        convert_to_iter_based=True,
    ),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - warmup_epochs,
        eta_min=min_lr,
        by_epoch=True,
        begin=warmup_epochs,
        end=max_epochs,
        convert_to_iter_based=True,
    ),
]
train_cfg = dict(type='ResumableEpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='ResumableTestLoop')  # a stopped test goes on where it stood
auto_scale_lr = dict(enable=False, base_batch_size=global_batch_size)
