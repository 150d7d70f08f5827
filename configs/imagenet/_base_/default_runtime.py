# Runtime of the ImageNet configs: MMPretrain's scope, dna_mm's runner (strict whole-model loads,
# resumable loops, the random state in checkpoints), a checkpoint an epoch and the best by top-1.
default_scope = 'mmpretrain'
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)  # registers every dna_mm type
runner_type = 'DnARunner'
load_partial = False  # True (tools: --partial-load): accept a checkpoint that does not match the model
log_setup_to_console = False  # True (tools: --verbose): print the setup dump on the terminal too

default_hooks = dict(
    runtime_info=dict(type='RuntimeInfoHook'),
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100, ignore_last=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3, save_best='auto'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
)
custom_hooks = [dict(type='RNGStateHook'), dict(type='PendingGradsHook')]

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # nccl on GPU; tools/train.py switches to gloo when CUDA is absent. timeout: seconds a rank
    # waits in a collective for the others (a lost or hung rank stops the job after it; NCCL's own
    # default is 30 min). It must cover what rank 0 does alone meanwhile: a checkpoint write, the
    # end of a validation
    dist_cfg=dict(backend='nccl', timeout=300),
)
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0)
