# Runtime of the dna_mm detection configs (MMDetection's defaults, iteration-based, + dna_mm's
# imports, so MMDetection's own tools/train.py runs these configs too).
default_scope = 'mmdet'
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    # validation metrics at the iteration (mmengine's default: the epoch, always 0 in this loop)
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # DnARunner builds it as dna_mm's AtomicCheckpointHook (whole files, pruned after the save)
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=5000, save_last=True, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='DetVisualizationHook'),
    # SIGTERM / SIGUSR1 / Ctrl-C: save the iteration, exit with 128 + the signal's number (to requeue on)
    preemption=dict(type='PreemptionHook'),
    # a NaN / inf loss or gradient norm stops the run before the step is applied
    non_finite=dict(type='NonFiniteLossHook'),
)
# SkippedSamplesHook: how many unreadable training images were skipped (every 500 iterations, over
# all workers and ranks); RNGStateHook and PendingGradsHook: the random state and the gradients of
# an accumulation step not yet taken in each checkpoint, restored on resume by the schedule's
# ResumableIterBasedTrainLoop (exact resume)
custom_hooks = [dict(type='SkippedSamplesHook'), dict(type='RNGStateHook'), dict(type='PendingGradsHook')]

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # nccl on GPU; tools/train.py switches to gloo when CUDA is absent. timeout: seconds a rank
    # waits in a collective for the others (a lost or hung rank stops the job after it; NCCL's own
    # default is 30 min). It must cover what rank 0 does alone meanwhile: a checkpoint write, and
    # COCO's bbox + segm evaluation of a validation (minutes on val2017), hence 10 min here
    dist_cfg=dict(backend='nccl', timeout=600),
)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='DetLocalVisualizer', vis_backends=vis_backends, name='visualizer')
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=False)
log_level = 'INFO'
load_from = None
resume = False
