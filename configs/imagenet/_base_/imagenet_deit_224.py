# ImageNet-1K with the paper's augmentation (its supplementary Table "supp_imnet_hp"; the authors'
# vit/main.py, DeiT's timm pipeline): RandomResizedCrop 224, scale (0.08, 1), ratio (0.67, 1.5),
# bicubic; flip 0.5; RandAugment rand-m9-mstd0.5-inc1 (9 / 0.5); random erasing 0.25 (the
# script's default). Colour jitter 0.3 is in the table, but timm's create_transform, which the
# authors' script calls, applies colour jitter only without RandAugment: so no step here.
# Test: resize to 224 / 0.9 = 249 (crop ratio 0.9), centre crop 224. Images are ImageNet's
# folders (docs/datasets/imagenet.md): data/imagenet/{train,val}/<wnid>/*.JPEG, or meta/*.txt lists.
dataset_type = 'ImageNet'
data_root = 'data/imagenet'
crop_size, crop_ratio = 224, 0.9
data_preprocessor = dict(
    num_classes=1000,
    mean=[123.675, 116.28, 103.53],  # timm's IMAGENET_DEFAULT_MEAN / STD, on 0-255 RGB
    std=[58.395, 57.12, 57.375],
    to_rgb=True,
)
bgr_mean = data_preprocessor['mean'][::-1]
bgr_std = data_preprocessor['std'][::-1]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=crop_size,
        crop_ratio_range=(0.08, 1.0),
        aspect_ratio_range=(0.67, 1.5),
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic'),
    ),
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=bgr_mean,
        fill_std=bgr_std,
    ),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=int(crop_size / crop_ratio),
        edge='short',
        backend='pillow',
        interpolation='bicubic',
    ),
    dict(type='CenterCrop', crop_size=crop_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=256,  # x 4 accumulation steps on one GPU = the global 1024 (global_batch_size)
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, split='val', pipeline=test_pipeline),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator
