"""The unpickling policy: what a checkpoint may contain, and the errors that name a refused file.

Inside :func:`weights_only_loads` every ``torch.load`` is a ``weights_only=True`` load, whatever
its caller passes (torch honours ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` at each call, also inside
``torch.hub.load_state_dict_from_url``), and the unpickler accepts, besides tensors and plain
containers, only :data:`ALLOWED_GLOBALS`:

* mmengine's ``HistoryBuffer`` and the numpy arrays / scalars / dtypes of its log history
  (mmengine 0.10.7 pickles its message hub into every checkpoint: ``--resume`` needs them);
* pickle's ``getattr`` as :func:`restricted_getattr`, which serves only ``HistoryBuffer``'s
  statistics methods (pickle stores ``HistoryBuffer.min`` as ``getattr(HistoryBuffer, 'min')``;
  a free ``getattr`` would let a pickle reach arbitrary code);
* ``argparse.Namespace``: training scripts built on argparse save their arguments with the
  weights (the authors' ImageNet ``vit/main.py``, DeiT, timm's ``train.py``). Unpickling one only
  sets attributes on an empty ``Namespace``; what they hold is checked by the same rules.

The allow-list is in force only inside the block: nothing is added to torch's process-wide list.
A load that fails is explained by :func:`explain_load_error`: a refused global is an
:class:`UnsafeCheckpointError` naming the file and the global; a file that is not a PyTorch file
a :class:`NotACheckpointError`; one cut short or damaged a :class:`CorruptCheckpointError`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import re
import threading
import traceback
from typing import IO, Any, Iterator, Optional, Union

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer

from ..errors import CorruptCheckpointError, NotACheckpointError, UnsafeCheckpointError

HISTORY_BUFFER_METHODS = ('min', 'max', 'current', 'mean')


def restricted_getattr(obj: Any, name: str) -> Any:
    """``getattr`` as seen by the unpickler: only ``HistoryBuffer``'s statistics methods
    (``min``, ``max``, ``current``, ``mean``) can be fetched."""
    if obj is HistoryBuffer and name in HISTORY_BUFFER_METHODS:
        return getattr(obj, name)
    raise UnsafeCheckpointError(
        f'checkpoint pickle asks for getattr({obj!r}, {name!r}); only '
        f'HistoryBuffer.{{{", ".join(HISTORY_BUFFER_METHODS)}}} are allowed'
    )


def _numpy_globals() -> list[Any]:
    """numpy objects that mmengine's log history stores (scalars, arrays, dtypes). A pickle names
    ``_reconstruct`` and ``scalar`` by the module of the numpy that wrote it
    (``numpy.core.multiarray`` in 1.x, ``numpy._core.multiarray`` in 2.x): both names are
    allowed, so a checkpoint loads under either major."""
    if np.lib.NumpyVersion(np.__version__) >= '2.0.0':
        from numpy._core import multiarray
    else:
        from numpy.core import multiarray
    dtype_classes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith('DType')]
    by_name = [
        (getattr(multiarray, name), f'{module}.{name}')
        for name in ('_reconstruct', 'scalar')
        for module in ('numpy.core.multiarray', 'numpy._core.multiarray')
    ]
    return [*by_name, np.ndarray, np.dtype, *dtype_classes]


ALLOWED_GLOBALS: list[Any] = [
    HistoryBuffer,
    *_numpy_globals(),
    (restricted_getattr, 'builtins.getattr'),
    (restricted_getattr, '__builtin__.getattr'),  # protocol 2, as torch.save writes
    argparse.Namespace,
]
FORCE_WEIGHTS_ONLY = 'TORCH_FORCE_WEIGHTS_ONLY_LOAD'
_LOCK = threading.RLock()  # the block changes process state: one thread at a time


@contextlib.contextmanager
def weights_only_loads() -> Iterator[None]:
    """Every ``torch.load`` in the block is ``weights_only=True`` with :data:`ALLOWED_GLOBALS`;
    the environment and torch's allow-list are restored on exit (nesting allowed)."""
    with _LOCK:
        saved_env = os.environ.get(FORCE_WEIGHTS_ONLY)
        saved_globals = torch.serialization.get_safe_globals()
        os.environ[FORCE_WEIGHTS_ONLY] = '1'
        torch.serialization.add_safe_globals(ALLOWED_GLOBALS)
        try:
            yield
        finally:
            torch.serialization.clear_safe_globals()
            torch.serialization.add_safe_globals(saved_globals)
            if saved_env is None:
                del os.environ[FORCE_WEIGHTS_ONLY]
            else:
                os.environ[FORCE_WEIGHTS_ONLY] = saved_env


# What torch's weights_only unpickler says when it refuses something -> the refused object.
_REFUSAL_PATTERNS = (
    r'GLOBAL (\S+) was not an allowed global',
    r'unsupported GLOBAL (\S+) whose module',
    r'call reduce for unrecognized function (.+?)(?: which belongs to .*)?$',
    r'allowlisted via `add_safe_globals` but got (.+)$',
    r'(getattr\(.+?\))',
)
ZIP_MAGIC = b'PK\x03\x04'  # torch.save's default format (a zip archive)
PICKLE_PROTO = b'\x80'  # the legacy format: a pickle, protocol 2 (PROTO opcode first)


def _head(f: Union[str, os.PathLike, IO[bytes]]) -> Optional[bytes]:
    """The first 8 bytes of a path or a seekable file object (position kept); ``None`` when
    it is gone (a temporary download, a closed buffer)."""
    try:
        if isinstance(f, (str, os.PathLike)):
            with open(f, 'rb') as opened:
                return opened.read(8)
        pos = f.tell()
        head = f.read(8)
        f.seek(pos)
        return head
    except (OSError, ValueError, AttributeError):
        return None


def explain_load_error(err: Exception, source: str) -> Optional[Exception]:
    """The dna_mm error for ``err``, raised by ``torch.load`` while reading ``source`` (a path,
    URL or mmengine prefix), naming the file; ``None`` when ``torch.load`` did not raise it (a
    missing file, a failed download, an unknown model name: let it propagate)."""
    url = read = None  # from the traceback: the URL torch.hub fetched, the file torch.load read
    for frame, _ in traceback.walk_tb(err.__traceback__):
        if frame.f_code is torch.hub.load_state_dict_from_url.__code__:
            url = frame.f_locals.get('url')
        elif frame.f_code is torch.serialization.load.__code__:
            read = frame.f_locals.get('f')
    if read is None:
        return None
    if url:
        name = f'{url} (cached as {read})' if isinstance(read, str) else url
    else:
        name = f'{source} ({read})' if isinstance(read, str) and read != source else source
    head = _head(read)
    if head is not None and not head.startswith((ZIP_MAGIC, PICKLE_PROTO)):
        what = 'is empty (0 bytes)' if not head else f'starts with {head!r}'
        return NotACheckpointError(
            f'checkpoint {name} is not a PyTorch file: it {what}, while torch.save writes a zip '
            f'archive (PK...) or a pickle (\\x80...). Is it a text file, a download error page or '
            f'a different format?'
        )
    text = str(err)
    what = None  # the global torch refused
    if isinstance(err, pickle.UnpicklingError):
        matches = (re.search(p, text, re.MULTILINE) for p in _REFUSAL_PATTERNS)
        what = next((m.group(1).strip() for m in matches if m), None)
    truncated = isinstance(err, EOFError) or 'truncated' in text or 'EOF' in text
    if isinstance(err, pickle.UnpicklingError) and (what or not truncated):
        found = f'the global {what}' if what else 'an object that is not plain data'
        return UnsafeCheckpointError(
            f'refused to load checkpoint {name}: its pickle refers to {found}, which is not on '
            f'the allow-list (tensors, plain containers, mmengine log history, '
            f'argparse.Namespace). dna_mm loads checkpoints with weights_only=True so that a '
            f'file cannot run code on load. Only if you made the file yourself and that global '
            f'is a plain data type (never a function), allow-list it with '
            f'torch.serialization.add_safe_globals([...]).'
        )
    reason = text.split('. ')[0].strip() or type(err).__name__
    return CorruptCheckpointError(
        f'checkpoint {name} is a PyTorch file but cannot be read: it is truncated or damaged '
        f'({type(err).__name__}: {reason}). Download or copy it again.'
    )
