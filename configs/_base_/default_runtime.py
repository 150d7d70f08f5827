# Runtime shared by every dna_mm config (MMAction2's defaults + dna_mm's imports).
default_scope = 'mmaction'
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)  # registers every dna_mm type
# dna_mm.engine.DnARunner: strict whole-model loads (load_from / resume / tools/test.py), a plain
# message when `resume` finds nothing, and the setup dump (environment, config, hooks) in the
# log file only. dna_mm's tools and MMDetection's stock tools honour `runner_type`; MMAction2
# 1.1.0's stock tools/train.py always builds mmengine's plain Runner.
runner_type = 'DnARunner'
load_partial = False  # True (tools: --partial-load): accept a checkpoint that does not
# match the model; the keys not loaded are printed
log_setup_to_console = False  # True (tools: --verbose): print the setup dump on the terminal too

default_hooks = dict(
    runtime_info=dict(type='RuntimeInfoHook'),
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=20, ignore_last=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # DnARunner builds it as dna_mm's AtomicCheckpointHook: whole files, the old ones removed
    # only once the new one is written
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3, save_best='auto'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    sync_buffers=dict(type='SyncBuffersHook'),
    # SIGTERM / SIGUSR1 / Ctrl-C: save the iteration, exit with 128 + the signal's number (to requeue on)
    preemption=dict(type='PreemptionHook'),
    # a NaN / inf loss or gradient norm stops the run before the step is applied
    # (max_skips_in_a_row=N: skip up to N such steps in a row instead)
    non_finite=dict(type='NonFiniteLossHook'),
)
# SkippedSamplesHook: per-epoch total of unreadable training videos skipped, over all workers and
# ranks. RNGStateHook: the random state in each checkpoint, restored on resume by the
# schedules' Resumable*TrainLoop; PendingGradsHook: the gradients of an accumulation step not
# yet taken, given back on resume (exact resume; without them dna_mm's runner logs that a resumed
# run is not guaranteed to repeat the interrupted one).
custom_hooks = [dict(type='SkippedSamplesHook'), dict(type='RNGStateHook'), dict(type='PendingGradsHook')]
# an unreadable validation video is skipped (named in a warning, counted), not the end of the run
val_cfg = dict(type='UnreadableVideosValLoop')
# every unreadable test video listed at once (tools/test.py --skip-unreadable: the metrics over
# the others); other datasets are tested as by mmengine's TestLoop
test_cfg = dict(type='UnreadableVideosTestLoop')

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # nccl on GPU; tools/train.py switches to gloo when CUDA is absent. timeout: seconds a rank
    # waits in a collective for the others (a lost or hung rank stops the job after it; NCCL's own
    # default is 30 min). It must cover what rank 0 does alone meanwhile: a checkpoint write, the
    # end of a validation
    dist_cfg=dict(backend='nccl', timeout=300),
)

log_processor = dict(type='LogProcessor', window_size=20, by_epoch=True)
# TensorBoard (scalars under <work_dir>/<timestamp>/vis_data): `tools/train.py --tensorboard`,
# or in a config: visualizer = dict(vis_backends=[dict(type='LocalVisBackend'),
#                                                 dict(type='TensorboardVisBackend')])
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='ActionVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
