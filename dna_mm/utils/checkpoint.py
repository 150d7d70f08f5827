"""Safe checkpoint loading for torch >= 2.6 (``weights_only=True``, never switched off).

mmengine 0.10.7 pickles a few non-tensor objects into its checkpoints (the message hub's
``HistoryBuffer`` log history, numpy scalars/arrays in it, and ``HistoryBuffer``'s statistics
methods, which pickle stores as ``getattr(HistoryBuffer, 'min')``). :func:`allow_mmengine_globals`
allow-lists exactly those with :func:`torch.serialization.add_safe_globals`; ``getattr`` is
*not* allowed: the name resolves to :func:`restricted_getattr`, which serves only those
``HistoryBuffer`` methods (a free ``getattr`` would let a pickle reach arbitrary code). And
:func:`load_checkpoint_file` replaces mmengine's local-file loader so that every load made
through mmengine (``Runner.resume``, ``load_checkpoint``, ``init_cfg=Pretrained``) is a
``weights_only`` load that

* refuses a pickle that references anything else (an arbitrary callable, say) with an
  :class:`UnsafeCheckpointError` naming the file and the global, and
* also reads ``.safetensors`` files.
"""
from __future__ import annotations

import os.path as osp
import pickle
import re
from typing import Any, Optional

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint's pickle references a global that is not allow-listed."""


def _numpy_globals() -> list[Any]:
    """numpy objects that mmengine's log history stores (scalars, arrays, dtypes)."""
    if np.lib.NumpyVersion(np.__version__) >= '2.0.0':
        from numpy._core import multiarray
    else:
        from numpy.core import multiarray
    dtype_classes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith('DType')]
    return [multiarray._reconstruct, multiarray.scalar, np.ndarray, np.dtype,
            *dtype_classes]


def restricted_getattr(obj: Any, name: str) -> Any:
    """``getattr`` as seen by a ``weights_only`` unpickler: only ``HistoryBuffer``'s statistics
    methods (``min``, ``max``, ``current``, ``mean``) can be fetched."""
    if obj is HistoryBuffer and name in HISTORY_BUFFER_METHODS:
        return getattr(obj, name)
    raise UnsafeCheckpointError(f'checkpoint pickle asks for getattr({obj!r}, {name!r}); only '
                                f'HistoryBuffer.{{{", ".join(HISTORY_BUFFER_METHODS)}}} are allowed')


HISTORY_BUFFER_METHODS = ('min', 'max', 'current', 'mean')
MMENGINE_SAFE_GLOBALS: list[Any] = [
    HistoryBuffer, *_numpy_globals(),
    (restricted_getattr, 'builtins.getattr'), (restricted_getattr, '__builtin__.getattr'),
]


def allow_mmengine_globals() -> None:
    """Allow-list the globals of mmengine checkpoints for ``weights_only`` loads (idempotent)."""
    torch.serialization.add_safe_globals(MMENGINE_SAFE_GLOBALS)


def load_checkpoint_file(filename: str, map_location: Optional[Any] = None) -> Any:
    """Load a local ``.pth`` (``weights_only=True``) or ``.safetensors`` checkpoint.

    Raises:
        FileNotFoundError: ``filename`` does not exist.
        UnsafeCheckpointError: the pickle references a global that is not allow-listed.
    """
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint {filename} can not be found')
    if filename.endswith('.safetensors'):
        from safetensors.torch import load_file
        device = map_location if isinstance(map_location, (str, torch.device)) else 'cpu'
        return load_file(filename, device=str(device))
    try:
        return torch.load(filename, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r'(?:GLOBAL|global) ([\w.]+(?: ?[\w.]+)?)', str(err))
        what = found.group(1) if found else 'a global that is not allow-listed'
        raise UnsafeCheckpointError(
            f'refused to load checkpoint {filename}: its pickle references {what}, which is '
            f'not an allow-listed type. dna_mm loads checkpoints with weights_only=True so '
            f'that a file cannot run code on load; if you trust the file and the type is '
            f'plain data, add it with torch.serialization.add_safe_globals([...]).') from err


def install() -> None:
    """Allow-list mmengine's globals and route mmengine's local loads through
    :func:`load_checkpoint_file`."""
    allow_mmengine_globals()
    CheckpointLoader.register_scheme(prefixes='', loader=load_checkpoint_file, force=True)
