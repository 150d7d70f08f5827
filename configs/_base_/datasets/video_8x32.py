# Shared video pipelines: 8 frames, interval 32; train RandomRescale(256, 320) -> RandomCrop 224
# -> Flip 0.5; validation: 1 clip x 1 centre crop 224; test: 1 clip x 3 crops 224 (left / centre /
# right of the short-side-224 frame), the authors' protocol on all three datasets (their
# TEST.NUM_ENSEMBLE_VIEWS 1, TEST.NUM_SPATIAL_CROPS 3). Views and memory: docs/training.md.
# MMAction2's VideoDataset + build-time checks (missing files, labels vs num_classes) and
# corrupt-video tolerance in training (dna_mm.datasets.RobustVideoDataset).
# Decoding (dna_mm.datasets.transforms): a video with a short side above `short_side` is decoded
# at that short side (the largest the pipeline rescales to, so the geometry is unchanged), and
# the sampled frames are decoded in increasing order, each from the keyframe before it, by
# dna_mm's PyAV reader (same frames as MMAction2's DecordInit + DecordDecode; `type='ScaledDecordInit'`
# reads with decord instead).
# Throughput per input size: docs/data_throughput.md (tools/benchmarks/benchmark_data.py).
dataset_type = 'RobustVideoDataset'
clip_len, frame_interval, crop_size = 8, 32, 224
file_client_args = dict(io_backend='disk')

train_pipeline = [
    dict(type='ScaledPyAVInit', short_side=320, **file_client_args),  # RandomRescale's largest
    dict(type='SampleFrames', clip_len=clip_len, frame_interval=frame_interval, num_clips=1),
    dict(type='SortedDecordDecode'),
    dict(type='RandomRescale', scale_range=(256, 320)),
    dict(type='RandomCrop', size=crop_size),
    dict(type='Flip', flip_ratio=0.5),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
val_pipeline = [
    dict(type='ScaledPyAVInit', short_side=crop_size, **file_client_args),  # Resize's short side
    dict(type='SampleFrames', clip_len=clip_len, frame_interval=frame_interval, num_clips=1, test_mode=True),
    dict(type='SortedDecordDecode'),
    dict(type='Resize', scale=(-1, crop_size)),
    dict(type='CenterCrop', crop_size=crop_size),
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]
test_pipeline = [
    dict(type='ScaledPyAVInit', short_side=crop_size, **file_client_args),
    dict(type='SampleFrames', clip_len=clip_len, frame_interval=frame_interval, num_clips=1, test_mode=True),
    dict(type='SortedDecordDecode'),
    dict(type='Resize', scale=(-1, crop_size)),
    dict(type='ThreeCrop', crop_size=crop_size),  # 3 views a clip: scores averaged
    dict(type='FormatShape', input_format='NCTHW'),
    dict(type='PackActionInputs'),
]

# top-1, top-5 and mean class accuracy (acc/top1, acc/top5, acc/mean1)
val_evaluator = dict(type='AccMetric', metric_list=('top_k_accuracy', 'mean_class_accuracy'))
test_evaluator = val_evaluator

# Dataset configs inheriting this file set `ann_file` / `data_prefix` of each loader.
train_dataloader = dict(
    batch_size=8,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, ann_file=None, data_prefix=dict(video=None), pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=8,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type, ann_file=None, data_prefix=dict(video=None), pipeline=val_pipeline, test_mode=True
    ),
)
test_dataloader = dict(
    batch_size=1,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type, ann_file=None, data_prefix=dict(video=None), pipeline=test_pipeline, test_mode=True
    ),
)
