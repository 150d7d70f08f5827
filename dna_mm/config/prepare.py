"""Config preparation shared by the train / test tools."""

from __future__ import annotations

import gc
import os
import os.path as osp
import re
import sys
from typing import Any, Optional

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.logging import print_log

from ..engine.distributed import (
    check_launcher,
    collective_timeout,
    init_cpu_group,
    leave_group,
    note_rank_end,
    rank_ended,
)
from ..errors import ConfigError
from ..utils.schedule import sync_schedule
from .build import merge_options, type_name
from .check.schedule import iteration_loop


def prepare_cfg(
    cfg: Config,
    config_path: str,
    launcher: str = 'none',
    work_dir: Optional[str] = None,
    cfg_options: Optional[dict] = None,
) -> Config:
    """Apply CLI overrides, pick the work dir and adapt the config to the machine.

    * first, ``launcher`` is checked against the environment
      (:func:`~dna_mm.engine.distributed.check_launcher`): ``pytorch`` / ``slurm`` / ``mpi``
      without the variables torchrun / ``srun`` / ``mpirun`` set, or no launcher in a process that
      torchrun or ``mpirun`` started as one of several, is one line naming what is missing and how
      ``tools/test.py`` (``cfg.test_only``) or ``tools/train.py`` is started;
    * ``cfg_options`` are merged last-but-one (before the device adaptation;
      :func:`~dna_mm.config.build.merge_options`: a misspelt top-level key refused); a new
      ``train_cfg.max_epochs`` / ``max_iters`` also moves what the config derived from it
      (:func:`~dna_mm.utils.schedule.sync_schedule`);
    * work dir: ``work_dir`` > the config's ``work_dir`` > ``work_dirs/<config name>`` (made by
      :func:`make_work_dir` once the run is checked);
    * without CUDA, for distributed runs: ``gloo`` instead of ``nccl``, the process group
      initialised here (mmengine's ``pytorch`` / ``slurm`` launchers would call
      ``torch.cuda.set_device``) and DDP without ``device_ids``; ``slurm``: torch's rendezvous
      variables from SLURM's (:mod:`dna_mm.engine.distributed`);
    * validation metrics logged at the iteration where the run counts iterations
      (:func:`log_metrics_by_iteration`);
    * ``env_cfg.dist_cfg.timeout``: the collective timeout in seconds, checked, the default
      (:data:`~dna_mm.engine.distributed.DEFAULT_TIMEOUT`) written where the config has none; the
      gloo group started here and mmengine's (NCCL) take it.
    """
    check_launcher(launcher, 'test.py' if cfg.get('test_only') else 'train.py')
    cfg.launcher = launcher
    if cfg_options:
        train_cfg = cfg.get('train_cfg') or {}
        old = {unit: train_cfg.get(f'max_{unit}') for unit in ('epochs', 'iters')}
        merge_options(cfg, cfg_options)
        for unit, old_max in old.items():
            if moved := sync_schedule(cfg, old_max, set(cfg_options), unit):
                print_log(
                    f'train_cfg.max_{unit} {old_max} -> {cfg.train_cfg[f"max_{unit}"]}, so '
                    f'also: {", ".join(moved)}',
                    logger='current',
                )
    limit_topk(cfg)
    log_metrics_by_iteration(cfg)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])
    if launcher != 'none' and not torch.cuda.is_available():
        env_cfg = cfg.get('env_cfg') or {}  # (Config.setdefault returns a copy for a new key)
        cfg.env_cfg = {**env_cfg, 'dist_cfg': {**(env_cfg.get('dist_cfg') or {}), 'backend': 'gloo'}}
        cfg.setdefault('model_wrapper_cfg', dict(type='MMDistributedDataParallel'))
        cfg.model_wrapper_cfg['device_ids'] = None
    init_cpu_group(launcher, collective_timeout(cfg))  # gloo without CUDA; SLURM's variables -> torch's
    return cfg


def log_metrics_by_iteration(cfg: Config) -> bool:
    """Log the validation metrics at the iteration (``default_hooks.logger.log_metric_by_epoch =
    False``) where the run counts iterations: an iteration-based train loop, or
    ``log_processor.by_epoch=False``, unless the logger says otherwise. mmengine's ``LoggerHook``
    logs them at the epoch by default, whatever the log processor counts: the training scalars at
    iterations 10, 20, ... and the metrics at epoch 1, 2 on one axis, and an iteration-based run's
    (ViTDet's) every validation at step 0 (its epoch). Returns whether it set it."""
    logger = (cfg.get('default_hooks') or {}).get('logger')
    if not isinstance(logger, dict) or 'log_metric_by_epoch' in logger:
        return False
    if iteration_loop(cfg) is None and (cfg.get('log_processor') or {}).get('by_epoch', True) is not False:
        return False
    logger['log_metric_by_epoch'] = False
    return True


def make_work_dir(path: str) -> None:
    """Make the work dir before the run is built (mmengine's runner would, once the model is
    built), and after everything else is checked (a run refused leaves no empty folder): a path
    that cannot be one is a :class:`~dna_mm.errors.ConfigError` naming it and why."""
    where = f"work dir {path} (--work-dir, or the config's work_dir)"
    if osp.exists(path) and not osp.isdir(path):
        raise ConfigError(f'{where} is a file, not a folder')
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise ConfigError(f'{where} cannot be made: {err.strerror}: {err.filename!r}') from None
    if not os.access(path, os.W_OK | os.X_OK):  # a read-only file system (or folder) that exists
        raise ConfigError(f'{where} cannot be written (a read-only folder or file system)')


def limit_topk(cfg: Config) -> list[int]:
    """Keep only the top-k accuracies with k < the number of classes in the config's
    evaluators (MMAction2's ``AccMetric``, MMPretrain's ``Accuracy``) and in the training log
    (MMAction2's heads log ``top{k}_acc`` for their ``topk``, (1, 5) by default): a 4-class
    model's top-5 is 100% by definition; top-1 always stays. Returns the ks dropped."""
    model = cfg.get('model') or {}
    head = model.get('cls_head') or model.get('head') or {}  # MMAction2's cls_head, MMPretrain's head
    num_classes = head.get('num_classes')
    if not isinstance(num_classes, int):
        return []
    dropped: set[int] = set()

    def limit(holder: dict, key: str, default: tuple[int, ...]) -> None:
        topk = holder.get(key, default)
        topk = (topk,) if isinstance(topk, int) else tuple(topk)
        kept = tuple(k for k in topk if k < num_classes or k == 1)
        if kept != topk:
            dropped.update(set(topk) - set(kept))
            holder[key] = kept

    if 'cls_head' in model and _takes_topk(head.get('type')):
        limit(head, 'topk', (1, 5))
    for key in ('val_evaluator', 'test_evaluator'):
        evaluators = cfg.get(key)
        for metric in evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]:
            if not isinstance(metric, dict):
                continue
            if type_name(metric.get('type')) == 'Accuracy':  # MMPretrain's
                limit(metric, 'topk', (1,))
            elif type_name(metric.get('type')) == 'AccMetric' and 'top_k_accuracy' in metric.get(
                'metric_list', ('top_k_accuracy',)
            ):
                options = dict(metric.get('metric_options') or {})
                option = dict(options.get('top_k_accuracy', {}))
                limit(option, 'topk', (1, 5))
                if 'topk' in option:
                    metric['metric_options'] = dict(options, top_k_accuracy=option)
    return sorted(dropped)


def _takes_topk(head_type: Any) -> bool:
    """Whether the head class ``head_type`` (a registered name, a dotted path or the class) takes
    ``topk`` (MMAction2's ``BaseHead`` and its subclasses)."""
    import inspect

    from mmaction.models.heads.base import BaseHead
    from mmaction.registry import MODELS

    cls = MODELS.get(head_type) if isinstance(head_type, str) else head_type
    return inspect.isclass(cls) and issubclass(cls, BaseHead)


def enable_tensorboard(cfg: Config) -> Config:
    """Add MMEngine's ``TensorboardVisBackend`` to the visualizer (once): scalars (loss, lr,
    metrics) are then written to ``<work_dir>/<timestamp>/vis_data`` for
    ``tensorboard --logdir <work_dir>``. The config line that does the same:
    ``visualizer = dict(vis_backends=[dict(type='LocalVisBackend'), dict(type='TensorboardVisBackend')])``.
    Without the tensorboard package, a :class:`~dna_mm.errors.ConfigError` (the user asked for
    it: one line from the tools, before any work)."""
    from importlib.util import find_spec

    if find_spec('tensorboard') is None:
        raise ConfigError(
            '--tensorboard needs the tensorboard package, which is not installed: '
            "pip install 'dna_mm[tensorboard]'"
        )
    visualizer = cfg.setdefault('visualizer', dict(type='Visualizer'))
    backends = list(visualizer.get('vis_backends') or [dict(type='LocalVisBackend')])
    if not any(type_name(b.get('type')) == 'TensorboardVisBackend' for b in backends):
        backends.append(dict(type='TensorboardVisBackend'))
    visualizer['vis_backends'] = backends
    return cfg


def skip_unreadable(cfg: Config) -> Config:
    """``tools/test.py --skip-unreadable``: ``test_cfg.skip_unreadable = True``, on
    :class:`~dna_mm.engine.test_loop.UnreadableVideosTestLoop` (dna_mm's runtime names it; a
    config naming mmengine's ``TestLoop`` gets it, with a log line saying so)."""
    test_cfg = dict(cfg.get('test_cfg') or {})
    if type_name(test_cfg.get('type', 'TestLoop')) == 'TestLoop':
        print_log(
            "--skip-unreadable: test_cfg.type 'TestLoop' -> 'UnreadableVideosTestLoop' (the loop that "
            'can skip unreadable videos)',
            logger='current',
        )
        test_cfg['type'] = 'UnreadableVideosTestLoop'
    cfg.test_cfg = dict(test_cfg, skip_unreadable=True)
    return cfg


def format_metrics(metrics: dict) -> str:
    """``acc/top{k}``, ``acc/mean1``, ``acc/mean_average_precision`` / ``acc/mmit_mean_average_precision``
    (recognition, multi-label too), ``accuracy/top{k}`` / ``multi-label/mAP`` (image classification,
    MMPretrain) and COCO's bbox / segm AP, AP50, AP75, AP_S / AP_M / AP_L (detection) → one readable
    line, every accuracy and AP in % (COCO's -1 for a size range without objects as ``n/a``); other
    metrics appended, a float to 6 significant digits."""
    topk = sorted({int(m[1]) for key in metrics if (m := re.fullmatch(r'(?:acc|accuracy)/top(\d+)', key))})
    names = {f'acc/top{k}': f'top-{k}' for k in topk} | {'acc/mean1': 'mCA'}
    names |= {'acc/mean_average_precision': 'mAP', 'acc/mmit_mean_average_precision': 'mmit mAP'}
    names |= {f'accuracy/top{k}': f'top-{k}' for k in topk}  # MMPretrain's Accuracy (in %)
    names |= {'multi-label/mAP': 'mAP'}  # MMPretrain's AveragePrecision (in %)
    for task in ('bbox', 'segm'):  # MMDetection's CocoMetric
        for sfx, label in (('', ''), ('_50', '50'), ('_75', '75'), ('_s', '_S'), ('_m', '_M'), ('_l', '_L')):
            names[f'coco/{task}_mAP{sfx}'] = f'{task} AP{label}'
    percent = {k for k in names if k.startswith(('accuracy/', 'multi-label/'))}  # in %, not a fraction

    def shown(key: str) -> str:
        value = metrics[key]
        return 'n/a' if value < 0 else f'{value if key in percent else 100 * value:.2f}'

    parts = [f'{label}: {shown(key)}' for key, label in names.items() if key in metrics]
    parts += [
        f'{k}: {v:.6g}' if isinstance(v, float) else f'{k}: {v}' for k, v in metrics.items() if k not in names
    ]
    return 'Test results: ' + '  '.join(parts)


def shutdown_distributed() -> None:
    """Leave the default process group, if any (:func:`~dna_mm.engine.distributed.leave_group`):
    once every rank is done (a barrier, bounded by the collective timeout), or at once on a rank
    that ends on an error, whose peers may be gone or in another collective: an exception in
    flight (call it in a ``finally``; it is noted for the peers,
    :func:`~dna_mm.engine.distributed.note_rank_end`) or a note already made. Never raises for a
    peer that is gone.

    mmengine leaves it to interpreter exit, where gloo's threads can abort the process
    ("terminate called without an active exception") after a successful run. The run's objects
    that still hold the group (a DDP model's reducer, in the reference cycles of a runner) are
    collected before it is left, not in the interpreter's final collection.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    failed = sys.exc_info()[1]
    if failed is not None:
        note_rank_end(f'{type(failed).__name__}: {failed}')
    if not rank_ended():
        try:
            dist.barrier()
        except RuntimeError:  # a peer gone at the very end: this rank's work is done
            pass
    gc.collect()  # the run's objects that hold the group (a DDP model's reducer) go while it lives
    leave_group()
