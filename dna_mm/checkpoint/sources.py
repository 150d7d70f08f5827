"""How a file name, URL or mmengine prefix becomes a checkpoint: mmengine's own loaders, each
run as a ``weights_only`` load.

mmengine 0.10.7's URL loader turns torch's ``weights_only`` off, and ``torchvision://``,
``modelzoo://``, ``open-mmlab://`` and ``mmcls://`` go through it: a checkpoint named by a URL
(MMAction2's own base configs have such URLs) could run code on load. :func:`install`
therefore registers, for each scheme mmengine's ``CheckpointLoader`` knows, mmengine's own
loader wrapped by :func:`weights_only` (download, cache, distributed barrier and model tables
stay mmengine's). A scheme dna_mm has not checked (an mmengine newer than tested) gets a
warning and a loader that refuses. ``DNA_MM_NO_SAFE_LOADING=1`` before ``import dna_mm``
leaves mmengine's loaders as they are; :func:`read_checkpoint`, dna_mm's own route, stays
``weights_only`` either way.
"""

from __future__ import annotations

import functools
import logging
import os
import os.path as osp
from typing import Any, Callable, Optional

import torch
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

from ..errors import CorruptCheckpointError, UnsafeCheckpointError
from .policy import explain_load_error, weights_only_loads

#: the prefixes mmengine 0.10.7 registers, each checked to end in ``torch.load``
CHECKED_SCHEMES = (
    '',
    'http://',
    'https://',
    'torchvision://',
    'modelzoo://',
    'open-mmlab://',
    'openmmlab://',
    'mmcls://',
    'pavi://',
    r'(\S+\:)?s3://',
    r'(\S+\:)?petrel://',
)


def weights_only(loader: Callable[..., Any]) -> Callable[..., Any]:
    """``loader`` (an mmengine checkpoint loader, ``(filename, map_location, ...)``) run
    inside :func:`~.policy.weights_only_loads`, its reading errors explained
    (:func:`~.policy.explain_load_error`); a local ``.safetensors`` file is read by
    safetensors."""
    if getattr(loader, 'dna_mm_weights_only', False):
        return loader

    @functools.wraps(loader)  # keeps __name__: mmengine logs "Loads checkpoint by <name> backend"
    def load(filename: str, map_location: Optional[Any] = None, *args: Any, **kwargs: Any) -> Any:
        if filename.endswith('.safetensors') and osp.isfile(filename):
            from safetensors import SafetensorError
            from safetensors.torch import load_file

            device = str(map_location) if isinstance(map_location, (str, torch.device)) else 'cpu'
            try:
                return load_file(filename, device=device)
            except SafetensorError as err:
                raise CorruptCheckpointError(
                    f'checkpoint {filename} cannot be read as a safetensors file: {err}'
                ) from None
        with weights_only_loads():
            try:
                return loader(filename, map_location, *args, **kwargs)
            except Exception as err:
                explained = explain_load_error(err, filename)
                if explained is None:
                    raise
                raise explained from None

    load.dna_mm_weights_only = True
    return load


def _refusing_loader(prefix: str) -> Callable[..., Any]:
    def load_unchecked_scheme(filename: str, map_location: Optional[Any] = None) -> Any:
        raise UnsafeCheckpointError(
            f'{filename}: mmengine loads {prefix!r} checkpoints with a loader dna_mm has not checked '
            f'(a newer mmengine than tested); download the file and give its local path'
        )

    load_unchecked_scheme.dna_mm_weights_only = True
    return load_unchecked_scheme


def install() -> None:
    """Register every mmengine scheme's loader wrapped by :func:`weights_only`, and a refusing
    loader (with a warning) for a scheme not in :data:`CHECKED_SCHEMES` (idempotent; nothing
    when ``DNA_MM_NO_SAFE_LOADING=1``)."""
    if os.environ.get('DNA_MM_NO_SAFE_LOADING') == '1':
        return
    schemes = CheckpointLoader._schemes
    todo = {p: f for p, f in schemes.items() if not getattr(f, 'dna_mm_weights_only', False)}
    unchecked = sorted(p for p in todo if p not in CHECKED_SCHEMES)
    if unchecked:
        print_log(
            f'dna_mm: mmengine registers checkpoint schemes dna_mm has not checked: {unchecked}; '
            f'loading from them is refused',
            logger='current',
            level=logging.WARNING,
        )
    for prefix, loader in todo.items():
        safe = weights_only(loader) if prefix in CHECKED_SCHEMES else _refusing_loader(prefix)
        CheckpointLoader.register_scheme(prefixes=prefix, loader=safe, force=True)


_read = weights_only(CheckpointLoader.load_checkpoint)


def read_checkpoint(source: str, map_location: Optional[Any] = 'cpu') -> Any:
    """The contents of a checkpoint given by a local path, URL or mmengine prefix
    (``open-mmlab://...``): mmengine's loader for it, always a ``weights_only`` load (refusals
    and unreadable files: :mod:`~dna_mm.checkpoint.policy`)."""
    if '://' not in source and not osp.isfile(osp.expanduser(source)):
        raise FileNotFoundError(f'checkpoint {source} does not exist')
    return _read(source, map_location)
