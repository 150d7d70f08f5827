"""Config values checked before anything is built: one :class:`~dna_mm.errors.ConfigError` that
names every bad key and its value, the closest valid name suggested for a misspelt one.

:func:`check_config` runs every check of a mode (:func:`config_problems`, one message each);
:func:`model_problems` the model's alone. What is checked, one topic a module (each module's
docstring lists its checks):

======================  ============================================================================
``model``               the model's sizes and rates, its attention names and variants, its
                        ``init_cfg``, a second ``data_preprocessor``
``recognizer``          an MMAction2 recognizer against its data: the TimeSformer's frames and size,
                        ``test_cfg`` / ``train_cfg`` keys, testing views, training clips
``detector``            an MMDetection two-stage detector's ``train_cfg`` / ``test_cfg`` keys, which
                        it reads with ``.get``; its box coders' and other task utilities' arguments
``heads``               the classifying heads against the data's classes, ``loss_cls``, the
                        blendings
``data``                the dataloaders: their keys and sizes, their datasets' and samplers'
                        arguments, ``filter_cfg``, crops, the pipeline steps' arguments, storage,
                        dataset wrappers
``evaluation``          an evaluator's ``ann_file``, its metrics' arguments, and its metrics against
                        multi-label data
``optim``               the optimizer, its wrapper (AMP, ``clip_grad``, ``paramwise_cfg`` and its
                        multipliers)
``optim_wrapper``       the optim wrapper's own keys against the arguments of its class
``schedule``            ``param_scheduler`` entries, one by epoch under an iteration loop, the train
                        loop's keys, ``auto_scale_lr``
``scheduler_values``    the values of a ``param_scheduler`` entry (what mmengine refuses, divides by
                        zero, or takes to make the learning rate negative)
``hooks``               the hooks' arguments, the checkpoint hook's keys, ``rule`` and
                        ``save_best``; ``EarlyStoppingHook``
``log``                 ``log_processor`` and ``log_level``
``runtime``             ``randomness``, ``env_cfg``, ``compile``, ``_delete_`` inside a list, a
                        misspelt top-level key
``values``              the helpers they share: what a number must be, the registries' names, a
                        class's arguments
======================  ============================================================================

Here, what training needs:

* (``mode='train'``) ``train_dataloader``, ``train_cfg`` and ``optim_wrapper``, which a config
  made for testing (MMAction2's VideoMAE zoo files) lacks;
* lengths and intervals: ``train_cfg.max_epochs`` / ``max_iters``, ``train_cfg.val_interval`` /
  ``val_begin`` (``'abc'``: a ``TypeError`` after the first epoch; a whole float such as
  ``57300.0`` is one), ``default_hooks.logger.interval`` must be ints > 0 (mmengine's loop
  asserts on ``1.5`` and takes ``int('abc')`` after the model is built);
  ``default_hooks.checkpoint.interval`` > 0 or -1 (mmengine's "never").

``mode='test'`` checks only what a test / inference run uses (the model and the test
dataloader; not the classes, which the checkpoint fixes, and which inference names from the
``label_map`` only where it fits).

``--cfg-options`` that would change nothing are checked before they are merged
(:mod:`dna_mm.config.options`).
"""

from __future__ import annotations

from mmengine.config import Config

from ...errors import ConfigError
from .data import LOADERS, loader_problems
from .detector import detector_cfg_problems, task_util_problems
from .evaluation import evaluator_file_problems, metric_argument_problems, multi_label_metric_problems
from .heads import blending_problems, class_count_problems, head_problems, multi_label_problems
from .hooks import (
    checkpoint_keys,
    early_stopping_problems,
    hook_argument_problems,
    rule_problems,
    save_best_problems,
)
from .log import log_level_problems, log_processor_problems
from .model import attention_problems, init_cfg_problems, model_value_problems, preprocessor_problems
from .optim import amp_problems, wrapper_problems
from .recognizer import (
    recognizer_cfg_problems,
    recognizer_problems,
    testing_views_problems,
    training_clips_problems,
)
from .runtime import (
    TRAINING_ONLY_KEYS,
    compile_problems,
    env_problems,
    list_delete_problems,
    randomness_problems,
    unread_key_problems,
)
from .schedule import (
    auto_scale_lr_problems,
    epoch_scheduler_problems,
    scheduler_problems,
    train_loop_problems,
)
from .values import not_positive


def check_config(cfg: Config, mode: str = 'train') -> None:
    """Raise a :class:`ConfigError` listing every value that cannot work (see the module
    docstring); return quietly otherwise."""
    problems = config_problems(cfg, mode)
    if problems:
        raise ConfigError('; '.join(problems))


def config_problems(cfg: Config, mode: str = 'train') -> list[str]:
    """What :func:`check_config` finds wrong, one message each."""
    problems = list(attention_problems(cfg.get('model'), 'model'))
    for part in ('model', 'data_preprocessor'):
        problems += model_value_problems(cfg.get(part), part)
    problems += recognizer_problems(cfg, LOADERS[mode])
    problems += preprocessor_problems(cfg) + init_cfg_problems(cfg)
    problems += blending_problems(cfg, mode == 'train')
    problems += head_problems(cfg, mode == 'train') + multi_label_problems(cfg, LOADERS[mode])
    if mode == 'train':
        problems += _train_problems(cfg)
    problems += recognizer_cfg_problems(cfg.get('model')) + detector_cfg_problems(cfg.get('model'))
    problems += task_util_problems(cfg)
    problems += testing_views_problems(cfg, LOADERS[mode][1:] if mode == 'train' else LOADERS[mode])
    for loader in LOADERS[mode]:
        problems += loader_problems(cfg, loader)
    problems += unread_key_problems(cfg)
    problems += randomness_problems(cfg.get('randomness'))
    problems += env_problems(cfg.get('env_cfg'))
    problems += evaluator_file_problems(cfg, mode)
    problems += multi_label_metric_problems(cfg, mode)
    problems += metric_argument_problems(cfg, mode)
    problems += log_processor_problems(cfg.get('log_processor'))
    problems += hook_argument_problems(cfg)  # a test run builds the hooks too
    problems += log_level_problems(cfg.get('log_level', 'INFO'))  # Runner.from_cfg's default
    read = {k: v for k, v in cfg.items() if mode == 'train' or k not in TRAINING_ONLY_KEYS}
    return problems + list(list_delete_problems(read, ''))


def model_problems(cfg: Config, train: bool = True) -> list[str]:
    """What :func:`check_config` finds wrong in the model alone, with no data (what a tool that
    builds the model on random inputs needs: the benchmarks, which step it (``train``); inference,
    the export and the analyses, which do not): its attention names, its sizes and
    rates (``model`` and the top-level ``data_preprocessor``), a recognizer's TimeSformer's
    ``img_size`` against its ``patch_size`` and its head's ``in_channels``, the ``test_cfg`` /
    ``train_cfg`` keys of a recognizer or a two-stage detector, its ``init_cfg``, an MMAction2
    head's loss (its ``type``; with ``train``, ``class_weight`` and ``label_smooth_eps``) and the
    preprocessor's blendings (with ``train``, against the heads' classes); one message each."""
    problems = list(attention_problems(cfg.get('model'), 'model'))
    for part in ('model', 'data_preprocessor'):
        problems += model_value_problems(cfg.get(part), part)
    problems += recognizer_problems(cfg, ()) + recognizer_cfg_problems(cfg.get('model'))
    problems += detector_cfg_problems(cfg.get('model')) + task_util_problems(cfg) + init_cfg_problems(cfg)
    return problems + head_problems(cfg, train=train) + blending_problems(cfg, train=train)


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
    for key in ('max_epochs', 'max_iters', 'val_interval', 'val_begin'):
        value = train_cfg.get(key)  # a whole float mmengine takes (MMDetection's V3Det: 57300.0)
        value = int(value) if isinstance(value, float) and value.is_integer() else value
        out += not_positive(value, f'train_cfg.{key}', integer=True)
    hooks = cfg.get('default_hooks') or {}
    out += checkpoint_keys(hooks.get('checkpoint'))
    out += save_best_problems((hooks.get('checkpoint') or {}).get('save_best'), cfg.get('val_evaluator'))
    out += rule_problems((hooks.get('checkpoint') or {}).get('rule'))
    out += not_positive(
        (hooks.get('logger') or {}).get('interval'), 'default_hooks.logger.interval', integer=True
    )
    out += not_positive(
        (hooks.get('checkpoint') or {}).get('interval'), 'default_hooks.checkpoint.interval', (-1,), True
    )
    out += compile_problems(cfg.get('compile'))
    wrapper = cfg.get('optim_wrapper') or {}
    out += amp_problems(wrapper)
    for name, sub in [('', wrapper), *wrapper.items()]:  # multi-optimizer configs: one per module
        if isinstance(sub, dict) and isinstance(sub.get('optimizer'), dict):
            out += wrapper_problems(cfg, sub, f'optim_wrapper.{name}{"." if name else ""}')
    out += scheduler_problems(cfg)
    out += epoch_scheduler_problems(cfg)
    out += train_loop_problems(cfg)
    out += auto_scale_lr_problems(cfg.get('auto_scale_lr'))
    out += early_stopping_problems(cfg)
    out += class_count_problems(cfg)
    out += training_clips_problems(cfg)
    return out
