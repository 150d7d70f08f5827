"""Process groups for ``--launcher pytorch`` / ``slurm`` where mmengine's own start needs a GPU.

mmengine's launchers call ``torch.cuda.set_device``, so without CUDA :func:`init_cpu_group`
starts the gloo group itself (mmengine's runner then finds it initialised). For SLURM,
:func:`slurm_environment` turns SLURM's variables into torch's on every machine: ``RANK`` =
``SLURM_PROCID``, ``WORLD_SIZE`` = ``SLURM_NTASKS``, ``LOCAL_RANK`` = ``SLURM_LOCALID``,
``MASTER_ADDR`` = the first host of ``SLURM_NODELIST`` (:func:`first_host`: read from the
list, without ``scontrol``; a ``MASTER_ADDR`` already set wins), ``MASTER_PORT`` (default 29500).
"""

from __future__ import annotations

import os
import re

import torch
import torch.distributed as dist
from mmengine.logging import print_log

from ..errors import ConfigError

#: one entry of a SLURM host list: a prefix and an optional bracketed range list (``gpu[01-04,07]``)
_HOST = re.compile(r'([^,\[]+)(?:\[([^\]]+)\])?')
SLURM_REQUIRED = ('SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_NODELIST')


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list: ``'gpu[07-08,11],cpu01'`` → ``'gpu07'``,
    ``'node1,node2'`` → ``'node1'``, ``'host'`` → ``'host'`` (zero padding kept)."""
    m = _HOST.match(nodelist.strip())
    if not m:
        raise ConfigError(f'SLURM_NODELIST={nodelist!r}: not a SLURM host list')
    prefix, ranges = m.groups()
    if not ranges:
        return prefix
    return prefix + ranges.split(',')[0].split('-')[0]


def slurm_environment(environ: os._Environ | dict | None = None) -> dict[str, str]:
    """Set torch's rendezvous variables from SLURM's in ``environ`` (default ``os.environ``)
    and return them; a ``ConfigError`` naming the missing SLURM variables (not inside a SLURM
    job step: run through ``srun``)."""
    env = os.environ if environ is None else environ
    missing = [k for k in SLURM_REQUIRED if k not in env]
    if missing:
        raise ConfigError(
            f'--launcher slurm: {", ".join(missing)} not set; start the tool with srun (tools/slurm_train.sh)'
        )
    values = {
        'RANK': env['SLURM_PROCID'],
        'WORLD_SIZE': env['SLURM_NTASKS'],
        'LOCAL_RANK': env.get('SLURM_LOCALID', '0'),
        'MASTER_ADDR': env.get('MASTER_ADDR') or first_host(env['SLURM_NODELIST']),
        'MASTER_PORT': env.get('MASTER_PORT', '29500'),
    }
    env.update(values)
    return values


def init_cpu_group(launcher: str) -> None:
    """Without CUDA: the gloo process group from torch's (``pytorch``) or SLURM's (``slurm``)
    environment, unless one exists; with CUDA, ``slurm`` only sets the environment and mmengine
    starts the group (nccl) on ``LOCAL_RANK``'s GPU."""
    if launcher == 'slurm':
        slurm_environment()
    if torch.cuda.is_available() or launcher not in ('pytorch', 'slurm') or dist.is_initialized():
        return
    dist.init_process_group('gloo')  # env:// (torchrun / the SLURM variables above)
    print_log(
        f'no CUDA: gloo process group, rank {dist.get_rank()} of {dist.get_world_size()}', logger='current'
    )


def start_distributed(launcher: str) -> tuple[int, int, str]:
    """``(rank, world size, device)`` for a tool that is not a runner (feature extraction):
    ``'none'``: ``(0, 1, 'cuda:0' or 'cpu')``; else the process group (mmengine's launcher on
    CUDA, :func:`init_cpu_group` without) and this process's GPU (``LOCAL_RANK``)."""
    if launcher == 'none':
        return 0, 1, 'cuda:0' if torch.cuda.is_available() else 'cpu'
    if torch.cuda.is_available():
        from mmengine.dist import init_dist

        if launcher == 'slurm':
            slurm_environment()
        if not dist.is_initialized():
            init_dist(launcher)
        device = f'cuda:{torch.cuda.current_device()}'
    else:
        init_cpu_group(launcher)
        device = 'cpu'
    return dist.get_rank(), dist.get_world_size(), device
