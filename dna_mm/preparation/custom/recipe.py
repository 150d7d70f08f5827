"""A training recipe sized to a dataset, and the config that holds it.

From the base config's recipe (per-GPU batch ``b0``, global batch ``G0``, learning rate
``lr0``, ``E0`` epochs) and ``n`` training videos, :func:`size_recipe` takes::

    G  = the largest power of two <= G0 with n / G >= 10 steps an epoch (at least min(8, G0),
         and at most n)
    b  = min(b0, G)                        per-GPU batch; tools/train.py accumulates to G
    lr = lr0 · G / G0                      linear scaling (Goyal et al., 2017), when the run
                                           starts as the base's does (both fine-tune, or both
                                           start from scratch)
    lr = 0.1 · G / 256       (SGD)         from scratch on a base that fine-tunes (its lr is a
    lr = 5e-4 · sqrt(G / 512) (Adam[W])    fine-tuning lr): Goyal et al.'s SGD rule; DeiT's
                                           reference, square-root scaled for an adaptive
                                           optimizer (Malladi et al., 2022)
    E  = min(100, max(E0, ceil(1000 / ceil(n / G))))   at least 1,000 optimizer steps
    W  = ceil(E / 20)                      linear warm-up epochs from 0.1 · lr (new head)

and the base's epoch-based schedule moved to ``E`` epochs (milestones at the same fraction of
the run; validation and checkpoint intervals equal to the base's length become ``E``:
:func:`dna_mm.utils.schedule.sync_schedule`; an ``eta_min`` keeps its ratio to the lr).
:func:`config_text` writes the config: ``_base_`` the base, ``num_classes``, the lists and video
root, the initialisation (:func:`initialisation`:
from scratch clears every pretrained initialisation of the base, a zoo URL included), the
pipelines fitted to the clips (:mod:`.pipelines`), the recipe.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mmengine.config import Config

from ...errors import ConfigError

#: optimizer steps an epoch below which the global batch is halved
MIN_STEPS_PER_EPOCH = 10
#: optimizer steps a run makes at least (more epochs for small sets), and the epoch cap
MIN_STEPS, MAX_EPOCHS = 1000, 100
#: warm-up: one epoch per this many epochs of the run (rounded up)
WARMUP_DIVISOR = 20
#: the dataset types whose arguments the lists fit (RobustVideoDataset replaces them; MMAction2's
#: RepeatAugDataset, repeated augmentation, is trained without the repeats)
VIDEO_DATASETS = ('VideoDataset', 'RobustVideoDataset', 'RepeatAugDataset')
#: from-scratch learning rates by optimizer: (reference lr, reference global batch, exponent)
SCRATCH_LR = {'SGD': (0.1, 256, 1.0), 'AdamW': (5e-4, 512, 0.5), 'Adam': (5e-4, 512, 0.5)}
#: a classifier head's initialisation where a base loaded it from a checkpoint (ViT's)
HEAD_INIT = dict(_delete_=True, type='TruncNormal', layer='Linear', std=0.02)


@dataclass
class Recipe:
    """What :func:`size_recipe` chose (``epochs`` / ``warmup_epochs`` / ``param_scheduler``
    are ``None`` for an iteration-based base: its schedule is kept)."""

    global_batch: int
    batch_size: int
    lr: float
    epochs: Optional[int]
    warmup_epochs: Optional[int]
    param_scheduler: Optional[list[dict]]
    base_global_batch: int
    base_lr: float
    val_interval: Optional[int] = None  # moved with the length (the base's: None)
    checkpoint_interval: Optional[int] = None
    lr_rule: str = 'linear'  # how lr was chosen: 'linear' (the base's, scaled) or 'scratch'

    def lr_source(self) -> str:
        """How :attr:`lr` was chosen, as a phrase."""
        if self.lr_rule == 'linear':
            return f'the base lr {self.base_lr:g} x {self.global_batch} / {self.base_global_batch}'
        return f'from scratch on a fine-tuning base (its lr {self.base_lr:g}): {self.lr_rule}'

    def describe(self, n_train: int) -> str:
        gpus = self.global_batch // self.batch_size
        spread = f'{gpus} GPUs, or fewer with gradient accumulation' if gpus > 1 else 'one GPU'
        lines = [
            f'recipe for {n_train} training videos: global batch {self.global_batch} ({self.batch_size} '
            f'clips a GPU: {spread}), lr {self.lr:g} ({self.lr_source()})'
        ]
        if self.epochs is not None:
            steps = math.ceil(n_train / self.global_batch)
            lines.append(
                f'{self.epochs} epochs of {steps} optimizer step{"s" if steps > 1 else ""}, '
                f'{self.warmup_epochs} of them warm-up'
            )
        return '; '.join(lines)


def _pow2_floor(x: float) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(x, 1)))))


def base_values(base: Config) -> tuple[int, int, float]:
    """``(b0, G0, lr0)`` of a base config: its train batch, its ``global_batch_size`` (``None``
    there: ``b0``; no such key: ``auto_scale_lr.base_batch_size``, else ``b0``) and its
    optimizer's lr."""
    loader = base.get('train_dataloader') or {}
    b0 = loader.get('batch_size')
    lr0 = ((base.get('optim_wrapper') or {}).get('optimizer') or {}).get('lr')
    if not isinstance(b0, int) or not isinstance(lr0, (int, float)):
        raise ConfigError('the base config needs train_dataloader.batch_size and optim_wrapper.optimizer.lr')
    if 'global_batch_size' in base:  # None: the batch as it runs
        g0 = base.global_batch_size or b0
    else:
        g0 = (base.get('auto_scale_lr') or {}).get('base_batch_size') or b0
    return b0, int(g0), float(lr0)


def scratch_lr(optimizer: dict, global_batch: int) -> tuple[float, str]:
    """The from-scratch lr for ``optimizer``'s type at ``global_batch`` (:data:`SCRATCH_LR`) and
    the rule as a phrase; a ``ConfigError`` for an optimizer without one."""
    kind = optimizer.get('type')
    if kind not in SCRATCH_LR:
        raise ConfigError(
            f'optim_wrapper.optimizer.type {kind!r}: no from-scratch lr rule (dna_mm has one for '
            f'{", ".join(SCRATCH_LR)}); give --load-from a checkpoint, or a base that trains from scratch'
        )
    ref, ref_batch, power = SCRATCH_LR[kind]
    rule = (
        f'{ref:g} x {global_batch} / {ref_batch}'
        if power == 1
        else f'{ref:g} x sqrt({global_batch} / {ref_batch})'
    )
    return ref * (global_batch / ref_batch) ** power, f'{kind} {rule}'


def size_recipe(base: Config, n_train: int, from_scratch: bool = False) -> Recipe:
    """The recipe for ``n_train`` training videos (see the module docstring); ``from_scratch``:
    the run starts from random weights (on a base that fine-tunes, the lr is the optimizer's
    from-scratch rule, not the base's)."""
    from ...utils.schedule import sync_schedule

    b0, g0, lr0 = base_values(base)
    floor = min(8, g0)
    g = _pow2_floor(min(g0, n_train / MIN_STEPS_PER_EPOCH))
    g = min(max(g, floor), max(1, _pow2_floor(n_train)), g0)
    b = min(b0, g)
    lr, rule = lr0 * g / g0, 'linear'
    if from_scratch and pretrained_parts(base):
        lr, rule = scratch_lr(base.optim_wrapper.optimizer, g)
    train_cfg = base.get('train_cfg') or {}
    e0 = train_cfg.get('max_epochs')
    if not isinstance(e0, int) or 'max_iters' in train_cfg:
        return Recipe(g, b, lr, None, None, None, g0, lr0, lr_rule=rule)
    steps = math.ceil(n_train / g)
    epochs = min(MAX_EPOCHS, max(e0, math.ceil(MIN_STEPS / steps)))
    warmup = math.ceil(epochs / WARMUP_DIVISOR)
    checkpoint = copy.deepcopy((base.get('default_hooks') or {}).get('checkpoint') or {})
    checkpoint_before = checkpoint.get('interval')
    sched_cfg = Config(
        dict(
            param_scheduler=copy.deepcopy(base.get('param_scheduler') or []),
            train_cfg=dict(copy.deepcopy(train_cfg), max_epochs=epochs),
            default_hooks=dict(checkpoint=checkpoint),
        )
    )
    sync_schedule(sched_cfg, e0)  # intervals equal to the run's length stay so (validate at the end)
    intervals = dict(
        val_interval=sched_cfg.train_cfg.get('val_interval'),
        checkpoint_interval=sched_cfg.default_hooks.checkpoint.get('interval'),
    )
    before = dict(val_interval=train_cfg.get('val_interval'), checkpoint_interval=checkpoint_before)
    intervals = {k: v for k, v in intervals.items() if v != before[k]}
    schedulers = [dict(s) for s in sched_cfg.param_scheduler]
    for sched in schedulers:  # a floor set for the base's lr keeps its ratio to the new one
        if isinstance(sched.get('eta_min'), (int, float)) and lr != lr0:
            sched['eta_min'] = sched['eta_min'] * lr / lr0
    first = schedulers[0] if schedulers else {}
    if first.get('type') == 'LinearLR' and first.get('begin', 0) == 0 and first.get('by_epoch', True):
        old_end, first['end'] = first.get('end'), warmup  # the base's own warm-up, over W epochs
        for sched in schedulers[1:]:  # what began after it begins after the new one
            if sched.get('by_epoch', True) and sched.get('begin') == old_end and old_end != warmup:
                if sched.get('T_max') == sched.get('end', epochs) - old_end:
                    sched['T_max'] = sched.get('end', epochs) - warmup
                sched['begin'] = warmup
    else:
        schedulers.insert(
            0,
            dict(
                type='LinearLR',
                start_factor=0.1,
                by_epoch=True,
                begin=0,
                end=warmup,
                convert_to_iter_based=True,
            ),
        )
    return Recipe(g, b, lr, epochs, warmup, schedulers, g0, lr0, **intervals, lr_rule=rule)


def dataset_type(base: Config) -> str:
    """The base's training dataset type; a ``ConfigError`` unless it trains (a model, an
    optimizer) on video lists."""
    if not base.get('train_dataloader') or not (base.get('optim_wrapper') or {}).get('optimizer'):
        raise ConfigError(
            'the base config does not train (no train_dataloader or optim_wrapper: a test-only '
            'config); give a base that trains, e.g. configs/timesformer_dna_k400.py'
        )
    kind = ((base.get('train_dataloader') or {}).get('dataset') or {}).get('type')
    if kind not in VIDEO_DATASETS:
        raise ConfigError(
            f'the base config trains on {kind!r}; the lists written here are for a video dataset '
            f'({" / ".join(VIDEO_DATASETS)})'
        )
    return kind


def _pretrained_init(init_cfg: Any) -> bool:
    items = init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]
    return any(isinstance(i, dict) and i.get('type') == 'Pretrained' for i in items)


def _strip(node: Any, path: str, found: list[str]) -> dict:
    """The overrides that clear every pretrained initialisation below ``node`` (``path``: its
    key), each cleared one appended to ``found`` as ``'key=value'``."""
    over: dict = {}
    if not isinstance(node, dict):
        return over
    for key, value in node.items():
        where = f'{path}.{key}'
        if key == 'pretrained' and isinstance(value, str) and value:
            over[key] = None
            if node.get('pretrained2d'):  # Video Swin inflates 2D weights from `pretrained`
                over['pretrained2d'] = False
        elif key == 'clip_pretrained' and value is True:
            over[key] = False
        elif key == 'init_cfg' and _pretrained_init(value):
            over[key] = copy.deepcopy(HEAD_INIT) if path.endswith('cls_head') else None
        elif isinstance(value, dict):
            if inner := _strip(value, where, found):
                over[key] = inner
            continue
        else:
            continue
        checkpoint = value.get('checkpoint', value) if isinstance(value, dict) else value
        found.append(f'{where}={checkpoint!r}')
    return over


#: what :func:`class_count` writes where the number of classes goes (the config's variable)
NUM_CLASSES = '__num_classes__'


def class_count(node: Any) -> Any:
    """The overrides that set every ``num_classes`` below ``node`` (a model config) to the
    config's ``num_classes`` (:data:`NUM_CLASSES`): the head's, and those of the batch
    augments (Mixup / CutMix one-hot labels, as MViTv2's zoo recipe has); a list holding one is
    written whole (a config replaces lists). ``None`` when there is none."""
    if isinstance(node, (list, tuple)):
        items = [class_count(v) for v in node]
        if all(i is None for i in items):
            return None
        return [_with_count(v) for v in node]
    if not isinstance(node, dict):
        return None
    over = {k: NUM_CLASSES for k in node if k == 'num_classes'}
    for key, value in node.items():
        inner = class_count(value)
        if inner is not None and key != 'num_classes':
            over[key] = inner
    return over or None


def _with_count(node: Any) -> Any:
    """``node`` whole, every ``num_classes`` in it set to :data:`NUM_CLASSES`."""
    if isinstance(node, (list, tuple)):
        return [_with_count(v) for v in node]
    if isinstance(node, dict):
        return {k: NUM_CLASSES if k == 'num_classes' else _with_count(v) for k, v in node.items()}
    return node


def merge(a: dict, b: dict) -> dict:
    """``b`` over ``a``, dicts merged key by key (neither is changed)."""
    out = dict(a)
    for key, value in b.items():
        out[key] = (
            merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def pretrained_parts(base: Config) -> list[str]:
    """Every pretrained initialisation of ``base`` (``'model.backbone.pretrained=...'``):
    ``pretrained`` paths, UniFormerV2's ``clip_pretrained``, ``Pretrained`` init configs and
    ``load_from``."""
    found: list[str] = []
    _strip(base.get('model') or {}, 'model', found)
    if base.get('load_from'):
        found.append(f'load_from={base.load_from!r}')
    return found


def initialisation(base: Config, load_from: Optional[str]) -> tuple[dict, str]:
    """The ``model`` keys that set the initialisation, and a sentence saying what it is.

    ``load_from``: a checkpoint (a backbone with a ``pretrained`` argument, as DnATimeSformer:
    ``pretrained``, which converts the layout and reports the keys; other backbones: mmengine's
    ``Pretrained`` init of the checkpoint's ``backbone.`` keys), with every other pretrained
    initialisation of the base cleared; ``'none'``: from scratch, every pretrained
    initialisation cleared (a zoo head loaded from a checkpoint gets ViT's truncated-normal init);
    ``None``: the base's own initialisation (no keys)."""
    if load_from is None:
        return {}, "the base config's own initialisation"
    found: list[str] = []
    model = _strip(base.get('model') or {}, 'model', found)
    cleared = f' (cleared: {", ".join(found)})' if found else ''
    if load_from == 'none':
        return model, f'from scratch{cleared}'
    backbone = (base.get('model') or {}).get('backbone') or {}
    keys = model.setdefault('backbone', {})
    if 'pretrained' in backbone or backbone.get('type') == 'DnATimeSformer':
        keys['pretrained'] = load_from
        return model, f'the backbone of {load_from} (a new head){cleared}'
    keys['init_cfg'] = dict(type='Pretrained', checkpoint=load_from, prefix='backbone.')
    return model, f'the backbone keys of {load_from} (a new head){cleared}'


def python(value: Any, indent: int = 0) -> str:
    """``value`` as config source: dicts as ``dict(key=...)``, a list of dicts one per line."""
    pad = ' ' * indent
    if isinstance(value, dict):
        return 'dict(' + ', '.join(f'{k}={python(v, indent)}' for k, v in value.items()) + ')'
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        inner = ''.join(f'{pad}    {python(v, indent + 4)},\n' for v in value)
        return f'[\n{inner}{pad}]'
    return repr(value)


def config_text(
    base_ref: str,
    out_dir: Path,
    data_root: Path,
    classes: list[str],
    splits: dict[str, int],
    recipe: Recipe,
    model: dict,
    init_note: str,
    source: str,
    pipelines: dict[str, list[dict]],
    clear_load_from: bool = False,
    repeat_collate: bool = False,
    auto_amp: bool = False,
) -> str:
    """The generated ``config.py`` (see the module docstring); ``splits`` maps each written
    list (``train`` / ``val`` / ``test``) to its video count, ``model`` holds the initialisation
    keys (:func:`initialisation`, and :func:`class_count`'s), ``pipelines`` the base's, fitted
    (:mod:`.pipelines`); ``clear_load_from``: the base's ``load_from`` gives way to the
    initialisation chosen; ``repeat_collate``: the base collates repeated samples
    (RepeatAugDataset), the plain collate replaces it; ``auto_amp``: the base's
    ``AmpOptimWrapper`` (which asserts a GPU) becomes dna_mm's ``AutoAmpOptimWrapper`` (AMP on a
    GPU, full precision on a CPU)."""
    collate = ", collate_fn=dict(_delete_=True, type='pseudo_collate')" if repeat_collate else ''
    out = out_dir.resolve()
    lists = {s: str(out / f'{s}.txt') for s in splits}
    test = 'test' if 'test' in lists else 'val'
    counts = ' / '.join(f'{n} {s}' for s, n in splits.items())
    model_text = python(model).replace(repr(NUM_CLASSES), 'num_classes')
    lines = [
        f'# Training on {source}: {len(classes)} classes, {counts} videos. Written by',
        '# tools/data/build_custom_dataset.py (docs/datasets/custom.md); running it again rewrites it.',
        f'_base_ = [{base_ref!r}]',
        '',
        f'data_root = {str(data_root.resolve())!r}',
        f'num_classes = {len(classes)}',
        f"label_map = {str(out / 'classes.txt')!r}  # class names (tools/infer.py, confusion matrix)",
        "custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)  # every dna_mm type",
        f'# initialisation: {init_note}',
        f'model = {model_text}',
    ]
    if clear_load_from or model.get('backbone', {}).get('pretrained', 0) is None:
        lines.append('load_from = None')
    lines += ['', '# The pipelines, the clip sampling fitted to the clips (docs/datasets/custom.md)']
    for split, steps in pipelines.items():
        lines.append(f'{split}_pipeline = {python(steps)}')
    lines += [
        'dataset = dict(',
        "    type='RobustVideoDataset', num_classes=num_classes, data_prefix=dict(video=data_root)",
        ')',
        f'train_dataloader = dict(batch_size={recipe.batch_size}, dataset=dict(_delete_=True, **dataset, '
        f'ann_file={lists["train"]!r}, pipeline=train_pipeline){collate})',
    ]
    for split, ann in (('val', lists.get('val')), ('test', lists[test])):
        if ann is None:
            lines.append('val_cfg = val_dataloader = val_evaluator = None  # no validation list')
            continue
        note = '  # no test list: val' if split == 'test' and test == 'val' else ''
        lines.append(
            f'{split}_dataloader = dict(dataset=dict(_delete_=True, **dataset, ann_file={ann!r}, '
            f'pipeline={split}_pipeline, test_mode=True)){note}'
        )
    lines += [
        '',
        f'# The recipe, sized to {splits["train"]} training videos (docs/datasets/custom.md): global batch',
        f'# {recipe.global_batch} (tools/train.py accumulates gradients to it), lr {recipe.lr_source()}'
        + (f', {recipe.epochs} epochs with {recipe.warmup_epochs} of warm-up.' if recipe.epochs else '.'),
        f'global_batch_size = {recipe.global_batch}',
        f'auto_scale_lr = dict(enable=False, base_batch_size={recipe.global_batch})  # the global batch',
        f'optim_wrapper = dict(optimizer=dict(lr={recipe.lr!r}))'
        if not auto_amp
        else f"optim_wrapper = dict(type='AutoAmpOptimWrapper', optimizer=dict(lr={recipe.lr!r}))  "
        '# the base\'s AMP on a GPU, full precision on a CPU',
    ]
    if recipe.epochs is not None:
        val = f', val_interval={recipe.val_interval}' if recipe.val_interval else ''
        lines.append(f'train_cfg = dict(max_epochs={recipe.epochs}{val})')
        lines.append(f'param_scheduler = {python(recipe.param_scheduler)}')
    if recipe.checkpoint_interval:
        lines.append(f'default_hooks = dict(checkpoint=dict(interval={recipe.checkpoint_interval}))')
    return '\n'.join(lines) + '\n'


def base_reference(base: str) -> str:
    """``_base_`` entry for ``base``: a zoo name (``mmaction::...``) as it is, a file by its
    absolute path (as the lists and the video folder are named)."""
    return base if '::' in base else str(Path(base).resolve())
