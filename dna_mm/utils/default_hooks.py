"""The default hooks mmengine's runner registers by name (0.10.7,
``Runner.register_default_hooks``): a config's ``default_hooks`` entry without a ``type`` merges
into one of them, and ``None`` removes one."""

MMENGINE_DEFAULT_HOOKS = ('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler', 'checkpoint')
