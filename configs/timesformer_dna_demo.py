# The embedded demo: a tiny TimeSformer-DnA on the synthetic motion clips that `make demo`
# generates under data/demo (4 classes: a red target stays still or moves horizontally,
# vertically or diagonally, among moving distractors and noise). Trains on 2 CPU cores in a
# few minutes.
#   python tools/demos/demo.py            # generate (cached), train, test
_base_ = ['./timesformer_dna_k400.py']
import os.path as osp  # noqa: E402 (after _base_: mmengine reads a config that imports first as a lazy one)

# The clips: data/demo of the checkout this config is in (`make demo` writes them there), found from
# any folder; an installed dna_mm has no checkout: data/demo of the folder you run in, where
# `dna_mm demo` writes them.
checkout = osp.dirname(osp.realpath('{{ fileDirname }}'))
in_checkout = osp.isdir(osp.join(checkout, 'dna_mm'))
data_root = osp.join(checkout, 'data', 'demo') if in_checkout else 'data/demo'
num_classes = 4
label_map = f'{data_root}/classes.txt'  # written with the clips
clip_len, frame_interval, size = 8, 2, 32

model = dict(
    backbone=dict(
        pretrained=None,
        num_frames=clip_len,
        img_size=size,
        patch_size=8,
        embed_dims=96,
        num_heads=4,
        num_transformer_layers=3,
        drop_path_rate=0.0,
    ),
    cls_head=dict(num_classes=num_classes, in_channels=96, dropout_ratio=0.0),
    # The demo trains from scratch on its own clips and keeps its normalisation (mean = std =
    # 127.5), not the authors' (x / 255 - 0.45) / 0.225 of the paper configs.
    data_preprocessor=dict(mean=[127.5] * 3, std=[127.5] * 3),
)

# The classes are flip-invariant, but the demo keeps the pipeline minimal.
train_pipeline = [
    dict(type='DecordInit', io_backend='disk'),
    dict(type='SampleFrames', clip_len=clip_len, frame_interval=frame_interval, num_clips=1),
    dict(type='DecordDecode'),
    dict(type='Resize', scale=(size, size), keep_ratio=False),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
test_pipeline = [
    dict(type='DecordInit', io_backend='disk'),
    dict(type='SampleFrames', clip_len=clip_len, frame_interval=frame_interval, num_clips=1, test_mode=True),
    dict(type='DecordDecode'),
    dict(type='Resize', scale=(size, size), keep_ratio=False),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
loader = dict(batch_size=8, num_workers=2, persistent_workers=False)
dataset = dict(num_classes=num_classes, data_prefix=dict(video=f'{data_root}/videos'))
train_dataloader = dict(
    **loader, dataset=dict(**dataset, ann_file=f'{data_root}/train.txt', pipeline=train_pipeline)
)
val_dataloader = dict(
    **loader, dataset=dict(**dataset, ann_file=f'{data_root}/test.txt', pipeline=test_pipeline)
)
test_dataloader = dict(
    **loader, dataset=dict(**dataset, ann_file=f'{data_root}/test.txt', pipeline=test_pipeline)
)

max_epochs = 20
global_batch_size = None  # one step per batch of 8, as it runs (no gradient accumulation)
auto_scale_lr = dict(enable=False, base_batch_size=8)  # --auto-scale-lr: the lr above is for 8 clips
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='AdamW', lr=5e-4, weight_decay=0.05),
    clip_grad=dict(max_norm=5, norm_type=2),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - 1, by_epoch=True, begin=1, end=max_epochs),
]
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs, save_best=None))
randomness = dict(seed=0)
