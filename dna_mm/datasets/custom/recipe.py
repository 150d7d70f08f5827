"""A training recipe sized to a dataset, and the config that holds it.

From the base config's recipe (per-GPU batch ``b0``, global batch ``G0``, learning rate
``lr0``, ``E0`` epochs) and ``n`` training videos, :func:`size_recipe` takes::

    G  = the largest power of two <= G0 with n / G >= 10 steps an epoch (at least min(8, G0),
         and at most n)
    b  = min(b0, G)                        per-GPU batch; tools/train.py accumulates to G
    lr = lr0 · G / G0                      linear scaling (Goyal et al., 2017)
    E  = min(100, max(E0, ceil(1000 / ceil(n / G))))   at least 1,000 optimizer steps
    W  = ceil(E / 20)                      linear warm-up epochs from 0.1 · lr (new head)

and the base's epoch-based schedule moved to ``E`` epochs (milestones at the same fraction of
the run; validation and checkpoint intervals equal to the base's length become ``E``:
:func:`dna_mm.apis.sync_schedule`). :func:`config_text` writes the config: ``_base_``
the base, ``num_classes``, the lists and video root, the initialisation (:func:`initialisation`),
the recipe.
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
#: the dataset types whose arguments the lists fit (RobustVideoDataset replaces them)
VIDEO_DATASETS = ('VideoDataset', 'RobustVideoDataset')


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

    def describe(self, n_train: int) -> str:
        gpus = self.global_batch // self.batch_size
        spread = f'{gpus} GPUs, or fewer with gradient accumulation' if gpus > 1 else 'one GPU'
        lines = [
            f'recipe for {n_train} training videos: global batch {self.global_batch} ({self.batch_size} '
            f'clips a GPU: {spread}), lr {self.lr:g} '
            f'(the base: {self.base_lr:g} for {self.base_global_batch})'
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


def size_recipe(base: Config, n_train: int) -> Recipe:
    """The recipe for ``n_train`` training videos (see the module docstring)."""
    from ...apis.config import sync_schedule

    b0, g0, lr0 = base_values(base)
    floor = min(8, g0)
    g = _pow2_floor(min(g0, n_train / MIN_STEPS_PER_EPOCH))
    g = min(max(g, floor), max(1, _pow2_floor(n_train)), g0)
    b = min(b0, g)
    lr = lr0 * g / g0
    train_cfg = base.get('train_cfg') or {}
    e0 = train_cfg.get('max_epochs')
    if not isinstance(e0, int) or 'max_iters' in train_cfg:
        return Recipe(g, b, lr, None, None, None, g0, lr0)
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
    return Recipe(g, b, lr, epochs, warmup, schedulers, g0, lr0, **intervals)


def dataset_type(base: Config) -> str:
    """The base's training dataset type; a ``ConfigError`` unless it reads video lists."""
    kind = ((base.get('train_dataloader') or {}).get('dataset') or {}).get('type')
    if kind not in VIDEO_DATASETS:
        raise ConfigError(
            f'the base config trains on {kind!r}; the lists written here are for a video dataset '
            f'({" / ".join(VIDEO_DATASETS)})'
        )
    return kind


def initialisation(base: Config, load_from: Optional[str]) -> tuple[dict, str]:
    """The ``model.backbone`` keys that set the initialisation, and a sentence saying what it is.

    ``load_from``: a checkpoint (a backbone with a ``pretrained`` argument, as DnATimeSformer:
    ``pretrained``, which converts the layout and reports the keys; other backbones: mmengine's
    ``Pretrained`` init of the checkpoint's ``backbone.`` keys); ``'none'``: from scratch;
    ``None``: the base's own initialisation (no keys)."""
    backbone = (base.get('model') or {}).get('backbone') or {}
    init_cfg = backbone.get('init_cfg')
    pretrained_init = isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained'
    if load_from is None:
        return {}, "the base config's own initialisation"
    if load_from == 'none':
        keys = dict(pretrained=None) if 'pretrained' in backbone else {}
        return (dict(keys, init_cfg=None) if pretrained_init else keys), 'from scratch'
    if 'pretrained' in backbone or backbone.get('type') == 'DnATimeSformer':
        return dict(pretrained=load_from), f'the backbone of {load_from} (a new head)'
    init = dict(type='Pretrained', checkpoint=load_from, prefix='backbone.')
    return dict(init_cfg=init), f'the backbone keys of {load_from} (a new head)'


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
    backbone: dict,
    init_note: str,
    source: str,
) -> str:
    """The generated ``config.py`` (see the module docstring); ``splits`` maps each written
    list (``train`` / ``val`` / ``test``) to its video count, ``backbone`` holds the
    initialisation keys (:func:`initialisation`)."""
    out = out_dir.resolve()
    lists = {s: str(out / f'{s}.txt') for s in splits}
    test = 'test' if 'test' in lists else 'val'
    counts = ' / '.join(f'{n} {s}' for s, n in splits.items())
    model = dict(backbone=backbone) if backbone else {}
    lines = [
        f'# Fine-tuning on {source}: {len(classes)} classes, {counts} videos. Written by',
        '# tools/data/build_custom_dataset.py (docs/datasets/custom.md); running it again rewrites it.',
        f'_base_ = [{base_ref!r}]',
        '',
        f'data_root = {str(data_root.resolve())!r}',
        f'num_classes = {len(classes)}',
        f"label_map = {str(out / 'classes.txt')!r}  # class names (tools/infer.py, confusion matrix)",
        "custom_imports = dict(imports=['dna_mm', 'dna_mm.apis'], allow_failed_imports=False)",
        f'# initialisation: {init_note}',
        'model = ' + python(model)[:-1] + (', ' if model else '') + 'cls_head=dict(num_classes=num_classes))',
    ]
    if backbone.get('pretrained', 0) is None or backbone.get('init_cfg', 0) is None:
        lines.append('load_from = None')
    lines += [
        'dataset = dict(',
        "    type='RobustVideoDataset', num_classes=num_classes, data_prefix=dict(video=data_root)",
        ')',
        f'train_dataloader = dict(batch_size={recipe.batch_size}, dataset=dict(**dataset, '
        f'ann_file={lists["train"]!r}))',
    ]
    if 'val' in lists:
        lines.append(f'val_dataloader = dict(dataset=dict(**dataset, ann_file={lists["val"]!r}))')
    else:
        lines.append('val_cfg = val_dataloader = val_evaluator = None  # no validation list')
    lines += [
        f'test_dataloader = dict(dataset=dict(**dataset, ann_file={lists[test]!r}))'
        + ('' if test == 'test' else '  # no test list: val'),
        '',
        f'# The recipe, sized to {splits["train"]} training videos (docs/datasets/custom.md): global batch',
        f'# {recipe.global_batch} (tools/train.py accumulates gradients to it), the base lr '
        f'{recipe.base_lr:g} x {recipe.global_batch} / {recipe.base_global_batch}'
        + (f', {recipe.epochs} epochs with {recipe.warmup_epochs} of warm-up.' if recipe.epochs else '.'),
        f'global_batch_size = {recipe.global_batch}',
        f'auto_scale_lr = dict(base_batch_size={recipe.global_batch})',
        f'optim_wrapper = dict(optimizer=dict(lr={recipe.lr!r}))',
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
