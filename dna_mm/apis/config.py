"""Config preparation shared by the train / test tools."""
from __future__ import annotations

import os.path as osp
from typing import Optional

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.logging import print_log


def prepare_cfg(cfg: Config, config_path: str, launcher: str = 'none',
                work_dir: Optional[str] = None, cfg_options: Optional[dict] = None) -> Config:
    """Apply CLI overrides, pick the work dir and adapt the config to the machine.

    * ``cfg_options`` are merged last-but-one (before the device adaptation);
    * work dir: ``work_dir`` > the config's ``work_dir`` > ``work_dirs/<config name>``;
    * without CUDA, for distributed runs: ``gloo`` instead of ``nccl``, the process group
      initialised here (mmengine's ``pytorch`` launcher would call ``torch.cuda.set_device``)
      and DDP without ``device_ids``.
    """
    cfg.launcher = launcher
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])
    if launcher != 'none' and not torch.cuda.is_available():
        dist_cfg = cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})
        dist_cfg['backend'] = 'gloo'
        cfg.setdefault('model_wrapper_cfg', dict(type='MMDistributedDataParallel'))
        cfg.model_wrapper_cfg['device_ids'] = None
        if launcher == 'pytorch' and not dist.is_initialized():
            dist.init_process_group('gloo')  # env:// (torchrun)
            print_log(f'no CUDA: gloo process group, rank {dist.get_rank()} of '
                      f'{dist.get_world_size()}', logger='current')
    return cfg


def format_metrics(metrics: dict) -> str:
    """``acc/top1``, ``acc/top5``, ``acc/mean1`` → one readable line (others appended)."""
    names = {'acc/top1': 'top-1', 'acc/top5': 'top-5', 'acc/mean1': 'mCA'}
    parts = [f'{label}: {100 * metrics[key]:.2f}' for key, label in names.items() if key in metrics]
    parts += [f'{k}: {v}' for k, v in metrics.items() if k not in names]
    return 'Test results: ' + '  '.join(parts)


def shutdown_distributed() -> None:
    """Destroy the default process group, if any, once every rank is done.

    mmengine leaves it to interpreter exit, where gloo's threads can abort the process
    ("terminate called without an active exception") after a successful run.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
