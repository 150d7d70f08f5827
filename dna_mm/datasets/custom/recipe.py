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
the run, :func:`dna_mm.apis.sync_schedule`). :func:`config_text` writes the config: ``_base_``
the base, ``num_classes``, the lists and video root, the initialisation, the recipe.
"""

from __future__ import annotations

import copy
import math
import os
import pprint
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

    def describe(self, n_train: int) -> str:
        lines = [
            f'recipe for {n_train} training videos: global batch {self.global_batch} '
            f'({self.batch_size} per GPU, accumulated to {self.global_batch}), lr {self.lr:g} '
            f'(the base: {self.base_lr:g} for {self.base_global_batch})'
        ]
        if self.epochs is not None:
            steps = math.ceil(n_train / self.global_batch)
            lines.append(
                f'{self.epochs} epochs of {steps} optimizer steps, {self.warmup_epochs} warm-up epoch(s)'
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
    sched_cfg = Config(
        dict(
            param_scheduler=copy.deepcopy(base.get('param_scheduler') or []),
            train_cfg=dict(max_epochs=epochs),
        )
    )
    sync_schedule(sched_cfg, e0)
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
                type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=warmup, convert_to_iter_based=True
            ),
        )
    return Recipe(g, b, lr, epochs, warmup, schedulers, g0, lr0)


def dataset_type(base: Config) -> str:
    """The base's training dataset type; a ``ConfigError`` unless it reads video lists."""
    kind = ((base.get('train_dataloader') or {}).get('dataset') or {}).get('type')
    if kind not in VIDEO_DATASETS:
        raise ConfigError(
            f'the base config trains on {kind!r}; the lists written here are for a video dataset '
            f'({" / ".join(VIDEO_DATASETS)})'
        )
    return kind


def init_lines(base: Config, load_from: Optional[str]) -> tuple[list[str], str]:
    """Config lines for the initialisation, and a sentence saying what it is.

    ``load_from``: a checkpoint (a DnATimeSformer base, or any backbone with a ``pretrained``
    argument: ``model.backbone.pretrained``, which converts and reports the keys; other
    backbones: mmengine's ``Pretrained`` init of the backbone keys); ``'none'``: from scratch;
    ``None``: the base's own initialisation."""
    backbone = (base.get('model') or {}).get('backbone') or {}
    if load_from is None:
        return [], "the base config's own initialisation"
    if load_from == 'none':
        scratch = dict(pretrained=None) if 'pretrained' in backbone else {}
        if isinstance(backbone.get('init_cfg'), dict) and backbone['init_cfg'].get('type') == 'Pretrained':
            scratch['init_cfg'] = None
        return [f'model = dict(backbone={scratch!r})', 'load_from = None'], 'from scratch'
    if 'pretrained' in backbone or backbone.get('type') == 'DnATimeSformer':
        return [f'model = dict(backbone=dict(pretrained={load_from!r}))'], f'the backbone of {load_from}'
    init = dict(type='Pretrained', checkpoint=load_from, prefix='backbone.')
    return [f'model = dict(backbone=dict(init_cfg={init!r}))'], f'the backbone keys of {load_from}'


def _literal(name: str, value: Any) -> str:
    text = pprint.pformat(value, width=100, sort_dicts=False)
    return f'{name} = {text}'


def config_text(
    base_ref: str,
    out_dir: Path,
    data_root: Path,
    classes: list[str],
    splits: dict[str, int],
    recipe: Recipe,
    init: list[str],
    init_note: str,
    source: str,
) -> str:
    """The generated ``config.py`` (see the module docstring); ``splits`` maps each written
    list (``train`` / ``val`` / ``test``) to its video count."""
    out = out_dir.resolve()
    lists = {s: str(out / f'{s}.txt') for s in splits}
    test = 'test' if 'test' in lists else 'val'
    counts = ' / '.join(f'{n} {s}' for s, n in splits.items())
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
        *init,
        'model = dict(cls_head=dict(num_classes=num_classes))',
        "dataset = dict(type='RobustVideoDataset', num_classes=num_classes, data_prefix=dict(video=data_root))",
        f'train_dataloader = dict(batch_size={recipe.batch_size}, dataset=dict(**dataset, '
        f'ann_file={lists["train"]!r}))',
    ]
    if 'val' in lists:
        lines.append(f'val_dataloader = dict(dataset=dict(**dataset, ann_file={lists["val"]!r}))')
    else:
        lines.append('val_cfg = val_dataloader = val_evaluator = None  # no validation list')
    lines += [
        f'test_dataloader = dict(dataset=dict(**dataset, ann_file={lists[test]!r}))',
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
        lines.append(f'train_cfg = dict(max_epochs={recipe.epochs})')
        lines.append(_literal('param_scheduler', recipe.param_scheduler))
    return '\n'.join(lines) + '\n'


def base_reference(base: str, out_dir: Path) -> str:
    """``_base_`` entry for ``base``: a zoo name (``mmaction::...``) as it is, a file relative
    to ``out_dir`` (so the folder and the repository can move together)."""
    if '::' in base:
        return base
    return os.path.relpath(Path(base).resolve(), out_dir.resolve())
