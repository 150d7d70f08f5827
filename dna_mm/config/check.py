"""Config values checked before anything is built: one :class:`~dna_mm.errors.ConfigError` that
names every bad key and its value.

* what training needs (``mode='train'``): ``train_dataloader``, ``train_cfg`` and
  ``optim_wrapper``, which a config made for testing (MMAction2's VideoMAE zoo files) lacks;
* ``optim_wrapper.type='AmpOptimWrapper'`` (mmengine's, as MMAction2's ``-amp-`` zoo configs
  name it) on a machine without an accelerator it takes, where mmengine would stop on an
  assertion after building the model: ``AutoAmpOptimWrapper`` or ``OptimWrapper`` are named;
* lengths and intervals: ``train_cfg.max_epochs`` / ``max_iters``, ``train_cfg.val_interval``,
  ``default_hooks.logger.interval`` must be > 0; ``default_hooks.checkpoint.interval`` > 0 or
  -1 (mmengine's "never");
* batch sizes (> 0) and ``num_workers`` (>= 0) of every dataloader, and its keys: those
  mmengine's ``build_dataloader`` reads and torch's ``DataLoader`` takes (a typo such as
  ``batchsize`` would stop the run with a ``TypeError`` after the model was built), the closest
  valid name suggested;
* ``randomness``' keys: those of mmengine's ``Runner.set_randomness``;
* learning rates: ``optim_wrapper.optimizer.lr`` (and each ``optim_wrapper.<name>.optimizer.lr``
  of a multi-optimizer config) > 0;
* clip and crop sizes in every pipeline: ``SampleFrames`` ``clip_len`` / ``frame_interval`` /
  ``num_clips``, ``crop_size`` / ``size`` of the crops, ``Resize.scale`` (> 0, or -1 for "keep
  the aspect ratio");
* ``model.test_cfg.max_testing_views`` (MMAction2's): a positive int, and then the val / test
  dataloaders' ``batch_size`` is 1 (the recognizer splits the views of one video);
* ``default_hooks.checkpoint``'s keys: mmengine's ``CheckpointHook`` passes the ones it does not
  know on to the checkpoint save, where a typo (``intervl``) would fail only at the first save,
  after an epoch of training; the closest valid name is suggested;
* ``compile`` (mmengine compiles ``train_step`` with it): ``True`` / ``False``, or a dict of
  ``torch.compile``'s keyword arguments (``backend``, ``mode``, ...), a misspelt one with the
  closest valid name; mmengine would stop on it with an assertion after building everything;
* attention names under ``model`` (``attn_cfg``, also per step: ``attn_cfg.temporal`` /
  ``.spatial``; and its deprecated aliases): one of dna_mm's, else the closest valid name is
  suggested (``'dnaa'`` → ``DnAAttention / dna``);
* a ``model.data_preprocessor`` beside a top-level ``data_preprocessor`` (MMPretrain's
  configs, the ImageNet ones, keep the normalisation there) that lacks the top-level one's
  ``mean`` / ``std`` / ``to_rgb``: mmengine's runner merges the top-level one only into a model
  that has none, so ``--cfg-options model.data_preprocessor.num_classes=4`` would silently
  train and test on unnormalised pixels; ``data_preprocessor.<key>`` is named instead.

``mode='test'`` checks only what a test / inference run uses (the model and the test
dataloader).
"""

from __future__ import annotations

import difflib
from typing import Any, Iterator

from mmengine.config import Config

from ..errors import ConfigError
from ..models.attention.builder import suggest_attention

LOADERS = {'train': ('train_dataloader', 'val_dataloader', 'test_dataloader'), 'test': ('test_dataloader',)}
#: the keyword every host takes its attention by (``dna_mm.models.attention.builder.ATTENTION_KEY``),
#: then DnATimeSformer's deprecated aliases (removed in the next release)
ATTENTION_KEYS = ('attn_cfg', 'temporal_attn', 'spatial_attn')
#: the per-step keys of a DnATimeSformer's ``attn_cfg=dict(temporal=..., spatial=...)``
STEP_KEYS = ('temporal', 'spatial')
# transform type -> its size arguments that must be > 0
CROP_KEYS = {
    'SampleFrames': ('clip_len', 'frame_interval', 'num_clips'),
    'UniformSample': ('clip_len', 'num_clips'),
    'RandomCrop': ('size',),
    'CenterCrop': ('crop_size',),
    'ThreeCrop': ('crop_size',),
    'TenCrop': ('crop_size',),
    'MultiScaleCrop': ('input_size',),
}


def check_config(cfg: Config, mode: str = 'train') -> None:
    """Raise a :class:`ConfigError` listing every value that cannot work (see the module
    docstring); return quietly otherwise."""
    problems = list(_attention_problems(cfg.get('model'), 'model'))
    problems += _preprocessor_problems(cfg)
    if mode == 'train':
        problems += _train_problems(cfg)
    problems += _testing_views_problems(cfg, LOADERS[mode][1:] if mode == 'train' else LOADERS[mode])
    for loader in LOADERS[mode]:
        problems += _loader_problems(cfg.get(loader), loader)
    problems += _randomness_problems(cfg.get('randomness'))
    if problems:
        raise ConfigError('; '.join(problems))


def _randomness_problems(randomness: Any) -> list[str]:
    """``randomness``' keys against mmengine's ``Runner.set_randomness`` (a typo would be a
    ``TypeError`` as the runner is made)."""
    import inspect

    from mmengine.runner import Runner

    if not isinstance(randomness, dict):
        return []
    valid = [p for p in inspect.signature(Runner.set_randomness).parameters if p != 'self']
    return _unknown_keys(randomness, valid, 'randomness', "an argument of mmengine's Runner.set_randomness")


def _positive(value: Any, key: str, allow: tuple = ()) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value in allow or value > 0:
        return []
    alt = f' (or {" / ".join(map(str, allow))})' if allow else ''
    return [f'{key} must be > 0{alt}, got {value}']


#: what mmengine's runner needs to train (it raises a ``RuntimeError`` at ``train()`` without them)
TRAIN_KEYS = ('train_dataloader', 'train_cfg', 'optim_wrapper')


def _train_problems(cfg: Config) -> list[str]:
    missing = [key for key in TRAIN_KEYS if not cfg.get(key)]
    if missing:
        return [
            f'{", ".join(missing)}: not in the config, so it cannot train (a config made for testing; '
            f'add {"them" if len(missing) > 1 else "it"} to train with it)'
        ]
    out: list[str] = []
    train_cfg = cfg.get('train_cfg') or {}
    for key in ('max_epochs', 'max_iters', 'val_interval'):
        out += _positive(train_cfg.get(key), f'train_cfg.{key}')
    hooks = cfg.get('default_hooks') or {}
    out += _checkpoint_keys(hooks.get('checkpoint'))
    out += _positive((hooks.get('logger') or {}).get('interval'), 'default_hooks.logger.interval')
    out += _positive(
        (hooks.get('checkpoint') or {}).get('interval'), 'default_hooks.checkpoint.interval', (-1,)
    )
    out += _compile_problems(cfg.get('compile'))
    wrapper = cfg.get('optim_wrapper') or {}
    out += _amp_problems(wrapper)
    for name, sub in [('', wrapper), *wrapper.items()]:  # multi-optimizer configs: one per module
        if isinstance(sub, dict) and isinstance(sub.get('optimizer'), dict):
            out += _positive(
                sub['optimizer'].get('lr'), f'optim_wrapper.{name}{"." if name else ""}optimizer.lr'
            )
    return out


def _preprocessor_problems(cfg: Config) -> list[str]:
    """The top-level ``data_preprocessor``'s normalisation keys a ``model.data_preprocessor``
    would drop (the runner uses the model's alone when it has one)."""
    top, model = cfg.get('data_preprocessor'), cfg.get('model')
    own = model.get('data_preprocessor') if isinstance(model, dict) else None
    if not isinstance(top, dict) or not isinstance(own, dict):
        return []
    given = [key for key in ('mean', 'std') if top.get(key) is not None]
    given += ['to_rgb'] if top.get('to_rgb') else []  # False: nothing to lose
    lost = [key for key in given if key not in own]
    if not lost:
        return []
    return [
        f'model.data_preprocessor is set, so the runner ignores the top-level data_preprocessor and '
        f'its {" / ".join(lost)} (the model would see unnormalised pixels): set '
        f'data_preprocessor.<key> instead (e.g. data_preprocessor.num_classes), or give '
        f'model.data_preprocessor the {" / ".join(lost)} too'
    ]


def _amp_problems(wrapper: dict) -> list[str]:
    """mmengine's ``AmpOptimWrapper`` asserts a CUDA, NPU, MLU or MUSA device when it is built."""
    if wrapper.get('type') not in ('AmpOptimWrapper', 'mmengine.AmpOptimWrapper'):
        return []
    from mmengine.device import is_cuda_available, is_mlu_available, is_musa_available, is_npu_available

    if is_cuda_available() or is_npu_available() or is_mlu_available() or is_musa_available():
        return []
    return [
        "optim_wrapper.type='AmpOptimWrapper' needs a GPU, and there is none here: set "
        'optim_wrapper.type=AutoAmpOptimWrapper (mixed precision on a GPU, full precision without '
        'one) or OptimWrapper (full precision)'
    ]


def _compile_problems(value: Any) -> list[str]:
    """``compile``: ``None`` / a bool, or a dict whose keys ``torch.compile`` takes."""
    if value is None or isinstance(value, bool):
        return []
    if not isinstance(value, dict):
        return [
            f'compile must be True / False or a dict of torch.compile arguments '
            f"(e.g. dict(mode='max-autotune')), got {value!r}"
        ]
    import inspect

    import torch

    valid = [n for n in inspect.signature(torch.compile).parameters if n != 'model']
    return _unknown_keys(value, valid, 'compile', 'an argument of torch.compile')


def _checkpoint_keys(hook: Any) -> list[str]:
    """Keys of ``default_hooks.checkpoint`` that neither mmengine's ``CheckpointHook`` nor the
    runner's ``save_checkpoint`` (where the hook passes the rest) takes."""
    if not isinstance(hook, dict) or hook.get('type', 'CheckpointHook') != 'CheckpointHook':
        return []
    from mmengine.hooks import CheckpointHook
    from mmengine.runner import Runner

    from ..utils.build_errors import accepted_arguments

    valid = list(
        dict.fromkeys(accepted_arguments(CheckpointHook) + accepted_arguments(Runner.save_checkpoint))
    )
    out = []
    for key in sorted(
        k for k in set(hook) - {'type', 'priority', *valid} if not k.startswith('_')
    ):  # _scope_
        close = difflib.get_close_matches(key, valid, n=3, cutoff=0.6)
        hint = (
            f"did you mean {' / '.join(repr(c) for c in close)}?" if close else f"it takes {', '.join(valid)}"
        )
        out.append(
            f'default_hooks.checkpoint.{key}: the hook CheckpointHook takes no argument {key!r}; {hint}'
        )
    return out


def _testing_views_problems(cfg: Config, loaders: tuple[str, ...]) -> list[str]:
    """``model.test_cfg.max_testing_views``: an int > 0 (or None), with batch_size 1 in ``loaders``
    (MMAction2's Recognizer3D asserts it)."""
    views = ((cfg.get('model') or {}).get('test_cfg') or {}).get('max_testing_views')
    if views is None or views is False:
        return []
    if isinstance(views, bool) or not isinstance(views, int) or views <= 0:
        return [
            f'model.test_cfg.max_testing_views must be a positive int (or None: all views), got {views!r}'
        ]
    return [
        f'{name}.batch_size must be 1 with model.test_cfg.max_testing_views={views} (the views of one '
        f'video are split), got {loader.get("batch_size")}'
        for name in loaders
        if isinstance(loader := cfg.get(name), dict) and loader.get('batch_size', 1) != 1
    ]


def _unknown_keys(node: dict, valid: list[str], key: str, what: str) -> list[str]:
    """Each key ``k`` of ``node`` not in ``valid``: ``'{key}.{k} is not {what} (did you mean ...?
    valid: ...)'``, the closest valid name suggested."""
    out = []
    for k in node:
        if k not in valid:
            near = difflib.get_close_matches(str(k), valid, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(f'{key}.{k} is not {what} ({hint}valid: {", ".join(valid)})')
    return out


def _loader_keys() -> list[str]:
    """The keys of a dataloader config: what mmengine's ``build_dataloader`` reads (0.10.7) and
    the keyword arguments of torch's ``DataLoader`` it passes the rest to."""
    import inspect

    from torch.utils.data import DataLoader

    torch_args = [p for p in inspect.signature(DataLoader.__init__).parameters if p != 'self']
    return list(dict.fromkeys([*torch_args, 'num_batch_per_epoch', 'disable_subprocess_warning']))


def _loader_problems(loader: Any, name: str) -> list[str]:
    if not isinstance(loader, dict):
        return []
    out = _unknown_keys(
        loader, _loader_keys(), name, "a key of a dataloader (mmengine's, torch's DataLoader)"
    )
    out += _positive(loader.get('batch_size'), f'{name}.batch_size')
    workers = loader.get('num_workers')
    if isinstance(workers, int) and workers < 0:
        out.append(f'{name}.num_workers must be >= 0, got {workers}')
    for key, transform in _transforms(loader.get('dataset'), f'{name}.dataset'):
        kind = transform.get('type')
        sizes = [(arg, ()) for arg in CROP_KEYS.get(kind, ())]
        if kind in ('Resize', 'RandomResize'):
            sizes.append(('scale', (-1,)))  # -1: keep the aspect ratio
        for arg, allow in sizes:
            values = transform.get(arg)
            for v in values if isinstance(values, (list, tuple)) else [values]:
                out += _positive(v, f'{key}.{arg} ({kind})', allow)
    return out


def _transforms(dataset: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, transform dict)`` of a dataset's pipeline, through dataset wrappers."""
    if not isinstance(dataset, dict):
        return
    for i, transform in enumerate(dataset.get('pipeline') or []):
        if isinstance(transform, dict):
            yield f'{key}.pipeline[{i}]', transform
    if isinstance(dataset.get('dataset'), dict):
        yield from _transforms(dataset['dataset'], f'{key}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from _transforms(inner, f'{key}.datasets[{i}]')


def _attention_problems(node: Any, key: str) -> Iterator[str]:
    """An unknown attention name (a short name or a config dict's ``type``) anywhere under
    ``node`` (the model config): the key, the name, the closest valid names."""
    if isinstance(node, dict):
        for name, value in node.items():
            sub = f'{key}.{name}'
            if name == 'attn_cfg' and isinstance(value, dict) and 'type' not in value:  # per step
                for step in (s for s in STEP_KEYS if s in value):
                    yield from _unknown_attention(value[step], f'{sub}.{step}')
            elif name in ATTENTION_KEYS:
                yield from _unknown_attention(value, sub)
            else:
                yield from _attention_problems(value, sub)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _attention_problems(value, f'{key}[{i}]')


def _unknown_attention(value: Any, key: str) -> Iterator[str]:
    """The problem of an attention choice ``value`` at ``key``: an unknown name, or an argument
    its member does not take."""
    from ..models.attention.builder import attention_types, short_names, unknown_arguments  # noqa: PLC0415

    attn = value.get('type') if isinstance(value, dict) else value
    if isinstance(attn, str) and attn not in short_names() and attn not in attention_types():
        where = f'{key}.type' if isinstance(value, dict) else key
        yield f'{where}: unknown attention {attn!r}; {suggest_attention(attn)}'
    elif isinstance(value, dict) and isinstance(attn, str):
        member = short_names().get(attn, attn)
        for name in unknown_arguments(value):
            step = key.endswith('attn_cfg') and difflib.get_close_matches(name, STEP_KEYS)
            hint = ' (one attention per step: attn_cfg=dict(_delete_=True, temporal=..., spatial=...))'
            yield f'{key}.{name}: {member} takes no argument {name!r}{hint if step else ""}'
