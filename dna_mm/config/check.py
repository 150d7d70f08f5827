"""Config values checked before anything is built: one :class:`~dna_mm.errors.ConfigError` that
names every bad key and its value.

* what training needs (``mode='train'``): ``train_dataloader``, ``train_cfg`` and
  ``optim_wrapper``, which a config made for testing (MMAction2's VideoMAE zoo files) lacks;
* ``optim_wrapper.type='AmpOptimWrapper'`` (mmengine's, as MMAction2's ``-amp-`` zoo configs
  name it) on a machine without an accelerator it takes, where mmengine would stop on an
  assertion after building the model: ``AutoAmpOptimWrapper`` or ``OptimWrapper`` are named;
* lengths and intervals: ``train_cfg.max_epochs`` / ``max_iters``, ``train_cfg.val_interval``,
  ``default_hooks.logger.interval`` must be ints > 0 (mmengine's loop asserts on ``1.5`` and takes
  ``int('abc')`` after the model is built); ``default_hooks.checkpoint.interval`` > 0 or -1
  (mmengine's "never");
* batch sizes (ints > 0) and ``num_workers`` (>= 0) of every dataloader, and its keys: those
  mmengine's ``build_dataloader`` reads and torch's ``DataLoader`` takes (a typo such as
  ``batchsize`` would stop the run with a ``TypeError`` after the model was built), the closest
  valid name suggested;
* ``randomness``' keys: those of mmengine's ``Runner.set_randomness``; ``randomness.seed`` an int
  in [0, 2**32) (NumPy's seeds) or None, with ``diff_rank_seed`` one that leaves room for every
  rank's ``seed + rank`` (``WORLD_SIZE``);
* ``env_cfg``'s keys: those mmengine's ``Runner.setup_env`` reads, ``env_cfg.mp_cfg``'s (its
  ``set_multi_processing``) and ``env_cfg.dist_cfg``'s (mmengine's ``init_dist`` and torch's
  ``init_process_group``, which take them in a distributed run only: a typo such as ``timeot``
  would be silent on one machine and stop every rank on a cluster);
* each dataset's ``data_prefix`` a dict of folders (a string: an ``AttributeError`` as the
  dataset is built) and ``backend_args.backend`` one of mmengine's file backends (a typo: a
  ``KeyError`` there), through dataset wrappers;
* each evaluator's ``ann_file`` (MMDetection's ``CocoMetric``) that is another split's (the file
  another loader's dataset reads, where its own reads another): it would score the predictions
  against another split's annotations, matched by image id, a wrong AP and no error;
* ``log_processor`` (mmengine's ``LogProcessor``, which formats every log line; one of another
  ``type`` is its own affair): its keys ``LogProcessor.__init__``'s arguments (a typo is a
  ``TypeError`` as the runner is made); ``window_size`` an int > 0 (mmengine smooths the losses
  and times over it: -5 logs NaN for the first 5 iterations, into ``scalars.json`` too, 0 is
  silently a running mean, ``'abc'``, ``1.5`` or ``'global'``, a ``custom_cfg`` entry's, stop the
  run at its first log line); ``num_digits`` an int >= 0 (-1: ``Format specifier missing
  precision`` there); ``by_epoch`` a bool; ``custom_cfg`` a list of dicts, each with the keys its
  ``_collect_scalars`` reads (``data_src``, required, and ``log_name``: strs; ``method_name``,
  required, a statistic ``HistoryBuffer`` registers, ``'avg'`` being a ``KeyError`` at the first
  log line; that statistic's arguments: ``window_size``, an int > 0, ``'global'`` or ``'epoch'``,
  which ``current`` does not take), ``window_size`` given and not ``'epoch'`` with
  ``by_epoch=False`` and each ``log_name`` (default: the ``data_src``) once (mmengine's
  ``_check_custom_cfg``), the closest valid name suggested;
* ``log_level``: a level name of Python's ``logging`` or an int (mmengine's ``MMLogger`` looks a
  name up in ``logging``'s table: ``'INF0'`` or ``'info'`` would be a ``KeyError`` traceback as
  the runner is made), the closest name suggested;
* the optimizer (``optim_wrapper.optimizer``, and each ``optim_wrapper.<name>.optimizer`` of a
  multi-optimizer config): ``lr`` > 0, ``weight_decay`` >= 0, ``type`` registered (mmengine's
  ``OPTIMIZERS``, the default scope's: mmengine would stop on ``None is not a callable object``),
  the closest registered name suggested; the wrapper's ``clip_grad.max_norm`` > 0, and ``dtype``
  and ``loss_scale`` what mmengine's ``AmpOptimWrapper`` takes (its ``valid_dtypes``, None or a
  torch dtype; ``'dynamic'``, a float > 0 or a dict of ``GradScaler``'s arguments: an int, as
  ``--cfg-options optim_wrapper.loss_scale=512`` gives it, is refused with its float named,
  ``512.0``) on any machine (``AutoAmpOptimWrapper`` drops them without a GPU: a typo would stop
  only the GPU run);
* the wrapper's ``clip_grad`` (mmengine's ``OptimWrapper`` pops its ``type``, ``'norm'`` or
  ``'value'``, and passes the rest to torch's ``clip_grad_norm_`` / ``clip_grad_value_`` at every
  step): a dict, its ``type`` one of the two, its keys the arguments of that function and its
  required one given (a typo such as ``norm_typ`` would be a ``TypeError`` at the first
  iteration), the closest valid name suggested;
* the wrapper's ``paramwise_cfg``, for the constructor it names (``constructor``, mmengine's
  ``DefaultOptimWrapperConstructor`` by default; dna_mm's ``LayerDecayOptimizerConstructor``; any
  other is its own affair): its keys those the constructor reads (:data:`PARAMWISE_KEYS`: a typo
  such as ``bias_decay_mul`` would be dropped silently), and each ``custom_keys[KEY]`` a dict of
  ``lr_mult``, ``decay_mult`` or options of the optimizer's class (mmengine copies the others into
  the parameter group, where torch ignores an unknown one: ``lr_mul=10`` would train at the base
  lr), the closest valid name suggested;
* ``param_scheduler`` entries: a registered ``type`` (mmengine's ``PARAM_SCHEDULERS``) and the
  arguments its class takes (a typo such as ``start_factr`` would be a ``TypeError`` once the model
  is built), the closest valid name suggested;
* (``mode='train'``) a ``param_scheduler`` entry by epoch (``by_epoch`` True, mmengine's default,
  without ``convert_to_iter_based=True``) under an iteration-based train loop (``train_cfg.type``
  ``IterBasedTrainLoop`` / ``ResumableIterBasedTrainLoop``, or ``max_iters`` without
  ``max_epochs``): mmengine's ``ParamSchedulerHook`` steps it at the end of an epoch, which that
  loop reaches only after its last iteration, so the schedule would silently never move;
* (``mode='train'``) ``auto_scale_lr`` (mmengine's ``Runner.scale_lr``): its keys ``enable`` and
  ``base_batch_size``, the others dropped silently (``base_batch=16`` would scale by the base
  config's size, ``enabled=True`` would turn nothing on), the closest valid name suggested;
  ``enable`` a bool; with it on, ``base_batch_size`` given (mmengine asserts it) and an int > 0 (0
  would be a ``ZeroDivisionError`` after the model is built, -8 a negative lr);
* the classes (``mode='train'``): every classifying head's ``num_classes`` (MMAction2's
  ``cls_head``, MMPretrain's ``head``, MMDetection's ``bbox_head`` / ``mask_head``; not an RPN's)
  against what the training data states: the datasets' ``num_classes`` (dna_mm's video datasets),
  ``metainfo.classes`` or ``classes``, and the class names in the config's ``label_map`` file where
  it exists (MMDetection's ``NumClassCheckHook``, done before anything is built): fewer stop the
  first iteration on a target out of range, more train on classes no sample has (and a trivial
  top-5);
* clip and crop sizes in every pipeline: ``SampleFrames`` ``clip_len`` / ``frame_interval`` /
  ``num_clips``, ``crop_size`` / ``size`` of the crops (ints > 0), ``Resize.scale`` (> 0, or -1
  for "keep the aspect ratio");
* a crop of a fixed size larger than the frames the steps before it give, where they fix them
  (a ``Resize`` to ``(w, h)`` or to a short side, an earlier crop): MMAction2's crops would cut
  with a negative offset, assert, or stack ragged arrays, and every video would be "unreadable";
* a head's ``average_clips`` (MMAction2's): ``'prob'`` or ``'score'`` (``'mean'`` stops the test
  after it has run; ``None`` gives one score per view, which no metric reads);
* (``mode='train'``) ``num_clips`` > 1 in the train pipeline's ``SampleFrames`` (or a subclass)
  for MMAction2's ``Recognizer3D`` and a head that keeps ``BaseHead``'s loss (TimeSformer's, I3D's,
  ...): the recognizer scores each clip as a sample of its own against its video's one label, a
  ``ValueError`` at the first iteration (``Recognizer2D`` averages its segments and is left
  alone; the val / test pipelines may sample more clips);
* mmengine's dataset wrappers, in every loader: a ``RepeatDataset``'s ``times`` an int > 0 (0: a
  ``ZeroDivisionError`` in the sampler), a ``ClassBalancedDataset``'s ``oversample_thr`` > 0 (a
  negative one: a ``math domain error`` as the dataset is built; 0 repeats nothing);
* the keys of MMAction2's ``SampleFrames`` and its subclasses (``DenseSampleFrames``,
  ``SampleFramesBySeconds``): it takes ``**kwargs`` and drops them, so a typo (``clip_lenn``)
  would sample with the default; the closest valid name is suggested;
* the model's sizes (and the top-level ``data_preprocessor``'s): every ``num_classes`` an int > 0,
  every ``num_heads`` an int > 0 that divides the width beside it (``embed_dims`` /
  ``embed_dim``: MMAction2's TimeSformer would stop on torch's assertion), every width,
  ``patch_size``, ``num_transformer_layers``, ``num_frames`` and ``img_size`` an int > 0; the
  dropout and stochastic-depth rates (``drop_path_rate``, ``dropout_ratio``, ``attn_drop``, ...)
  in [0, 1) (a ``drop_path_rate`` of 2 ends in NaN losses); ``alpha_init`` (DnA's initial ``α``)
  a number; the keys of a ``type='with_attention'`` that it does not take (the model's own
  arguments, which go in its ``model``) (:func:`model_problems`: these and the next item's
  model-only checks, for a tool that builds the model without data);
* a recognizer's TimeSformer (MMAction2's, or a subclass such as dna_mm's), whose layers would
  stop the first iteration otherwise: ``img_size`` a multiple of ``patch_size`` (MMAction2
  asserts it), ``num_frames`` the pipelines' ``clip_len``, ``img_size`` the size of the frames
  where a pipeline fixes it (a last ``Resize`` to ``(w, h)`` with ``keep_ratio=False``, or a crop
  of a fixed size), and the head's ``in_channels`` its ``embed_dims``;
* an MMAction2 head's (``model.cls_head``, a ``BaseHead``) ``loss_cls``: a dict with a ``type``
  (one without, as ``--cfg-options model.cls_head.loss_cls.loss_weight=2.0`` makes on a base that
  leaves the loss to the head's default, is a registry ``KeyError`` naming no key), and
  (``mode='train'``) its ``class_weight`` one weight per class (a ``RuntimeError`` at the first
  iteration); (``mode='train'``) its ``label_smooth_eps`` in [0, 1) (1.5 trained towards a
  negative target without a word);
* the data preprocessor's ``blending`` (MMAction2's ``MixupBlending`` / ``CutmixBlending``, or
  ``RandomBatchAugment`` of them): each blending's ``alpha`` > 0 (a ``ValueError`` traceback from
  its ``Beta`` distribution as the model is built), its ``num_classes`` given (a ``TypeError``
  there) and (``mode='train'``) the classifying head's (a ``RuntimeError`` at the first
  iteration); ``RandomBatchAugment``'s ``probs`` a float or a list, one per augment, with a sum <=
  1 (MMAction2 asserts both) and (``mode='train'``) each in [0, 1];
* ``model.test_cfg.max_testing_views`` (MMAction2's): a positive int, and then the val / test
  dataloaders' ``batch_size`` is 1 (the recognizer splits the views of one video);
* the keys of an MMAction2 recognizer's ``model.test_cfg`` and ``model.train_cfg``: those it reads
  (``Recognizer3D``: ``max_testing_views``, ``fcn_test``; none in ``train_cfg``), where its
  ``.get`` would drop a typo (``max_testing_view``) and test every view in one pass; the closest
  valid name is suggested, and an MMAction2 0.x key named where 1.x reads it
  (``average_clips``: ``model.cls_head.average_clips``);
* ``default_hooks.checkpoint``'s keys: mmengine's ``CheckpointHook`` passes the ones it does not
  know on to the checkpoint save, where a typo (``intervl``) would fail only at the first save,
  after an epoch of training; the closest valid name is suggested;
* ``default_hooks.checkpoint.rule``: ``'greater'``, ``'less'`` or None (or a list of them);
* ``default_hooks.checkpoint.save_best``: a metric the validation reports, where the
  evaluator's keys follow from its config (MMAction2's ``AccMetric``: ``acc/top{k}`` for its
  ``topk``, which the runs limit to k < the number of classes, ``acc/mean1``, and on multi-label
  data ``acc/mmit_mean_average_precision`` / ``acc/mean_average_precision``); mmengine would
  stop on a ``KeyError`` after the first validation (other evaluators: ``AtomicCheckpointHook``
  names the reported keys then);
* an ``AccMetric`` whose ``metric_list`` (its default too) holds ``top_k_accuracy`` or
  ``mean_class_accuracy`` evaluating a multi-label dataset (``multi_class=True``; the val and
  test splits, in ``mode='test'`` the test split): MMAction2's ``mean_class_accuracy`` stops on a
  ``TypeError`` once every prediction is in (after a whole epoch), ``top_k_accuracy`` compares a
  class index with the 0/1 label vector (a wrong accuracy, no error); the multi-label metrics
  (``mmit_mean_average_precision``, ``mean_average_precision``) are named;
* (``mode='train'``) an mmengine ``EarlyStoppingHook`` in ``custom_hooks``: its ``monitor``
  given, and a metric the validation reports where the evaluator's keys follow from its config
  (as for ``save_best``): the hook would only warn at each validation (``acc/top_1``) and never
  stop the run early;
* ``_delete_`` in a dict that is an item of a list (``param_scheduler = [dict(_delete_=True,
  ...)]``): mmengine reads ``_delete_`` only as it merges a child's dict into its base's, a
  child's list replaces the base's whole, so the item would pass it on to what it builds (a
  ``TypeError`` traceback); in ``mode='test'``, outside the keys only training reads;
* ``compile`` (mmengine compiles ``train_step`` with it): ``True`` / ``False``, or a dict of
  ``torch.compile``'s keyword arguments (``backend``, ``mode``, ...), a misspelt one with the
  closest valid name; mmengine would stop on it with an assertion after building everything;
* attention names under ``model`` (``attn_cfg``, also per step: ``attn_cfg.temporal`` /
  ``.spatial``; and its deprecated aliases): one of dna_mm's, else the closest valid name is
  suggested (``'dnaa'`` → ``DnAAttention / dna``); a DnA ``variant`` that is not one of the
  family's, the closest one suggested (``'qpm_vmp'`` → ``'qpm_vpm'``);
* a ``model.data_preprocessor`` beside a top-level ``data_preprocessor`` (MMPretrain's
  configs, the ImageNet ones, keep the normalisation there) that lacks the top-level one's
  ``mean`` / ``std`` / ``to_rgb``: mmengine's runner merges the top-level one only into a model
  that has none, so ``--cfg-options model.data_preprocessor.num_classes=4`` would silently
  train and test on unnormalised pixels; ``data_preprocessor.<key>`` is named instead.

``mode='test'`` checks only what a test / inference run uses (the model and the test
dataloader; not the classes, which the checkpoint fixes, and which inference names from the
``label_map`` only where it fits).

``--cfg-options`` that would change nothing are checked before they are merged
(:mod:`dna_mm.config.options`).
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Any, Iterator, Optional

from mmengine.config import Config

from ..errors import ConfigError
from ..models.attention.builder import suggest_attention
from .build import type_name

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
#: the keys MMAction2's recognizers read from their ``test_cfg`` / ``train_cfg`` (1.2.0:
#: ``Recognizer3D.extract_feat`` and ``Recognizer2D.extract_feat``; the others read neither)
_NO_KEYS: dict[str, tuple[str, ...]] = {'test_cfg': (), 'train_cfg': ()}
RECOGNIZER_CFG_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    'Recognizer3D': {'test_cfg': ('max_testing_views', 'fcn_test'), 'train_cfg': ()},
    'Recognizer2D': {'test_cfg': ('max_testing_views', 'fcn_test', 'num_segs'), 'train_cfg': ()},
    'RecognizerAudio': _NO_KEYS,
    'RecognizerGCN': _NO_KEYS,
    'Recognizer3DMM': _NO_KEYS,
    'RecognizerOmni': _NO_KEYS,
}
#: (part, key) of an MMAction2 0.x recognizer config -> where MMAction2 1.x reads it
MOVED_RECOGNIZER_KEYS = {
    ('test_cfg', 'average_clips'): "the clips are averaged by the head's argument, "
    "model.cls_head.average_clips ('prob' or 'score')",
    ('test_cfg', 'feature_extraction'): 'features come from tools/extract_features.py '
    "(or the model's extract_feat)",
    ('train_cfg', 'blending'): "mixup / cutmix is the preprocessor's, model.data_preprocessor.blending",
}


def check_config(cfg: Config, mode: str = 'train') -> None:
    """Raise a :class:`ConfigError` listing every value that cannot work (see the module
    docstring); return quietly otherwise."""
    problems = list(_attention_problems(cfg.get('model'), 'model'))
    for part in ('model', 'data_preprocessor'):
        problems += _model_problems(cfg.get(part), part)
    problems += _recognizer_problems(cfg, LOADERS[mode])
    problems += _preprocessor_problems(cfg)
    problems += _blending_problems(cfg, mode == 'train')
    problems += _head_problems(cfg, mode == 'train')
    if mode == 'train':
        problems += _train_problems(cfg)
    problems += _recognizer_cfg_problems(cfg.get('model'))
    problems += _testing_views_problems(cfg, LOADERS[mode][1:] if mode == 'train' else LOADERS[mode])
    for loader in LOADERS[mode]:
        problems += _loader_problems(cfg.get(loader), loader)
    problems += _randomness_problems(cfg.get('randomness'))
    problems += _env_problems(cfg.get('env_cfg'))
    problems += _evaluator_file_problems(cfg, mode)
    problems += _multi_label_metric_problems(cfg, mode)
    problems += _log_processor_problems(cfg.get('log_processor'))
    problems += _log_level_problems(cfg.get('log_level', 'INFO'))  # Runner.from_cfg's default
    read = {k: v for k, v in cfg.items() if mode == 'train' or k not in TRAINING_ONLY_KEYS}
    problems += _list_delete_problems(read, '')
    if problems:
        raise ConfigError('; '.join(problems))


def model_problems(cfg: Config) -> list[str]:
    """What :func:`check_config` finds wrong in the model alone, with no data (what a tool that
    builds the model on random inputs needs: the benchmarks): its attention names, its sizes and
    rates (``model`` and the top-level ``data_preprocessor``), and a recognizer's TimeSformer's
    ``img_size`` against its ``patch_size`` and its head's ``in_channels``; one message each."""
    problems = list(_attention_problems(cfg.get('model'), 'model'))
    for part in ('model', 'data_preprocessor'):
        problems += _model_problems(cfg.get(part), part)
    return problems + _recognizer_problems(cfg, ())


def _randomness_problems(randomness: Any) -> list[str]:
    """``randomness``' keys against mmengine's ``Runner.set_randomness`` (a typo would be a
    ``TypeError`` as the runner is made) and its ``seed`` (NumPy refuses a float, a string or one
    outside [0, 2**32), there too)."""
    import inspect

    from mmengine.runner import Runner

    if not isinstance(randomness, dict):
        return []
    valid = [p for p in inspect.signature(Runner.set_randomness).parameters if p != 'self']
    out = _unknown_keys(randomness, valid, 'randomness', "an argument of mmengine's Runner.set_randomness")
    seed = randomness.get('seed')
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
        out.append(
            f"randomness.seed must be an int in [0, 2**32) (NumPy's seeds) or None (a random one), "
            f'got {seed!r}'
        )
    elif seed is not None and randomness.get('diff_rank_seed'):
        ranks = int(os.environ.get('WORLD_SIZE', '1'))  # torchrun's; 1 on one process
        if seed + ranks - 1 >= 2**32:
            out.append(
                f'randomness.seed {seed} with diff_rank_seed: rank r seeds with seed + r, so on {ranks} '
                f"processes the seed must be below {2**32 - ranks + 1} (NumPy's seeds end at 2**32 - 1)"
            )
    return out


def _env_problems(env_cfg: Any) -> list[str]:
    """``env_cfg``'s keys, its ``mp_cfg``'s and its ``dist_cfg``'s, against what mmengine's runner
    passes them to (the module docstring)."""
    import inspect
    import re

    import torch.distributed as dist
    from mmengine.dist import utils as dist_utils
    from mmengine.runner import Runner
    from mmengine.utils.dl_utils import set_multi_processing

    if not isinstance(env_cfg, dict):
        return []
    read = list(dict.fromkeys(re.findall(r"env_cfg\.get\('(\w+)'", inspect.getsource(Runner.setup_env))))
    out = _unknown_keys(env_cfg, read, 'env_cfg', "a key mmengine's Runner.setup_env reads") if read else []
    mp_cfg, dist_cfg = env_cfg.get('mp_cfg'), env_cfg.get('dist_cfg')
    if isinstance(mp_cfg, dict):
        valid = [p for p in inspect.signature(set_multi_processing).parameters if p != 'distributed']
        out += _unknown_keys(
            mp_cfg, valid, 'env_cfg.mp_cfg', "an argument of mmengine's set_multi_processing"
        )
    if isinstance(dist_cfg, dict):
        launchers = (dist_utils.init_dist, dist_utils._init_dist_pytorch, dist_utils._init_dist_slurm)
        valid = [
            p for fn in launchers for p in inspect.signature(fn).parameters if p not in ('launcher', 'kwargs')
        ]
        valid = list(dict.fromkeys(valid + list(inspect.signature(dist.init_process_group).parameters)))
        what = "an argument of mmengine's init_dist or torch's init_process_group"
        out += _unknown_keys(dist_cfg, [v for v in valid if not v.startswith('_')], 'env_cfg.dist_cfg', what)
    return out


def _dataset_file(loader: Any) -> Optional[str]:
    """The annotation file a loader's dataset reads, as mmengine's ``BaseDataset`` resolves it
    (``ann_file`` under ``data_root`` unless absolute), normalised; ``None`` without one."""
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    ann_file = dataset.get('ann_file') if isinstance(dataset, dict) else None
    if not isinstance(ann_file, str) or not ann_file:
        return None
    root = dataset.get('data_root')
    return os.path.normpath(ann_file if os.path.isabs(ann_file) or not root else os.path.join(root, ann_file))


def _evaluator_file_problems(cfg: Config, mode: str) -> list[str]:
    """Each evaluator's ``ann_file`` (MMDetection's ``CocoMetric``) that is another split's file:
    that of the train, val or test loader's dataset, where its own loader's dataset reads another.
    The metric scores the predictions against its own file's annotations, matched by image id, so
    another split's gives a wrong AP and no error (image ids 1-8 of both splits: AP 0.00 for a
    model at 1.30). A file of no loader (a subset's full annotations) is not checked."""
    splits = ('train', 'val', 'test') if mode == 'train' else ('test',)
    files = {s: _dataset_file(cfg.get(f'{s}_dataloader')) for s in ('train', 'val', 'test')}
    out = []
    for split in splits[1:] if mode == 'train' else splits:
        evaluators = cfg.get(f'{split}_evaluator')
        own = files[split]
        for i, metric in enumerate(evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]):
            given = metric.get('ann_file') if isinstance(metric, dict) else None
            if own is None or not isinstance(given, str) or metric.get('format_only'):
                continue
            path = os.path.normpath(given)
            others = [s for s, f in files.items() if f == path and f != own]
            if others:
                key = f'{split}_evaluator' + (f'[{i}]' if isinstance(evaluators, (list, tuple)) else '')
                out.append(
                    f'{key}.ann_file is {given}, the file of {others[0]}_dataloader.dataset, and '
                    f'{split}_dataloader.dataset reads {own}: the metric would score the {split} '
                    "predictions against another split's annotations (a wrong AP, no error); give it "
                    f'{own}'
                )
    return out


def _log_processor_problems(log_processor: Any) -> list[str]:
    """``log_processor``: a dict (mmengine's runner takes nothing else but a ``LogProcessor``), its
    keys ``LogProcessor.__init__``'s arguments, its ``window_size``, ``num_digits``, ``by_epoch``
    and ``custom_cfg`` what mmengine's ``LogProcessor`` can format the log lines with (the module
    docstring); each of these only where it is given."""
    import inspect

    from mmengine.runner import LogProcessor

    if log_processor is None or isinstance(log_processor, LogProcessor):
        return []
    if not isinstance(log_processor, dict):
        return [f"log_processor must be a dict of mmengine's LogProcessor arguments, got {log_processor!r}"]
    if type_name(log_processor.get('type', 'LogProcessor')) != 'LogProcessor':
        return []  # a processor of a project's own (a subclass, say): its arguments are its own affair
    valid = [p for p in inspect.signature(LogProcessor.__init__).parameters if p != 'self']
    given = {k: v for k, v in log_processor.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
    out = _unknown_keys(given, valid, 'log_processor', "an argument of mmengine's LogProcessor")
    window = log_processor.get('window_size')
    if isinstance(window, str) and window in CUSTOM_WINDOWS:
        out.append(
            f'log_processor.window_size must be an int > 0, got {window!r} (mmengine smooths with an int '
            f"window; {' / '.join(map(repr, CUSTOM_WINDOWS))} is a custom_cfg entry's window_size)"
        )
    else:
        out += _positive(window, 'log_processor.window_size', integer=True)
    if 'num_digits' in log_processor:
        digits = log_processor['num_digits']
        if isinstance(digits, bool) or not isinstance(digits, int):
            out.append(f'log_processor.num_digits must be an int >= 0, got {digits!r}')
        elif digits < 0:
            out.append(f'log_processor.num_digits must be >= 0, got {digits}')
    by_epoch = log_processor.get('by_epoch', True)
    if not isinstance(by_epoch, bool):
        out.append(f'log_processor.by_epoch must be True or False, got {by_epoch!r}')
    return out + _custom_log_problems(log_processor.get('custom_cfg'), bool(by_epoch))


#: the window sizes a ``log_processor.custom_cfg`` entry may name (mmengine's
#: ``LogProcessor._parse_windows_size``: the iterations of the epoch so far, of the run so far)
CUSTOM_WINDOWS = ('global', 'epoch')


def _custom_log_problems(custom_cfg: Any, by_epoch: bool) -> list[str]:
    """``log_processor.custom_cfg``: a list of dicts, each with the keys mmengine's
    ``LogProcessor._collect_scalars`` reads (``data_src``, ``log_name``; the rest it passes to
    ``HistoryBuffer.statistics``: ``method_name`` and that statistic's arguments), ``data_src``
    and ``method_name`` given (an assertion as the runner is made, a ``TypeError`` at the first log
    line), ``method_name`` a statistic ``HistoryBuffer`` registers (a ``KeyError`` there),
    ``window_size`` what ``_parse_windows_size`` and the statistic take (an int > 0, which
    ``current`` does not take; ``'global'``, ``'epoch'``; ``None``: the whole history), and what
    ``_check_custom_cfg`` asserts: each ``log_name`` once, ``window_size`` given and not
    ``'epoch'`` when ``by_epoch`` is False."""
    import inspect

    from mmengine.logging import HistoryBuffer

    if not custom_cfg:  # mmengine's "none"
        return []
    if not isinstance(custom_cfg, (list, tuple)):
        return [
            f"log_processor.custom_cfg must be a list of dicts (e.g. [dict(data_src='loss', "
            f"method_name='mean', window_size='global')]), got {custom_cfg!r}"
        ]
    # mmengine's statistics and any registered since (a buffer, once made, has set the defaults)
    statistics = HistoryBuffer()._statistics_methods
    out: list[str] = []
    names: dict[str, int] = {}
    for i, entry in enumerate(custom_cfg):
        key = f'log_processor.custom_cfg[{i}]'
        if not isinstance(entry, dict):
            out.append(f'{key} must be a dict (data_src=..., method_name=..., ...), got {entry!r}')
            continue
        method = entry.get('method_name')
        takes = None  # the statistic's arguments (None: any)
        if isinstance(method, str) and method in statistics:
            params = list(inspect.signature(statistics[method]).parameters.values())[1:]  # after self
            if all(p.kind is not p.VAR_KEYWORD for p in params):
                takes = [p.name for p in params]
        valid = list(dict.fromkeys(['data_src', 'log_name', 'method_name', 'window_size', *(takes or [])]))
        own = {k: v for k, v in entry.items() if k != '_delete_'}  # _list_delete_problems names it
        out += _unknown_keys(own, valid, key, "a key mmengine's LogProcessor reads from a custom_cfg entry")
        for arg in ('data_src', 'log_name'):
            if arg in entry and not isinstance(entry[arg], str):
                out.append(f'{key}.{arg} must be a str (the name of a logged scalar), got {entry[arg]!r}')
        if 'data_src' not in entry:
            out.append(f"{key} needs data_src (the logged scalar it summarises, e.g. 'loss')")
        methods = list(statistics)
        if method is None:
            out.append(
                f'{key} needs method_name (a statistic of mmengine\'s HistoryBuffer: {", ".join(methods)})'
            )
        elif not isinstance(method, str) or method not in statistics:
            near = difflib.get_close_matches(str(method), methods, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(
                f"{key}.method_name must be a statistic of mmengine's HistoryBuffer, got {method!r} "
                f'({hint}valid: {", ".join(methods)})'
            )
        window = entry.get('window_size')
        if takes is not None and 'window_size' not in takes and ('window_size' in entry or not by_epoch):
            fix = (
                ', and with log_processor.by_epoch=False every entry needs one: use another method_name'
                if not by_epoch
                else ': drop it'
            )
            out.append(
                f"{key}.window_size: HistoryBuffer's {method!r} takes none (a TypeError at the first log "
                f'line){fix}'
            )
        elif not by_epoch and 'window_size' not in entry:
            out.append(
                f"{key} needs window_size with log_processor.by_epoch=False (mmengine's LogProcessor reads "
                'it from every entry then)'
            )
        elif isinstance(window, str) and window in CUSTOM_WINDOWS:
            if window == 'epoch' and not by_epoch:
                out.append(
                    f"{key}.window_size cannot be 'epoch' with log_processor.by_epoch=False (mmengine's "
                    "LogProcessor asserts it): 'global' or an int > 0"
                )
        else:
            out += _positive(window, f'{key}.window_size', CUSTOM_WINDOWS, True)
        name = entry.get('log_name', entry.get('data_src'))
        if isinstance(name, str) and name in names:
            out.append(
                f'{key}: log name {name!r} again (custom_cfg[{names[name]}] has it; each log_name, default '
                f'the data_src, may be given once: set a log_name)'
            )
        elif isinstance(name, str):
            names[name] = i
    return out


def _log_level_problems(level: Any) -> list[str]:
    """``log_level``: a level name Python's ``logging`` knows (mmengine's ``MMLogger`` looks a
    string up in ``logging``'s table, case and all: a ``KeyError`` as the runner is made) or an
    int level, the closest name suggested."""
    import logging

    names = list(logging.getLevelNamesMapping())
    if (isinstance(level, int) and not isinstance(level, bool)) or (
        isinstance(level, str) and level in names
    ):
        return []
    near = difflib.get_close_matches(level.upper(), names, n=1) if isinstance(level, str) else []
    hint = f'did you mean {near[0]!r}? ' if near else ''
    return [
        f"log_level must be a level name of Python's logging or an int, got {level!r} "
        f'({hint}valid: {", ".join(names)})'
    ]


def _positive(value: Any, key: str, allow: tuple = (), integer: bool = False) -> list[str]:
    """``value`` of ``key`` > 0 (or one of ``allow``); ``None`` leaves it to the default. With
    ``integer`` (a count, a length, an interval) it must be an int: mmengine's loops take
    ``int()`` of ``max_epochs`` or assert that it is one, torch's ``DataLoader`` refuses a float
    ``batch_size``. A string (``abc``, or ``[4`` that ``--cfg-options`` could not read as a list)
    is named either way."""
    kind = 'an int' if integer else 'a number'
    alt = f' (or {" / ".join(map(str, allow))})' if allow else ''
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return [f'{key} must be {kind} > 0{alt}, got {value!r}'] if integer or isinstance(value, str) else []
    if value in allow or value > 0:
        return []
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
        out += _positive(train_cfg.get(key), f'train_cfg.{key}', integer=True)
    hooks = cfg.get('default_hooks') or {}
    out += _checkpoint_keys(hooks.get('checkpoint'))
    out += _save_best_problems((hooks.get('checkpoint') or {}).get('save_best'), cfg.get('val_evaluator'))
    out += _rule_problems((hooks.get('checkpoint') or {}).get('rule'))
    out += _positive(
        (hooks.get('logger') or {}).get('interval'), 'default_hooks.logger.interval', integer=True
    )
    out += _positive(
        (hooks.get('checkpoint') or {}).get('interval'), 'default_hooks.checkpoint.interval', (-1,), True
    )
    out += _compile_problems(cfg.get('compile'))
    wrapper = cfg.get('optim_wrapper') or {}
    out += _amp_problems(wrapper)
    for name, sub in [('', wrapper), *wrapper.items()]:  # multi-optimizer configs: one per module
        if isinstance(sub, dict) and isinstance(sub.get('optimizer'), dict):
            out += _wrapper_problems(cfg, sub, f'optim_wrapper.{name}{"." if name else ""}')
    out += _scheduler_problems(cfg)
    out += _epoch_scheduler_problems(cfg)
    out += _auto_scale_lr_problems(cfg.get('auto_scale_lr'))
    out += _early_stopping_problems(cfg)
    out += _class_count_problems(cfg)
    out += _training_clips_problems(cfg)
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
    if type_name(wrapper.get('type')) != 'AmpOptimWrapper':
        return []
    from mmengine.device import is_cuda_available, is_mlu_available, is_musa_available, is_npu_available

    if is_cuda_available() or is_npu_available() or is_mlu_available() or is_musa_available():
        return []
    return [
        "optim_wrapper.type='AmpOptimWrapper' needs a GPU, and there is none here: set "
        'optim_wrapper.type=AutoAmpOptimWrapper (mixed precision on a GPU, full precision without '
        'one) or OptimWrapper (full precision)'
    ]


def _wrapper_problems(cfg: Config, wrapper: dict, at: str) -> list[str]:
    """One optim wrapper (``at``: its key and a dot): its optimizer's ``lr`` > 0, ``weight_decay``
    >= 0 and ``type`` (registered: mmengine would stop on ``None is not a callable object``), its
    ``clip_grad.max_norm`` > 0, its ``dtype`` and ``loss_scale`` what mmengine's ``AmpOptimWrapper``
    takes, its ``clip_grad``'s keys (:func:`_clip_grad_problems`) and its ``paramwise_cfg``'s
    (:func:`_paramwise_problems`)."""
    optimizer = wrapper['optimizer']
    out = _positive(optimizer.get('lr'), f'{at}optimizer.lr')
    decay = optimizer.get('weight_decay')
    if decay is not None and (not _is_number(decay) or decay < 0):
        out.append(f'{at}optimizer.weight_decay must be a number >= 0, got {decay!r}')
    kind = optimizer.get('type')
    registry = _registry(cfg, 'OPTIMIZERS')
    if isinstance(kind, str) and registry is not None and _registered(registry, kind) == (True, None):
        out.append(f'{at}optimizer.type: unknown optimizer {kind!r}; {_closest(kind, _names(registry))}')
    clip = wrapper.get('clip_grad')
    max_norm = clip.get('max_norm') if isinstance(clip, dict) else None
    if max_norm is not None and (not _is_number(max_norm) or max_norm <= 0):
        out.append(
            f'{at}clip_grad.max_norm must be a number > 0 (the largest gradient norm), got {max_norm!r}'
        )
    if 'dtype' in wrapper:
        out += _dtype_problems(wrapper['dtype'], f'{at}dtype')
    if 'loss_scale' in wrapper:
        out += _loss_scale_problems(wrapper['loss_scale'], f'{at}loss_scale', bool(wrapper.get('use_fsdp')))
    out += _clip_grad_problems(clip, f'{at}clip_grad')
    out += _positive(wrapper.get('accumulative_counts'), f'{at}accumulative_counts', integer=True)
    out += _paramwise_problems(cfg, wrapper, at)
    return out


def _clip_grad_problems(clip: Any, key: str) -> list[str]:
    """``optim_wrapper.clip_grad`` as mmengine's ``OptimWrapper`` reads it (0.10.x: it asserts a
    non-empty dict, pops its ``type``, ``'norm'`` by default, raises a ``ValueError`` on any other
    than ``'norm'`` / ``'value'``, and calls ``torch.nn.utils.clip_grad_norm_(params, **rest)`` or
    ``clip_grad_value_(params, **rest)`` at every step): the keys that function takes (its
    arguments but the parameters), its required one (``max_norm`` / ``clip_value``) given; a
    ``TypeError`` at the first iteration otherwise. ``None``: no clipping."""
    import inspect

    import torch

    if clip is None:
        return []
    if not isinstance(clip, dict) or not clip:
        return [
            f'{key} must be None (no clipping) or a dict of the arguments of torch\'s clip_grad_norm_ '
            f"(e.g. dict(max_norm=1.0)) or, with type='value', of clip_grad_value_, got {clip!r}"
        ]
    kind = clip.get('type', 'norm')
    functions = {'norm': torch.nn.utils.clip_grad_norm_, 'value': torch.nn.utils.clip_grad_value_}
    if kind not in functions:
        near = difflib.get_close_matches(str(kind), list(functions), n=1, cutoff=0.5)
        hint = f' (did you mean {near[0]!r}?)' if near else ''
        return [
            f"{key}.type must be 'norm' (clip_grad_norm_, the default) or 'value' (clip_grad_value_), "
            f'got {kind!r}{hint}'
        ]
    function = functions[kind]
    params = list(inspect.signature(function).parameters.values())[1:]  # the parameters: the wrapper's
    valid = [p.name for p in params]
    given = {k: v for k, v in clip.items() if k != 'type'}
    what = f"an argument of torch's {function.__name__} (clip_grad type {kind!r})"
    out = _unknown_keys(given, valid, key, what)
    missing = [p.name for p in params if p.default is p.empty and p.name not in given]
    if missing:
        out.append(f'{key} needs {", ".join(missing)} (an argument {function.__name__} requires)')
    return out


#: the ``paramwise_cfg`` keys a constructor reads, by its class (module and name): mmengine's
#: ``DefaultOptimWrapperConstructor.add_params`` (0.10.x: its ``self.paramwise_cfg.get`` calls,
#: tests/config/test_optim_wrapper_check.py holds them to mmengine's source); a constructor that
#: names its own in a ``PARAMWISE_KEYS`` attribute (dna_mm's ``LayerDecayOptimizerConstructor``)
#: is checked against those
PARAMWISE_KEYS: dict[str, tuple[str, ...]] = {
    'mmengine.optim.optimizer.default_constructor.DefaultOptimWrapperConstructor': (
        'custom_keys',
        'bias_lr_mult',
        'bias_decay_mult',
        'norm_decay_mult',
        'dwconv_decay_mult',
        'flat_decay_mult',
        'bypass_duplicate',
        'dcn_offset_lr_mult',
    )
}
#: the options of a ``custom_keys[KEY]`` mmengine's constructor reads itself (the others it copies
#: into the parameter group)
CUSTOM_KEY_OPTIONS = ('lr_mult', 'decay_mult')


def _paramwise_problems(cfg: Config, wrapper: dict, at: str) -> list[str]:
    """The wrapper's ``paramwise_cfg`` against the constructor it names (``constructor``, resolved
    as mmengine's ``build_optim_wrapper`` builds it: ``'DefaultOptimWrapperConstructor'`` by
    default, in the config's default scope): its keys those the constructor reads
    (:data:`PARAMWISE_KEYS`; a constructor not there, a user's own, is left alone), and each
    ``custom_keys[KEY]`` a dict of :data:`CUSTOM_KEY_OPTIONS` or options of the optimizer's class
    (:func:`_optimizer_options`; not checked where the class cannot be had)."""
    paramwise = wrapper.get('paramwise_cfg')
    if paramwise is None:
        return []
    constructor = wrapper.get('constructor', 'DefaultOptimWrapperConstructor')
    cls = constructor
    if isinstance(constructor, str):
        registry = _registry(cfg, 'OPTIM_WRAPPER_CONSTRUCTORS')
        cls = _registered(registry, constructor)[1] if registry is not None else None
    valid = getattr(cls, 'PARAMWISE_KEYS', None) or PARAMWISE_KEYS.get(
        f'{getattr(cls, "__module__", "")}.{getattr(cls, "__qualname__", "")}'
    )
    if valid is None:
        return []
    key, name = f'{at}paramwise_cfg', cls.__name__
    if not isinstance(paramwise, dict):
        return [f'{key} must be a dict of the keys {name} reads ({", ".join(valid)}), got {paramwise!r}']
    owner = 'dna_mm' if cls.__module__.startswith('dna_mm.') else 'mmengine'
    out = _unknown_keys(paramwise, list(valid), key, f"a key {owner}'s {name} reads")
    custom = paramwise.get('custom_keys')
    if custom is None or 'custom_keys' not in valid:
        return out
    if not isinstance(custom, dict):
        return [
            *out,
            f'{key}.custom_keys must be a dict (a part of a parameter name -> its options), got {custom!r}',
        ]
    optimizer = wrapper['optimizer'].get('type')
    optimizer_cls = optimizer
    if isinstance(optimizer, str):
        registry = _registry(cfg, 'OPTIMIZERS')
        optimizer_cls = _registered(registry, optimizer)[1] if registry is not None else None
    options = _optimizer_options(optimizer_cls) if isinstance(optimizer_cls, type) else None
    for part, value in custom.items():
        where = f'{key}.custom_keys[{part!r}]'
        if not isinstance(value, dict):
            out.append(f'{where} must be a dict of options (lr_mult, decay_mult, ...), got {value!r}')
            continue
        if options is None:
            continue
        valid_options = list(dict.fromkeys([*CUSTOM_KEY_OPTIONS, *options]))
        own = f"{', '.join(CUSTOM_KEY_OPTIONS)}, or {optimizer_cls.__name__}'s own: {', '.join(options)}"
        out += _unknown_keys(value, valid_options, where, 'an option of a custom key', own)
    return out


def _optimizer_options(optimizer: type) -> Optional[list[str]]:
    """The options a parameter group of ``optimizer`` (a class) takes: the keyword arguments of its
    ``__init__`` but ``params``, up the MRO while an ``__init__`` passes ``**kwargs`` on (torch's
    ``Optimizer`` keeps them as the groups' defaults); ``None`` where they cannot be told (a
    ``**kwargs`` that reaches no named argument)."""
    import inspect

    import torch

    names: list[str] = []
    for klass in optimizer.__mro__:
        if klass in (torch.optim.Optimizer, object):
            return None
        if '__init__' not in vars(klass):
            continue
        try:
            params = list(inspect.signature(klass.__init__).parameters.values())
        except (TypeError, ValueError):
            return None
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names += [p.name for p in params if p.kind in keyword and p.name not in ('self', 'params')]
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return list(dict.fromkeys(names))
    return None


def _dtype_problems(dtype: Any, key: str) -> list[str]:
    """``optim_wrapper.dtype``: what mmengine's ``AmpOptimWrapper`` asserts it is (one of its
    ``valid_dtypes``, ``None`` or a ``torch.dtype``), on any machine (``AutoAmpOptimWrapper`` drops
    it without a GPU, so a typo would pass a CPU run and stop the GPU one)."""
    import torch
    from mmengine.optim import AmpOptimWrapper

    valid = AmpOptimWrapper.valid_dtypes
    if dtype is None or isinstance(dtype, torch.dtype) or (isinstance(dtype, str) and dtype in valid):
        return []
    near = difflib.get_close_matches(str(dtype), valid, n=1, cutoff=0.5)
    hint = f' (did you mean {near[0]!r}?)' if near else ''
    return [
        f"{key} must be one of {', '.join(map(repr, valid))} (mmengine's AmpOptimWrapper), None or a "
        f'torch dtype, got {dtype!r}{hint}'
    ]


def _loss_scale_problems(loss_scale: Any, key: str, fsdp: bool = False) -> list[str]:
    """``optim_wrapper.loss_scale``: what mmengine's ``AmpOptimWrapper`` takes (``'dynamic'``, a
    float > 0: a static scale, or a dict of its ``GradScaler``'s arguments: ``ShardedGradScaler``'s
    with ``use_fsdp``), on any machine (``AutoAmpOptimWrapper`` drops it without a GPU, so a typo
    would pass a CPU run and stop the GPU one). An int (``--cfg-options
    optim_wrapper.loss_scale=512``) is refused too: mmengine takes no int; the float is named."""
    import inspect
    import math

    from mmengine.optim.optimizer import amp_optimizer_wrapper

    if isinstance(loss_scale, str) and loss_scale == 'dynamic':
        return []
    if isinstance(loss_scale, float):
        if math.isfinite(loss_scale) and loss_scale > 0:
            return []
        return [f'{key} must be > 0 (a static loss scale), got {loss_scale!r}']
    if isinstance(loss_scale, dict):
        scaler = amp_optimizer_wrapper.GradScaler
        if fsdp:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            scaler = ShardedGradScaler
        valid = [p for p in inspect.signature(scaler.__init__).parameters if p != 'self']
        return _unknown_keys(loss_scale, valid, key, f'an argument of {scaler.__name__}')
    what = (
        f"{key} must be 'dynamic', a float > 0 (a static scale) or a dict of GradScaler's arguments "
        f"(mmengine's AmpOptimWrapper), got {loss_scale!r}"
    )
    if _is_number(loss_scale) and loss_scale > 0:
        return [f'{what}: write it as a float, {key}={float(loss_scale)!r}']
    if isinstance(loss_scale, str):
        near = difflib.get_close_matches(loss_scale, ['dynamic'], n=1, cutoff=0.5)
        return [what + (f' (did you mean {near[0]!r}?)' if near else '')]
    return [what]


def _scheduler_problems(cfg: Config) -> list[str]:
    """Each ``param_scheduler`` entry (a list, one dict, or one of either per optimizer): its
    ``type`` registered, its keys those its class takes (with mmengine's
    ``convert_to_iter_based`` / ``epoch_length``; the runner gives the optimizer), the closest
    valid name suggested: a typo would be a ``TypeError`` once the model is built."""
    from ..utils.build_errors import accepted_arguments  # noqa: PLC0415

    registry = _registry(cfg, 'PARAM_SCHEDULERS')
    if registry is None:
        return []
    out: list[str] = []
    for key, scheduler in _scheduler_entries(cfg.get('param_scheduler')):
        kind = scheduler.get('type')
        if kind is None:
            continue
        known, cls = _registered(registry, kind) if isinstance(kind, str) else (True, kind)
        if not known:
            continue
        if cls is None:
            out.append(
                f'{key}.type: unknown parameter scheduler {kind!r}; {_closest(kind, _names(registry))}'
            )
            continue
        valid = [a for a in accepted_arguments(cls) if a != 'optimizer']  # the runner gives it
        valid = list(dict.fromkeys([*valid, 'convert_to_iter_based', 'epoch_length']))  # mmengine's build
        given = {k: v for k, v in scheduler.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
        out += _unknown_keys(given, valid, key, f'an argument of {type_name(kind)}')
    return out


def _scheduler_entries(schedulers: Any) -> list[tuple[str, dict]]:
    """``(key, entry)`` of each scheduler config in ``param_scheduler`` (a list, one dict, or one
    of either per optimizer: ``param_scheduler.<name>``), keyed as the messages name it
    (``param_scheduler[0]``)."""
    if isinstance(schedulers, dict) and 'type' not in schedulers:  # one per optimizer
        groups = [(f'param_scheduler.{k}', v) for k, v in schedulers.items()]
    else:
        groups = [('param_scheduler', schedulers)]
    entries = []
    for key, value in groups:
        if isinstance(value, dict):
            entries.append((key, value))
        elif isinstance(value, (list, tuple)):
            entries += [(f'{key}[{i}]', s) for i, s in enumerate(value) if isinstance(s, dict)]
    return entries


#: mmengine's iteration-based train loop and dna_mm's twin (a subclass registered under another
#: name is found through the registry)
ITERATION_LOOPS = ('IterBasedTrainLoop', 'ResumableIterBasedTrainLoop')


def iteration_loop(cfg: Config) -> Optional[str]:
    """How ``train_cfg`` makes mmengine's runner train by iterations, as the messages name it
    (``train_cfg.type='IterBasedTrainLoop'``), or ``None`` for a loop by epochs: a ``type`` of
    :data:`ITERATION_LOOPS` or a registered subclass of mmengine's ``IterBasedTrainLoop``; without
    a ``type``, ``max_iters`` without ``max_epochs`` (what
    :func:`dna_mm.engine.global_batch.scale_iteration_schedule` scales as iterations)."""
    from mmengine.runner import IterBasedTrainLoop  # noqa: PLC0415

    train_cfg = cfg.get('train_cfg')
    if not isinstance(train_cfg, dict):
        return None
    kind = train_cfg.get('type')
    if kind is None:
        iterations = 'max_iters' in train_cfg and 'max_epochs' not in train_cfg
        return 'train_cfg.max_iters without max_epochs' if iterations else None
    cls = kind
    if isinstance(kind, str):
        registry = _registry(cfg, 'LOOPS')
        cls = _registered(registry, kind)[1] if registry is not None else None
    by_class = isinstance(cls, type) and issubclass(cls, IterBasedTrainLoop)
    return f'train_cfg.type={type_name(kind)!r}' if by_class or type_name(kind) in ITERATION_LOOPS else None


def _epoch_scheduler_problems(cfg: Config) -> list[str]:
    """A ``param_scheduler`` entry that steps by epoch (``by_epoch`` True, mmengine's default, and
    not ``convert_to_iter_based=True``) under an iteration-based train loop
    (:func:`iteration_loop`): mmengine's ``ParamSchedulerHook`` steps such a scheduler in
    ``after_train_epoch`` only, which ``IterBasedTrainLoop`` calls once, after its last iteration,
    so the schedule would never move during the run (a cosine by epoch stayed at its initial lr
    throughout), without a word."""
    loop = iteration_loop(cfg)
    if loop is None:
        return []
    return [
        f"{key}({type_name(s.get('type'))}) steps by epoch (by_epoch=True, mmengine's default) but the "
        f'train loop is iteration-based ({loop}): mmengine steps it only after the last iteration, so '
        'it would never change during the run; set by_epoch=False with its begin / end (and T_max, '
        'milestones, ...) in iterations, or convert_to_iter_based=True'
        for key, s in _scheduler_entries(cfg.get('param_scheduler'))
        if s.get('by_epoch', True) and not s.get('convert_to_iter_based', False)
    ]


#: the keys of ``auto_scale_lr`` mmengine's ``Runner.scale_lr`` reads (0.10.x; dna_mm's runner
#: reads the same: tests/config/test_schedule_check.py holds them to mmengine's source)
AUTO_SCALE_LR_KEYS = ('enable', 'base_batch_size')


def _auto_scale_lr_problems(auto_scale_lr: Any) -> list[str]:
    """``auto_scale_lr``: a dict of :data:`AUTO_SCALE_LR_KEYS` (mmengine's ``Runner.scale_lr``
    reads those and drops the others: ``base_batch=16`` would scale by the base config's
    ``base_batch_size``, ``enabled=True`` would turn nothing on), the closest valid name
    suggested; ``enable`` a bool (mmengine takes its truth: ``'False'`` would scale); with
    ``enable`` on, ``base_batch_size`` an int > 0 (mmengine asserts it is given; 0 stops the run
    on a ``ZeroDivisionError`` after the model is built, -8 trains with a negative lr)."""
    if auto_scale_lr is None:
        return []
    if not isinstance(auto_scale_lr, dict):
        return [
            f'auto_scale_lr must be a dict (enable=True / False, base_batch_size=...), got {auto_scale_lr!r}'
        ]
    given = {k: v for k, v in auto_scale_lr.items() if not str(k).startswith('_')}  # _scope_
    out = _unknown_keys(
        given, list(AUTO_SCALE_LR_KEYS), 'auto_scale_lr', "a key mmengine's Runner.scale_lr reads"
    )
    enable = auto_scale_lr.get('enable', False)
    if not isinstance(enable, bool):
        out.append(f'auto_scale_lr.enable must be True or False, got {enable!r}')
    elif enable and 'base_batch_size' not in auto_scale_lr:
        out.append(
            'auto_scale_lr needs base_batch_size with enable=True (the total batch size the lr is set '
            'for; mmengine asserts it)'
        )
    elif enable:
        out += _positive(auto_scale_lr['base_batch_size'], 'auto_scale_lr.base_batch_size', integer=True)
    return out


def _early_stopping_problems(cfg: Config) -> list[str]:
    """Each mmengine ``EarlyStoppingHook`` in ``custom_hooks``: its ``monitor`` given (a
    ``TypeError`` as the runner is made) and a metric the validation reports, where the
    evaluator's keys follow from its config (:func:`evaluator_keys`, as for ``save_best``): with
    another key the hook only warns at each validation and the run never stops early."""
    keys = evaluator_keys(cfg.get('val_evaluator'))
    hooks = cfg.get('custom_hooks')
    out = []
    for i, hook in enumerate(hooks if isinstance(hooks, (list, tuple)) else []):
        if not isinstance(hook, dict) or type_name(hook.get('type')) != 'EarlyStoppingHook':
            continue
        key = f'custom_hooks[{i}](EarlyStoppingHook)'
        monitor = hook.get('monitor')
        if monitor is None:
            reported = f': {", ".join(keys)}' if keys is not None else ''
            out.append(f'{key} needs monitor (the metric it watches, one the validation reports{reported})')
        elif keys is not None and monitor not in keys:
            out.append(
                f'{key}.monitor={monitor!r}: the validation reports {", ".join(keys)} (mmengine would only '
                'warn at each validation and never stop early)'
            )
    return out


#: the top-level keys only training reads (a test run's config may keep them as trained)
TRAINING_ONLY_KEYS = (
    'train_dataloader',
    'val_dataloader',
    'train_cfg',
    'val_cfg',
    'val_evaluator',
    'optim_wrapper',
    'param_scheduler',
    'auto_scale_lr',
)


def _list_delete_problems(node: Any, key: str, in_list: bool = False) -> Iterator[str]:
    """Each ``_delete_`` in a dict that lies in a list (or a tuple) under ``node`` at ``key``
    (``param_scheduler = [dict(_delete_=True, ...)]``): mmengine's ``Config`` reads ``_delete_``
    only where it merges a child's dict into its base's dict, and a child's list replaces the
    base's whole, so the key stays in the item and is passed on to what it builds (a
    ``TypeError``, ``unexpected keyword argument '_delete_'``, a traceback). A ``_delete_`` in a
    dict value (not in a list) is mmengine's to read as it merges the dict into its base's, and is
    left alone here."""
    if isinstance(node, dict):
        if in_list and '_delete_' in node:
            yield (
                f"{key}._delete_: a list in a child config replaces the base's list whole: its items take "
                'no _delete_ (drop it)'
            )
        for name, value in node.items():
            if name != '_delete_':
                yield from _list_delete_problems(value, f'{key}.{name}' if key else str(name), in_list)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _list_delete_problems(value, f'{key}[{i}]', True)


def _registry(cfg: Config, name: str) -> Any:
    """mmengine's registry ``name`` (``'OPTIMIZERS'``, ...) of the scope ``cfg`` builds in (its
    default scope's, whose parents are mmengine's); ``None`` where it cannot be had (a library
    that does not import here: the build will tell)."""
    from importlib import import_module  # noqa: PLC0415

    from mmengine import registry as root  # noqa: PLC0415

    from .build import default_scope  # noqa: PLC0415

    try:
        scope = default_scope(cfg)
        return getattr(import_module(f'{scope}.registry') if scope else root, name)
    except Exception:  # noqa: BLE001 (an uninstalled or broken library: nothing to check against)
        return None


def _registered(registry: Any, kind: str) -> tuple[bool, Any]:
    """``(known, class)``: whether ``registry`` could be asked, and the class it (or a parent)
    builds for ``kind`` (``None``: none)."""
    try:
        return True, registry.get(kind)
    except Exception:  # noqa: BLE001 (a library whose modules do not import here: the build will tell)
        return False, None


def _names(registry: Any) -> list[str]:
    """The names ``registry`` and its parents build (MMEngine's lookup of a plain name)."""
    names: list[str] = []
    while registry is not None:
        try:
            registry.import_from_location()
        except ImportError:
            pass
        names += list(registry.module_dict)
        registry = registry.parent
    return list(dict.fromkeys(names))


def _closest(name: str, valid: list[str]) -> str:
    """``did you mean 'X'?`` (the closest valid name), else the valid names."""
    near = difflib.get_close_matches(name, valid, n=1)
    return f'did you mean {near[0]!r}?' if near else f'registered: {", ".join(valid)}'


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    out = _unknown_keys(value, valid, 'compile', 'an argument of torch.compile')
    mode, backend = value.get('mode'), value.get('backend', 'inductor')
    if mode is not None:
        from torch._inductor import list_mode_options

        modes = list(list_mode_options())
        if mode not in modes:
            out.append(f'compile.mode must be one of {", ".join(modes)} (or None), got {mode!r}')
    if isinstance(backend, str):
        import torch._dynamo

        backends = torch._dynamo.list_backends(exclude_tags=())
        if backend not in backends:
            near = difflib.get_close_matches(backend, backends, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(f'compile.backend {backend!r} is not one of torch\'s ({hint}{", ".join(backends)})')
    return out


def _checkpoint_keys(hook: Any) -> list[str]:
    """Keys of ``default_hooks.checkpoint`` that neither mmengine's ``CheckpointHook`` nor the
    runner's ``save_checkpoint`` (where the hook passes the rest) takes."""
    if not isinstance(hook, dict) or type_name(hook.get('type', 'CheckpointHook')) != 'CheckpointHook':
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


#: MMAction2's ``AccMetric``: its default ``metric_list``, the metrics of one label per sample
ACC_METRICS = ('top_k_accuracy', 'mean_class_accuracy')
#: its metrics of multi-label data (a 0/1 vector of the classes per sample), each reported under its
#: own name (``acc/mmit_mean_average_precision``)
MULTI_LABEL_METRICS = ('mmit_mean_average_precision', 'mean_average_precision')
#: what each of :data:`ACC_METRICS` does with multi-label data (MMAction2 1.2)
SINGLE_LABEL_FAILURES = {
    'top_k_accuracy': 'top_k_accuracy reports a wrong accuracy without a word',
    'mean_class_accuracy': 'mean_class_accuracy stops on a TypeError once every prediction is in',
}


def evaluator_keys(evaluator: Any) -> Optional[list[str]]:
    """The metric keys a validation with ``evaluator`` (a metric's config or a list of them)
    reports, when they follow from the config (every metric an ``AccMetric`` of
    :data:`ACC_METRICS` and :data:`MULTI_LABEL_METRICS`: ``acc/top{k}`` for each of its ``topk``,
    ``acc/mean1``, ``acc/mmit_mean_average_precision``, ``acc/mean_average_precision``, in the
    order of its ``metric_list``, as ``AccMetric.calculate`` reports them); ``None`` otherwise."""
    keys: list[str] = []
    for metric in evaluator if isinstance(evaluator, (list, tuple)) else [evaluator]:
        if not isinstance(metric, dict) or type_name(metric.get('type')) != 'AccMetric':
            return None
        chosen = metric.get('metric_list', ACC_METRICS)
        chosen = (chosen,) if isinstance(chosen, str) else tuple(chosen)
        if not set(chosen) <= {*ACC_METRICS, *MULTI_LABEL_METRICS}:
            return None
        prefix = metric.get('prefix') or 'acc'
        for name in dict.fromkeys(chosen):
            if name == 'top_k_accuracy':
                options = (metric.get('metric_options') or {}).get('top_k_accuracy') or {}
                topk = options.get('topk', (1, 5))
                keys += [f'{prefix}/top{k}' for k in ((topk,) if isinstance(topk, int) else topk)]
            else:
                keys.append(f'{prefix}/mean1' if name == 'mean_class_accuracy' else f'{prefix}/{name}')
    return keys


def _multi_label_metric_problems(cfg: Config, mode: str) -> list[str]:
    """An ``AccMetric`` whose ``metric_list`` (its default too) holds a metric of one label per
    sample (:data:`ACC_METRICS`) evaluating a loader whose dataset is multi-label
    (``multi_class=True``, through dataset wrappers): the val and test splits in training, the
    test split in a test run. MMAction2's ``mean_class_accuracy`` stops on ``TypeError: y_real
    dtype must be np.int64`` once every prediction is in (after a whole epoch of training), and
    ``top_k_accuracy`` compares the predicted class index with the 0/1 entries of the label
    vector: a wrong accuracy (0.00 in the audit), without a word. The multi-label metrics
    (:data:`MULTI_LABEL_METRICS`) are named."""
    out = []
    for split in ('val', 'test') if mode == 'train' else ('test',):
        loader = cfg.get(f'{split}_dataloader')
        dataset = loader.get('dataset') if isinstance(loader, dict) else None
        found = (
            at for at, inner in _datasets(dataset, f'{split}_dataloader.dataset') if inner.get('multi_class')
        )
        multi = next(found, None)
        if multi is None:
            continue
        evaluators = cfg.get(f'{split}_evaluator')
        listed = isinstance(evaluators, (list, tuple))
        for i, metric in enumerate(evaluators if listed else [evaluators]):
            if not isinstance(metric, dict) or type_name(metric.get('type')) != 'AccMetric':
                continue
            chosen = metric.get('metric_list', ACC_METRICS)
            chosen = (chosen,) if isinstance(chosen, str) else tuple(chosen)
            single = [m for m in ACC_METRICS if m in chosen]
            if not single:
                continue
            key = f'{split}_evaluator' + (f'[{i}]' if listed else '')
            default = " (AccMetric's default)" if 'metric_list' not in metric else ''
            what = 'are metrics' if len(single) > 1 else 'is a metric'
            out.append(
                f"{key}.metric_list: {multi} is multi-label (multi_class=True), and AccMetric's "
                f'{" / ".join(single)}{default} {what} of one label per sample '
                f'({", ".join(SINGLE_LABEL_FAILURES[m] for m in single)}): use '
                f'metric_list={MULTI_LABEL_METRICS!r}'
            )
    return out


def _rule_problems(rule: Any) -> list[str]:
    """``default_hooks.checkpoint.rule``: ``'greater'``, ``'less'`` or ``None`` (by the metric's
    name), or a list of them, one per ``save_best`` key (mmengine's ``CheckpointHook`` raises a
    ``KeyError`` as the hooks are registered)."""
    rules = rule if isinstance(rule, (list, tuple)) else [rule]
    wrong = [r for r in rules if r not in ('greater', 'less', None)]
    return [
        f"default_hooks.checkpoint.rule must be 'greater', 'less' or None (chosen by the metric's name), "
        f'or a list of them, one per save_best key, got {r!r}'
        for r in wrong[:1]
    ]


def _save_best_problems(save_best: Any, evaluator: Any) -> list[str]:
    keys = evaluator_keys(evaluator)
    wanted = [save_best] if isinstance(save_best, str) else list(save_best or [])
    unknown = [k for k in wanted if k != 'auto' and keys is not None and k not in keys]
    return [
        f'default_hooks.checkpoint.save_best={k!r}: the validation reports {", ".join(keys)} '
        f"(or 'auto': the first of them)"
        for k in unknown
    ]


#: heads whose ``num_classes`` is not the data's (MMDetection's ``NumClassCheckHook`` skips them:
#: an RPN's is 1, a semantic head's the stuff classes)
OTHER_CLASS_HEADS = ('rpn_head', 'FusedSemanticHead', 'GARPNHead')


def _class_count_problems(cfg: Config) -> list[str]:
    """Every classifying head's ``num_classes`` against the classes the training data states:
    each dataset's ``num_classes`` (dna_mm's video datasets), ``metainfo.classes`` or
    ``classes`` (MMDetection's, MMPretrain's), through dataset wrappers, and the names in the
    config's ``label_map`` file where it exists (a label map shipped with dna_mm, named without a
    file, is the datasets' affair). Fewer would stop the first iteration on a label
    out of range; more would train on classes no sample has (and a trivial top-5)."""
    counts: dict[int, list[str]] = {}
    for name in LOADERS['train']:
        loader = cfg.get(name)
        if isinstance(loader, dict):
            for count, where in _dataset_classes(loader.get('dataset'), f'{name}.dataset'):
                counts.setdefault(count, []).append(where)
    label_map = cfg.get('label_map')
    if isinstance(label_map, str) and os.path.isfile(label_map):  # the demo's comes with its data
        try:
            with open(label_map, encoding='utf-8') as f:
                names = [line for line in f if line.strip()]  # tools/infer.py's reading
        except (OSError, UnicodeDecodeError):
            names = []
        if names:
            counts.setdefault(len(names), []).append(f'the class names of label_map {label_map!r}')
    out = []
    for key, num in _class_heads(cfg.get('model'), 'model'):
        wrong = [f'{n} ({", ".join(where)})' for n, where in counts.items() if n != num]
        if wrong:
            out.append(
                f'{key}.num_classes ({num}) must be the number of classes of the data: {"; ".join(wrong)}'
            )
    return out


def _dataset_classes(dataset: Any, key: str) -> Iterator[tuple[int, str]]:
    """``(number of classes, its key)`` each dataset config under ``dataset`` states."""
    if not isinstance(dataset, dict):
        return
    if _size(dataset.get('num_classes')):
        yield dataset['num_classes'], f'{key}.num_classes'
    metainfo = dataset.get('metainfo')
    for where, classes in (
        ('metainfo.classes', metainfo.get('classes') if isinstance(metainfo, dict) else None),
        ('classes', dataset.get('classes')),
    ):
        if isinstance(classes, (list, tuple)):
            yield len(classes), f'{key}.{where}'
    yield from _dataset_classes(dataset.get('dataset'), f'{key}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from _dataset_classes(inner, f'{key}.datasets[{i}]')


def _class_heads(node: Any, key: str) -> Iterator[tuple[str, int]]:
    """``(key, num_classes)`` of each head under ``node`` (a key ending in ``head``: MMAction2's
    ``cls_head``, MMPretrain's ``head``, MMDetection's ``bbox_head`` / ``mask_head``) that
    classifies into the data's classes (not :data:`OTHER_CLASS_HEADS`)."""
    if isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _class_heads(value, f'{key}[{i}]')
        return
    if not isinstance(node, dict):
        return
    name = key.rsplit('.', 1)[-1].split('[')[0]
    other = name in OTHER_CLASS_HEADS or type_name(node.get('type')) in OTHER_CLASS_HEADS
    if name.endswith('head') and not other and _size(node.get('num_classes')):
        yield key, node['num_classes']
    for sub, value in node.items():
        yield from _class_heads(value, f'{key}.{sub}')


def _model_class(cfg: Config, kind: Any) -> Any:
    """The class a model part's ``type`` builds (a name registered in the config's default
    scope, a dotted path, or the class itself); ``None`` where it cannot be told."""
    if isinstance(kind, str):
        registry = _registry(cfg, 'MODELS')
        return _registered(registry, kind)[1] if registry is not None else None
    return kind if isinstance(kind, type) else None


def _mmaction_head(cfg: Config) -> Optional[tuple[dict, type]]:
    """``(config, class)`` of ``model.cls_head`` where it is MMAction2's ``BaseHead`` or a
    subclass (which builds its ``loss_cls`` and smooths its labels itself); ``None`` otherwise."""
    try:
        from mmaction.models.heads.base import BaseHead  # noqa: PLC0415
    except ImportError:
        return None
    model = cfg.get('model')
    head = model.get('cls_head') if isinstance(model, dict) else None
    if not isinstance(head, dict):
        return None
    cls = _model_class(cfg, head.get('type'))
    return (head, cls) if isinstance(cls, type) and issubclass(cls, BaseHead) else None


def _head_problems(cfg: Config, train: bool) -> list[str]:
    """An MMAction2 head's (:func:`_mmaction_head`) loss and label smoothing:

    * ``loss_cls`` a dict with a ``type``: the head builds it with ``MODELS.build``, which stops on a
      ``KeyError`` naming no key without one. A ``loss_cls`` written in a config replaces the head's
      default loss (an argument's default, not a config key a child's dict or ``--cfg-options``
      merges into), so ``model.cls_head.loss_cls.loss_weight=2.0`` on a base that does not write
      ``loss_cls`` out is a loss without a type; the head's default type is named;
    * (``train``) its ``class_weight``, a list, one weight per class (``num_classes``): torch's
      loss stops the first iteration on a ``RuntimeError`` otherwise;
    * (``train``) ``label_smooth_eps`` in [0, 1): ``BaseHead.loss_by_feat`` trains on targets
      ``(1 - eps) * one_hot + eps / num_classes`` without a word, where 1 or more leaves the true
      class's target no higher than the others' and below 0 makes the others' negative."""
    import inspect  # noqa: PLC0415

    found = _mmaction_head(cfg)
    if found is None:
        return []
    head, cls = found
    out = []
    loss = head.get('loss_cls')
    if isinstance(loss, dict) and 'type' not in loss:
        default = inspect.signature(cls).parameters.get('loss_cls')
        kind = default.default.get('type') if default and isinstance(default.default, dict) else None
        example = f"e.g. {kind!r}, {cls.__name__}'s default" if kind else "e.g. 'CrossEntropyLoss'"
        out.append(
            f'model.cls_head.loss_cls has no type, got {dict(loss)!r}: a loss_cls in the config replaces '
            f"the head's default loss whole (MMAction2 would stop on a KeyError naming no key); give "
            f'model.cls_head.loss_cls.type with it ({example})'
        )
    weights = loss.get('class_weight') if isinstance(loss, dict) else None
    classes = head.get('num_classes')
    if train and isinstance(weights, (list, tuple)) and _size(classes) and len(weights) != classes:
        out.append(
            f'model.cls_head.loss_cls.class_weight has {len(weights)} weights and '
            f"model.cls_head.num_classes is {classes}: one weight per class (torch's loss would stop the "
            'first iteration on a RuntimeError)'
        )
    eps = head.get('label_smooth_eps')
    if train and eps is not None and (not _is_number(eps) or not 0 <= eps < 1):
        out.append(
            f'model.cls_head.label_smooth_eps must be a number in [0, 1) (the share of each target spread '
            'evenly over the classes: at 1 or more the true class is no longer the most likely one, below 0 '
            f'the others are negative; MMAction2 trains on it without a word), got {eps!r}'
        )
    return out


#: MMAction2's blendings of a batch (``ActionDataPreprocessor``'s ``blending``, or an item of a
#: ``RandomBatchAugment``'s ``augments``): ``num_classes`` required, ``alpha`` their ``Beta(alpha,
#: alpha)``'s
BLENDINGS = ('MixupBlending', 'CutmixBlending')


def _blending_problems(cfg: Config, train: bool) -> list[str]:
    """The blending of the data preprocessor the runner uses (``model.data_preprocessor``, else
    the top-level ``data_preprocessor``, which mmengine's runner gives a model without one): a
    :data:`BLENDINGS` one (:func:`_mix_problems`), or a ``RandomBatchAugment``: its ``augments`` a
    dict or a list of dicts, each a blending checked as one, and its ``probs``
    (:func:`_probs_problems`). What MMAction2 asserts or raises as the model is built is named in
    both modes; what stops the first iteration (the classes, a negative probability) with
    ``train``."""
    model = cfg.get('model')
    if isinstance(model, dict) and 'data_preprocessor' in model:  # the runner's setdefault
        key, preprocessor = 'model.data_preprocessor', model['data_preprocessor']
    else:
        key, preprocessor = 'data_preprocessor', cfg.get('data_preprocessor')
    blending = preprocessor.get('blending') if isinstance(preprocessor, dict) else None
    if not isinstance(blending, dict):
        return []
    key += '.blending'
    heads = list(_class_heads(model, 'model'))
    if type_name(blending.get('type')) != 'RandomBatchAugment':
        return _mix_problems(blending, key, heads, train)
    augments = blending.get('augments')
    if augments is None:
        return [f'{key} needs augments (RandomBatchAugment: a list of blendings, e.g. MixupBlending)']
    listed = isinstance(augments, (list, tuple))
    out = []
    for i, augment in enumerate(augments if listed else [augments]):
        at = f'{key}.augments' + (f'[{i}]' if listed else '')
        if isinstance(augment, dict):
            out += _mix_problems(augment, at, heads, train)
        else:  # MMAction2 asserts it
            out.append(
                f'{at} must be a dict (a blending, e.g. MixupBlending, and its arguments), got {augment!r}'
            )
    return out + _probs_problems(blending.get('probs'), f'{key}.probs', len(augments) if listed else 1, train)


def _mix_problems(blending: dict, key: str, heads: list[tuple[str, int]], train: bool) -> list[str]:
    """One :data:`BLENDINGS` blending at ``key``: ``alpha`` > 0 (``Beta(alpha, alpha)`` stops the
    build on a ``ValueError`` traceback otherwise), ``num_classes`` given (a ``TypeError`` there;
    the heads' named) and (``train``) that of each classifying head of ``heads`` (``(key,
    num_classes)``, :func:`_class_heads`): the labels become one-hot vectors of ``num_classes``
    that the loss compares with the head's scores (a ``RuntimeError`` at the first iteration).
    Another blending is its own affair."""
    if type_name(blending.get('type')) not in BLENDINGS:
        return []
    kind = type_name(blending.get('type'))
    out = _positive(blending.get('alpha'), f'{key}.alpha')
    classes = blending.get('num_classes')
    if 'num_classes' not in blending:
        said = f': {", ".join(f"{k}.num_classes, {n}" for k, n in heads)}' if heads else ''
        out.append(f"{key} needs num_classes ({kind}'s one-hot labels have that many classes{said})")
    elif train and _size(classes):
        out += [
            f'{key}.num_classes ({classes}) must be {at}.num_classes ({n}): the blended labels are one-hot '
            "vectors of num_classes classes, which the loss compares with the head's scores"
            for at, n in heads
            if n != classes
        ]
    return out


def _probs_problems(probs: Any, key: str, augments: int, train: bool) -> list[str]:
    """A ``RandomBatchAugment``'s ``probs`` (``None``: each augment as likely): a float or a list
    (MMAction2 appends the chance of no blending to it: a tuple is an ``AttributeError``), one per
    augment and a sum <= 1 (MMAction2 asserts both), and (``train``) each in [0, 1] (NumPy's
    ``choice`` refuses a negative one at the first iteration)."""
    if probs is None:
        return []
    if isinstance(probs, float):
        probs = [probs]
    if not isinstance(probs, list) or not all(_is_number(p) for p in probs):
        return [
            f'{key} must be a float or a list of floats, one per augment (None: each as likely), '
            f'got {probs!r}'
        ]
    if len(probs) != augments:
        return [
            f'{key} has {len(probs)} probabilities for {augments} augments: one per augment '
            '(MMAction2 asserts it)'
        ]
    out = []
    if sum(probs) > 1:
        out.append(
            f"{key} sum to {sum(probs):g}, more than 1 (each is its augment's chance, 1 - the sum that "
            'of no blending; MMAction2 asserts it)'
        )
    if train:
        out += [
            f'{key}[{i}] must be in [0, 1] (a probability), got {p!r}'
            for i, p in enumerate(probs)
            if not 0 <= p <= 1
        ]
    return out


def _training_clips_problems(cfg: Config) -> list[str]:
    """``num_clips`` > 1 in a sampling step (MMAction2's ``SampleFrames`` or a subclass) of the
    train pipeline, for MMAction2's ``Recognizer3D`` (or a subclass that keeps its
    ``extract_feat`` and ``loss``) with a head that keeps ``BaseHead``'s ``loss`` and
    ``loss_by_feat`` (TimeSformer's, I3D's, SlowFast's, X3D's, MViT's, ...): the recognizer puts
    every clip through the backbone as a sample of its own and passes the head no number of clips,
    so the head scores ``num_clips`` clips per video against one label (the top-k accuracy it logs
    stops the first iteration on ``ValueError: operands could not be broadcast together``).
    ``Recognizer2D`` (TSN, TSM) averages its segments in the head and is left alone; the val and
    test pipelines may sample more clips, which the head averages."""
    try:
        from mmaction.models.heads.base import BaseHead  # noqa: PLC0415
        from mmaction.models.recognizers import Recognizer3D  # noqa: PLC0415
        from mmaction.models.recognizers.base import BaseRecognizer  # noqa: PLC0415
    except ImportError:
        return []
    model = cfg.get('model')
    found = _mmaction_head(cfg)
    recognizer = _model_class(cfg, model.get('type')) if isinstance(model, dict) else None
    if found is None or not isinstance(recognizer, type) or not issubclass(recognizer, Recognizer3D):
        return []
    head = found[1]
    own = (
        recognizer.extract_feat is not Recognizer3D.extract_feat or recognizer.loss is not BaseRecognizer.loss
    )
    if own or head.loss is not BaseHead.loss or head.loss_by_feat is not BaseHead.loss_by_feat:
        return []
    loader = cfg.get('train_dataloader')
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    return [
        f'{key}.num_clips ({type_name(step.get("type"))}) must be 1 for training with {recognizer.__name__} '
        f'and {head.__name__}, got {step["num_clips"]}: the recognizer scores each clip as a sample of its '
        'own against the one label of its video (a ValueError at the first iteration); sample more clips '
        'in the val / test pipelines, where the head averages them'
        for key, step in _transforms(dataset, 'train_dataloader.dataset')
        if _sampler_arguments(step.get('type')) is not None
        and _size(step.get('num_clips'))
        and step['num_clips'] > 1
    ]


def _recognizer_cfg_problems(model: Any) -> list[str]:
    """The keys of an MMAction2 recognizer's ``model.test_cfg`` / ``model.train_cfg`` against those
    it reads (:data:`RECOGNIZER_CFG_KEYS`; its ``.get`` would drop a typo such as
    ``max_testing_view``, and testing would go on with every view in one pass), the key that moved
    to another part in MMAction2 1.x named (:data:`MOVED_RECOGNIZER_KEYS`). A recognizer of
    another type (a subclass may read more) is left alone."""
    if not isinstance(model, dict) or type_name(model.get('type')) not in RECOGNIZER_CFG_KEYS:
        return []
    kind = type_name(model.get('type'))
    out = []
    for part in ('test_cfg', 'train_cfg'):
        node = model.get(part)
        if not isinstance(node, dict):
            continue
        valid = list(RECOGNIZER_CFG_KEYS[kind][part])
        for key in node:
            moved = MOVED_RECOGNIZER_KEYS.get((part, key))
            if moved:
                out.append(f'model.{part}.{key} is read by no MMAction2 1.x recognizer: {moved}')
            elif key not in valid:
                near = difflib.get_close_matches(str(key), valid, n=1)
                hint = f'did you mean {near[0]!r}? ' if near else ''
                keys = ', '.join(valid) if valid else 'none'
                out.append(f'model.{part}.{key} is not a key {kind} reads ({hint}it reads: {keys})')
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


def _unknown_keys(
    node: dict, valid: list[str], key: str, what: str, listed: Optional[str] = None
) -> list[str]:
    """Each key ``k`` of ``node`` not in ``valid``: ``'{key}.{k} is not {what} (did you mean ...?
    valid: ...)'``, the closest valid name suggested (``listed``: the valid names as the message
    gives them; default ``valid``, comma-separated)."""
    out = []
    for k in node:
        if k not in valid:
            near = difflib.get_close_matches(str(k), valid, n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(f'{key}.{k} is not {what} ({hint}valid: {listed or ", ".join(valid)})')
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
    out += _positive(loader.get('batch_size'), f'{name}.batch_size', integer=True)
    workers = loader.get('num_workers')
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        out.append(f'{name}.num_workers must be an int >= 0, got {workers!r}')
    elif isinstance(workers, int) and workers < 0:
        out.append(f'{name}.num_workers must be >= 0, got {workers}')
    elif workers == 0 and loader.get('persistent_workers'):  # torch's DataLoader: a ValueError traceback
        out.append(
            f'{name}.persistent_workers=True needs {name}.num_workers > 0, got 0 (set '
            f'{name}.persistent_workers=False to load in the main process)'
        )
    out += _storage_problems(loader.get('dataset'), f'{name}.dataset')
    out += _dataset_wrapper_problems(loader.get('dataset'), f'{name}.dataset')
    for at, pipeline in _pipelines(loader.get('dataset'), f'{name}.dataset'):
        out += _crop_problems(pipeline, at)
    for key, transform in _transforms(loader.get('dataset'), f'{name}.dataset'):
        kind = type_name(transform.get('type'))
        sizes = [(arg, (), True) for arg in CROP_KEYS.get(kind, ())]  # counts and pixels: ints
        if kind in ('Resize', 'RandomResize'):
            sizes.append(('scale', (-1,), False))  # -1: keep the aspect ratio; a float: a factor
        for arg, allow, integer in sizes:
            values = transform.get(arg)
            for v in values if isinstance(values, (list, tuple)) else [values]:
                out += _positive(v, f'{key}.{arg} ({kind})', allow, integer)
        valid = _sampler_arguments(transform.get('type'))
        if valid is not None:
            # _scope_: the registry's; _delete_: _list_delete_problems names it
            given = {k: v for k, v in transform.items() if k != 'type' and not str(k).startswith('_')}
            out += _unknown_keys(given, valid, key, f'an argument of {kind} (which ignores the others)')
    return out


def _crop_problems(pipeline: list, at: str) -> list[str]:
    """A crop of a fixed size (``CenterCrop``, ``ThreeCrop``, ``TenCrop``, ``RandomCrop``) larger
    than the frames the steps before it give, where they fix them: a ``Resize`` to ``(w, h)``
    with ``keep_ratio=False``, one to a short side (``scale=(-1, s)``), or an earlier crop.
    MMAction2's crops would cut smaller frames (a negative offset), assert, or stack ragged
    arrays: every video "unreadable", or the model's convolution failing on the clip."""
    out: list[str] = []
    frames: Optional[tuple[int, int]] = None  # (height, width), or (short side, short side)
    short, made = False, ''
    for i, step in enumerate(pipeline):
        if not isinstance(step, dict) or 'op' in step or 'transforms' in step:
            frames = None
            continue
        kind = type_name(step.get('type')) or ''
        scale = step.get('scale')
        crop = kind in ('CenterCrop', 'ThreeCrop', 'TenCrop', 'RandomCrop')
        size = _fixed_size(kind, step)
        if crop and size is not None and frames is not None:
            large = min(size) > frames[0] if short else size[0] > frames[0] or size[1] > frames[1]
            if large:
                given = f'frames of short side {frames[0]}' if short else f'{frames[1]}x{frames[0]} frames'
                out.append(
                    f'{at}[{i}] ({kind}) crops {size[1]}x{size[0]} out of {given} ({made} makes them): '
                    'the crop must fit in the frames'
                )
        if size is not None:
            frames, short, made = size, False, f'{at}[{i}] ({kind})'
        elif kind == 'Resize' and isinstance(scale, (list, tuple)) and len(scale) == 2 and -1 in scale:
            side = max(scale)
            frames, short = ((side, side), True) if _size(side) else (None, False)
            made = f'{at}[{i}] ({kind})'
        elif re.search('Resize|Crop|Scale|Pad|Rotate|Affine', kind):
            frames = None
    return out


def _sampler_arguments(kind: Any) -> Any:
    """The arguments of MMAction2's ``SampleFrames`` or a subclass ``kind`` names (a step's
    ``type``: its registered name, dotted path or class; its ``__init__`` and those it passes
    ``**kwargs`` on to, up to ``SampleFrames``, which drops the rest); ``None`` for any other
    transform (its unknown keys are its own affair)."""
    import inspect

    try:
        from mmaction.datasets.transforms import SampleFrames
        from mmaction.registry import TRANSFORMS
    except ImportError:
        return None
    cls = _registered(TRANSFORMS, kind)[1] if isinstance(kind, str) else kind
    if not (isinstance(cls, type) and issubclass(cls, SampleFrames)):
        return None
    names: list[str] = []
    for klass in cls.__mro__[: cls.__mro__.index(SampleFrames) + 1]:
        if '__init__' in vars(klass):
            params = inspect.signature(klass.__init__).parameters.values()
            names += [
                p.name for p in params if p.name != 'self' and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
            ]
    return list(dict.fromkeys(names))


def _transforms(dataset: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, transform dict)`` of a dataset's pipeline, through dataset wrappers."""
    for at, pipeline in _pipelines(dataset, key):
        for i, transform in enumerate(pipeline):
            if isinstance(transform, dict):
                yield f'{at}[{i}]', transform


def _datasets(dataset: Any, key: str) -> Iterator[tuple[str, dict]]:
    """``(config key, dataset config)`` of a dataset and of those it wraps."""
    if not isinstance(dataset, dict):
        return
    yield key, dataset
    if isinstance(dataset.get('dataset'), dict):
        yield from _datasets(dataset['dataset'], f'{key}.dataset')
    for i, inner in enumerate(dataset.get('datasets') or []):
        yield from _datasets(inner, f'{key}.datasets[{i}]')


def _pipelines(dataset: Any, key: str) -> Iterator[tuple[str, list]]:
    """``(config key, pipeline)`` of a dataset and of those it wraps."""
    for at, inner in _datasets(dataset, key):
        if isinstance(inner.get('pipeline'), (list, tuple)):
            yield f'{at}.pipeline', list(inner['pipeline'])


def _storage_problems(dataset: Any, key: str) -> list[str]:
    """Where a dataset (and each it wraps) reads its files from: ``data_prefix`` a dict of folders
    by kind (mmengine's ``BaseDataset`` joins each to ``data_root``: a string is an
    ``AttributeError`` traceback as the dataset is built), ``backend_args.backend`` one of
    mmengine's file backends (a typo, ``'lcoal'``, is a ``KeyError`` there)."""
    from mmengine.fileio.backends import backends

    out = []
    for at, inner in _datasets(dataset, key):
        prefix = inner.get('data_prefix')
        if prefix is not None and not isinstance(prefix, dict):
            out.append(
                f"{at}.data_prefix must be a dict of folders by kind (e.g. dict(img='train2017/'), "
                f"dict(video='videos/')), got {prefix!r}"
            )
        backend = (inner.get('backend_args') or {}).get('backend')
        if isinstance(inner.get('backend_args'), dict) and backend is not None and backend not in backends:
            near = difflib.get_close_matches(str(backend), list(backends), n=1)
            hint = f'did you mean {near[0]!r}? ' if near else ''
            out.append(
                f"{at}.backend_args.backend is not one of mmengine's file backends, got {backend!r} "
                f'({hint}valid: {", ".join(backends)})'
            )
    return out


#: mmengine's dataset wrappers -> their required argument that must be > 0, and whether it is a count
DATASET_WRAPPER_KEYS = {'RepeatDataset': ('times', True), 'ClassBalancedDataset': ('oversample_thr', False)}


def _dataset_wrapper_problems(dataset: Any, key: str) -> list[str]:
    """mmengine's dataset wrappers under ``dataset`` (:data:`DATASET_WRAPPER_KEYS`): a
    ``RepeatDataset``'s ``times`` an int > 0 (0 is an empty dataset, whose sampler stops on a
    ``ZeroDivisionError``, 1.5 a ``TypeError``), a ``ClassBalancedDataset``'s ``oversample_thr`` >
    0 (its repeat factors are ``sqrt(oversample_thr / class frequency)``: a negative one is a
    ``math domain error`` as the dataset is built, 0 repeats nothing); each given (a ``TypeError``
    there)."""
    out = []
    for at, inner in _datasets(dataset, key):
        kind = type_name(inner.get('type'))
        if kind not in DATASET_WRAPPER_KEYS:
            continue
        arg, count = DATASET_WRAPPER_KEYS[kind]
        if arg not in inner:
            out.append(f'{at} ({kind}) needs {arg} ({"an int" if count else "a number"} > 0)')
        else:
            out += _positive(inner[arg], f'{at}.{arg} ({kind})', integer=count)
    return out


#: what an attention splits into heads: a host's width, by the name it takes it (MMAction2 and
#: mmcv ``embed_dims``, timm and ViTDet ``embed_dim``)
WIDTH_KEYS = ('embed_dims', 'embed_dim')
#: sizes under ``model`` that are ints > 0 (each of them, in a list of one per stage or a pair):
#: a clip's frames and an image's side too (a recognizer's random clips in the benchmarks have them)
SIZE_KEYS = (*WIDTH_KEYS, 'patch_size', 'num_transformer_layers', 'num_frames', 'img_size')
#: probabilities under ``model``, in [0, 1): dropout (MMAction2's ``dropout_ratio``, mmcv's and
#: timm's ``*drop*``) and stochastic depth (a rate of 1 drops a whole block and divides by 0)
PROBABILITY_KEYS = (
    'drop_path_rate',
    'dropout_ratio',
    'attn_drop',
    'proj_drop',
    'ffn_drop',
    'drop_rate',
    'attn_drop_rate',
    'proj_drop_rate',
    'drop_prob',
)
#: numbers under ``model``: DnA's initial ``α`` (its attention's and a ``dna_vit_*`` model's)
NUMBER_KEYS = ('alpha_init',)


def _model_problems(node: Any, key: str) -> Iterator[str]:
    """The sizes and arguments of the parts under ``node`` (the model config, or the top-level
    ``data_preprocessor``) that would stop the build with a traceback: ``num_classes`` a
    positive int (or 0 in a backbone: timm's "no classifier"), ``num_heads`` a positive int that
    divides the width beside it (:data:`WIDTH_KEYS`; a list of them, one per stage, is the host's
    own business), the :data:`SIZE_KEYS` ints > 0, the :data:`PROBABILITY_KEYS` in [0, 1), the
    :data:`NUMBER_KEYS` numbers, and the keys of a ``type='with_attention'`` (the model's own
    arguments go in its ``model``)."""
    if isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _model_problems(value, f'{key}[{i}]')
        return
    if not isinstance(node, dict):
        return
    none = (0,) if 'backbone' in key.split('.') else ()  # a timm backbone's 0: no classifier
    yield from _positive(node.get('num_classes'), f'{key}.num_classes', none, integer=True)
    for name in SIZE_KEYS:
        sizes = node.get(name)
        for size in sizes if isinstance(sizes, (list, tuple)) else [sizes]:
            yield from _positive(size, f'{key}.{name}', integer=True)
    for name in PROBABILITY_KEYS:
        rate = node.get(name)
        if rate is not None and (not _is_number(rate) or not 0 <= rate < 1):
            yield f'{key}.{name} must be a number in [0, 1) (a probability), got {rate!r}'
    for name in (n for n in NUMBER_KEYS if n in node):
        if not _is_number(node[name]):
            yield f'{key}.{name} must be a number, got {node[name]!r}'
    heads = node.get('num_heads')
    if heads is not None and not isinstance(heads, (list, tuple)):
        wrong = _positive(heads, f'{key}.num_heads', integer=True)
        yield from wrong
        width_key = next((k for k in WIDTH_KEYS if k in node), None)
        width = node.get(width_key)
        if not wrong and isinstance(width, int) and not isinstance(width, bool) and width % heads:
            yield (
                f'{key}.num_heads ({heads}) must divide {key}.{width_key} ({width}): each head takes '
                f'{width_key} / num_heads channels'
            )
    if 'with_cp' in node and not isinstance(node['with_cp'], bool):
        yield f'{key}.with_cp must be True or False (activation checkpointing), got {node["with_cp"]!r}'
    if 'average_clips' in node and node['average_clips'] not in ('prob', 'score'):
        yield (
            f"{key}.average_clips must be 'prob' or 'score' (the views of a video averaged after or "
            f"before the softmax), got {node['average_clips']!r}"
            + (
                ': None keeps one score per view, which the metrics, --dump and infer cannot read'
                if node['average_clips'] is None
                else ''
            )
        )
    if type_name(node.get('type')) == 'with_attention':
        yield from _with_attention_keys(node, key)
    for name, value in node.items():
        yield from _model_problems(value, f'{key}.{name}')


def _recognizer_problems(cfg: Config, loaders: tuple[str, ...]) -> list[str]:
    """The sizes a recognizer's TimeSformer (MMAction2's, or a subclass such as dna_mm's) shares
    with the rest of the config, where its layers would stop the first iteration: ``img_size`` a
    multiple of ``patch_size`` (MMAction2 asserts it); ``num_frames`` the ``clip_len`` of the
    pipelines of ``loaders`` and ``img_size`` the frames' size where a pipeline fixes it
    (:func:`_clip_shape`: its time and position embeddings have that many places); the head's
    ``in_channels`` the backbone's ``embed_dims``."""
    model = cfg.get('model')
    if not isinstance(model, dict) or not isinstance(model.get('cls_head'), dict):
        return []
    backbone, key = model.get('backbone'), 'model.backbone'
    if isinstance(backbone, dict) and type_name(backbone.get('type')) == 'with_attention':
        backbone, key = backbone.get('model'), f'{key}.model'
    if not isinstance(backbone, dict) or not _is_timesformer(cfg, backbone.get('type')):
        return []
    out = []
    img, patch = _square(backbone.get('img_size')), _square(backbone.get('patch_size'))
    if img and patch and img % patch:
        out.append(
            f'{key}.img_size ({img}) must be a multiple of {key}.patch_size ({patch}): the frames are '
            'cut into patch_size x patch_size patches'
        )
    width, channels = backbone.get('embed_dims'), model['cls_head'].get('in_channels')
    if _size(width) and _size(channels) and width != channels:
        out.append(
            f'model.cls_head.in_channels ({channels}) must be {key}.embed_dims ({width}): the head '
            "reads the backbone's features"
        )
    frames: dict[Any, list[str]] = {}
    sizes: dict[Any, list[str]] = {}
    for name in loaders:
        loader = cfg.get(name)
        dataset = loader.get('dataset') if isinstance(loader, dict) else None
        for at, pipeline in _pipelines(dataset, f'{name}.dataset'):
            clip, final = _clip_shape(pipeline)
            if clip is not None:
                frames.setdefault(clip[0], []).append(
                    f'{at}[{clip[1]}] ({type_name(pipeline[clip[1]].get("type"))})'
                )
            if final is not None:
                sizes.setdefault(final[0], []).append(
                    f'{at}[{final[1]}] ({type_name(pipeline[final[1]].get("type"))})'
                )
    num_frames = backbone.get('num_frames')
    wrong = [f'{n} in {", ".join(where)}' for n, where in frames.items() if n != num_frames]
    if _size(num_frames) and wrong:
        out.append(
            f'{key}.num_frames ({num_frames}) must be the clip length the pipelines sample '
            f'(clip_len): {"; ".join(wrong)}'
        )
    wrong = [f'{w}x{h} from {", ".join(where)}' for (h, w), where in sizes.items() if (h, w) != (img, img)]
    if img and wrong:
        out.append(
            f'{key}.img_size ({img}) must be the size of the frames the pipelines give: {"; ".join(wrong)}'
        )
    return out


def _is_timesformer(cfg: Config, kind: Any) -> bool:
    """``kind`` (a backbone's ``type``) is MMAction2's ``TimeSformer`` or a subclass of it."""
    try:
        from mmaction.models.backbones import TimeSformer  # noqa: PLC0415
    except ImportError:
        return False
    cls = kind
    if isinstance(kind, str):
        registry = _registry(cfg, 'MODELS')
        cls = _registered(registry, kind)[1] if registry is not None else None
    return isinstance(cls, type) and issubclass(cls, TimeSformer)


def _clip_shape(pipeline: list) -> tuple[Optional[tuple[int, int]], Optional[tuple[tuple[int, int], int]]]:
    """``((frames, index), ((height, width), index))`` of the clips a pipeline gives, each with the
    step that fixes it, where it does not depend on the video (``None`` where it does, or where
    it cannot be told):

    * the frames: the ``clip_len`` of the last sampling step (``SampleFrames`` and the like);
    * the size: a last sizing step that is a ``Resize`` to a ``(w, h)`` with ``keep_ratio=False``
      or a crop of a fixed size (``CenterCrop``, ``ThreeCrop``, ``TenCrop``, ``RandomCrop``,
      MMPretrain's ``RandomResizedCrop`` ``scale``), with no other step after it whose name says
      that it resizes, crops, pads or rescales.

    Neither is read past a step that runs another library's ops (an ``op`` or ``transforms``
    key: MMAction2's ``PytorchVideoWrapper`` / ``TorchVisionWrapper``, ``ImgAug``, mmcv's
    ``RandomApply``), which may change both."""
    clip, final = None, None
    for i, step in enumerate(pipeline):
        if not isinstance(step, dict) or 'op' in step or 'transforms' in step:
            clip, final = None, None
            continue
        kind = type_name(step.get('type')) or ''
        if _size(step.get('clip_len')):
            clip = step['clip_len'], i
        size = _fixed_size(kind, step)
        if size is not None:
            final = size, i
        elif re.search('Resize|Crop|Scale|Pad|Rotate|Affine', kind):
            final = None
    return clip, final


def _fixed_size(kind: str, step: dict) -> Optional[tuple[int, int]]:
    """``(height, width)`` of the frames after the step ``kind``, where the step fixes it."""
    if kind == 'Resize' and step.get('keep_ratio') is False:
        scale = step.get('scale')
        if isinstance(scale, (list, tuple)) and len(scale) == 2 and all(_size(s) for s in scale):
            return scale[1], scale[0]  # MMAction2's (w, h)
        return None
    arg = {'CenterCrop': 'crop_size', 'ThreeCrop': 'crop_size', 'TenCrop': 'crop_size', 'RandomCrop': 'size'}
    arg['RandomResizedCrop'] = 'scale'  # MMPretrain's (MMAction2's has none: its output varies)
    size = step.get(arg.get(kind, ''))
    if kind != 'RandomCrop' and isinstance(size, (list, tuple)) and len(size) == 2 and all(map(_size, size)):
        return size[1], size[0]
    return (size, size) if _size(size) else None


def _size(value: Any) -> bool:
    """``value`` is an int > 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _square(value: Any) -> Optional[int]:
    """A side of ``value`` (an int > 0, or a pair of equal ones); ``None`` otherwise."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    return value if _size(value) else None


def _with_attention_keys(node: dict, key: str) -> list[str]:
    """The keys of a ``with_attention`` config it does not take (it raises a ``TypeError`` when
    it is built): the model's own arguments belong in its ``model``."""
    from mmengine.registry import MODELS  # noqa: PLC0415

    from ..utils.build_errors import accepted_arguments  # noqa: PLC0415

    kind = node['type']
    cls = MODELS.get(kind) if isinstance(kind, str) else kind
    valid = [a for a in accepted_arguments(cls) if a != 'registry']  # the registry's own
    given = {k: v for k, v in node.items() if k != 'type' and not str(k).startswith('_')}  # _scope_
    what = f"an argument of with_attention (the model's own go in {key}.model)"
    return _unknown_keys(given, valid, key, what)


def _attention_problems(node: Any, key: str) -> Iterator[str]:
    """An unknown attention name (a short name or a config dict's ``type``) anywhere under
    ``node`` (the model config): the key, the name, the closest valid names."""
    if isinstance(node, dict):
        for name, value in node.items():
            sub = f'{key}.{name}'
            per_step = isinstance(value, dict) and 'type' not in value and set(STEP_KEYS) & set(value)
            if name == 'attn_cfg' and per_step:
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
    """The problem of an attention choice ``value`` at ``key``: an unknown name, an argument its
    member does not take, or a ``variant`` of DnA's family that is not one (a member with DnA's
    negative branch, :attr:`~dna_mm.models.attention.AttentionBase.has_negative_branch`, or a
    config without a type: a ``dna_vit_*`` model's DnA), the closest valid name suggested. The
    member is named as a config names it: a short or registered name, a dotted path to it or its
    class (:func:`~dna_mm.models.attention.builder.member_type`)."""
    from ..models.attention.builder import member_type, unknown_arguments  # noqa: PLC0415

    attn = value.get('type') if isinstance(value, dict) else value
    member = member_type(attn)
    if isinstance(attn, str) and member is None:
        where = f'{key}.type' if isinstance(value, dict) else key
        yield f'{where}: unknown attention {attn!r}; {suggest_attention(attn)}'
        return
    if isinstance(value, dict) and member is not None:
        for name in unknown_arguments(value):
            step = key.endswith('attn_cfg') and difflib.get_close_matches(name, STEP_KEYS)
            hint = ' (one attention per step: attn_cfg=dict(_delete_=True, temporal=..., spatial=...))'
            yield f'{key}.{name}: {type_name(member)} takes no argument {name!r}{hint if step else ""}'
    if isinstance(value, dict) and 'variant' in value and (attn is None or member is not None):
        yield from _variant_problems(value['variant'], member, f'{key}.variant')


def _variant_problems(variant: Any, member: Any, key: str) -> list[str]:
    """A DnA ``variant`` at ``key`` that is not one of the family's
    (:func:`~dna_mm.family.canonical_variant`), where the member ``member`` (its registered name
    or class; ``None``: the host's DnA) has DnA's negative branch."""
    from ..family import canonical_variant  # noqa: PLC0415
    from ..models.attention.builder import attention_class  # noqa: PLC0415

    if member is not None and not attention_class(member).has_negative_branch:
        return []
    try:
        canonical_variant(variant)
    except ConfigError as err:
        return [f'{key}: {err}']
    return []
