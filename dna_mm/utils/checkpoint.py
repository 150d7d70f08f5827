"""Safe checkpoint loading: every way mmengine reads a checkpoint is a ``weights_only`` load.

torch >= 2.6 loads local files with ``weights_only=True``, but mmengine 0.10.7's URL loader
(``load_from_http`` → ``torch.hub.load_state_dict_from_url``) passes ``weights_only=False``,
and ``torchvision://``, ``open-mmlab://``, ``mmcls://`` and ``modelzoo://`` all go through it:
a checkpoint given by URL — including the https URLs in MMAction2's own base configs — could
run arbitrary code on load. :func:`install` therefore registers a dna_mm loader for **every**
prefix mmengine's :class:`~mmengine.runner.checkpoint.CheckpointLoader` knows (and patches the
module-level names, for code that calls mmengine's loaders directly). Each one ends in
:func:`safe_torch_load`:

* ``torch.load(..., weights_only=True)``, never switched off;
* a pickle that references anything but tensors, plain containers, the globals of
  mmengine checkpoints and ``argparse.Namespace`` is refused with an
  :class:`UnsafeCheckpointError` that names the file (and, for a download, the URL) and the
  refused global;
* a file that is not a checkpoint at all (a text file, random bytes, an empty file) is a
  :class:`NotACheckpointError`, a PyTorch file that is cut short or damaged a
  :class:`CorruptCheckpointError` (both :class:`UnreadableCheckpointError`, never reported as
  unsafe);
* ``.safetensors`` files are read with ``safetensors``.

mmengine 0.10.7 pickles a few non-tensor objects into its checkpoints (the message hub's
``HistoryBuffer`` log history, numpy scalars/arrays in it, and ``HistoryBuffer``'s statistics
methods, which pickle stores as ``getattr(HistoryBuffer, 'min')``). :func:`allow_mmengine_globals`
allow-lists exactly those with :func:`torch.serialization.add_safe_globals`; ``getattr`` is
*not* allowed: the name resolves to :func:`restricted_getattr`, which serves only those
``HistoryBuffer`` methods (a free ``getattr`` would let a pickle reach arbitrary code).
``argparse.Namespace`` is allowed too: training scripts built on argparse save their
arguments with the weights (the authors' ImageNet ``vit/main.py``, DeiT, timm's ``train.py``).
Unpickling one only sets attributes on an empty ``Namespace``; whatever the attributes hold is
checked by the same rules (a callable inside is still refused).

Downloads are cached like mmengine's (``torch.hub.get_dir()/checkpoints/<basename>``); in a
distributed run local rank 0 downloads first.

Whole-model loads (``load_from``, resume, ``tools/test.py``) are compared key by key with
:func:`compare_state_dict`; :class:`CheckpointMismatchError` lists what does not match
(used by :class:`dna_mm.apis.DnARunner`).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import os.path as osp
import pickle
import re
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Optional, Union
from urllib.parse import urlparse

import numpy as np
import torch
from mmengine.dist import barrier, get_dist_info
from mmengine.logging import print_log
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.runner import checkpoint as mm_checkpoint
from mmengine.runner.checkpoint import CheckpointLoader
from torch import nn


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint's pickle references a global that is not allow-listed."""


class CheckpointMismatchError(RuntimeError):
    """A whole-model checkpoint does not match the model (missing / unexpected / resized keys)."""


class UnreadableCheckpointError(ValueError):
    """A checkpoint file that cannot be read (base of the two cases below)."""


class NotACheckpointError(UnreadableCheckpointError):
    """The file is not a PyTorch checkpoint: neither ``torch.save``'s zip format nor its
    older pickle format (a text file, random bytes, an empty file)."""


class CorruptCheckpointError(UnreadableCheckpointError):
    """A PyTorch (or safetensors) file that is truncated or damaged."""


def _numpy_globals() -> list[Any]:
    """numpy objects that mmengine's log history stores (scalars, arrays, dtypes)."""
    if np.lib.NumpyVersion(np.__version__) >= '2.0.0':
        from numpy._core import multiarray
    else:
        from numpy.core import multiarray
    dtype_classes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith('DType')]
    return [multiarray._reconstruct, multiarray.scalar, np.ndarray, np.dtype, *dtype_classes]


def restricted_getattr(obj: Any, name: str) -> Any:
    """``getattr`` as seen by a ``weights_only`` unpickler: only ``HistoryBuffer``'s statistics
    methods (``min``, ``max``, ``current``, ``mean``) can be fetched."""
    if obj is HistoryBuffer and name in HISTORY_BUFFER_METHODS:
        return getattr(obj, name)
    raise UnsafeCheckpointError(
        f'checkpoint pickle asks for getattr({obj!r}, {name!r}); only '
        f'HistoryBuffer.{{{", ".join(HISTORY_BUFFER_METHODS)}}} are allowed'
    )


HISTORY_BUFFER_METHODS = ('min', 'max', 'current', 'mean')
MMENGINE_SAFE_GLOBALS: list[Any] = [
    HistoryBuffer,
    *_numpy_globals(),
    (restricted_getattr, 'builtins.getattr'),
    (restricted_getattr, '__builtin__.getattr'),
]
#: training-script arguments saved beside the weights (the authors' ``vit/main.py``: ``'args'``)
SCRIPT_SAFE_GLOBALS: list[Any] = [argparse.Namespace]

# What torch's weights_only unpickler says when it refuses something -> the refused object.
_REFUSAL_PATTERNS = (
    r'GLOBAL (\S+) was not an allowed global',
    r'unsupported GLOBAL (\S+) whose module',
    r'call reduce for unrecognized function (.+?)(?: which belongs to .*)?$',
    r'allowlisted via `add_safe_globals` but got (.+)$',
    r'(getattr\(.+?\))',
)


def allow_mmengine_globals() -> None:
    """Allow-list the globals of mmengine checkpoints and ``argparse.Namespace`` for
    ``weights_only`` loads (idempotent)."""
    torch.serialization.add_safe_globals([*MMENGINE_SAFE_GLOBALS, *SCRIPT_SAFE_GLOBALS])


def refused_global(message: str) -> Optional[str]:
    """The global (or callable) named in torch's ``weights_only`` refusal ``message``, if any."""
    for pattern in _REFUSAL_PATTERNS:
        for line in message.splitlines():
            found = re.search(pattern, line)
            if found:
                return found.group(1).strip()
    return None


ZIP_MAGIC = b'PK\x03\x04'  # torch.save's default format (a zip archive)
PICKLE_PROTO = b'\x80'  # the legacy format: a pickle, protocol 2 (PROTO opcode first)


def _head(source: Union[str, IO[bytes]], size: int = 8) -> bytes:
    """The first ``size`` bytes of a path or a seekable file object (its position kept)."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, 'rb') as f:
            return f.read(size)
    pos = source.tell()
    head = source.read(size)
    source.seek(pos)
    return head


def check_checkpoint_format(source: Union[str, IO[bytes]], name: str) -> str:
    """``'zip'`` or ``'pickle'``: the format ``torch.save`` wrote ``source`` in.

    Raises:
        NotACheckpointError: ``source`` starts with neither (naming ``name`` and its first bytes).
    """
    head = _head(source)
    if head.startswith(ZIP_MAGIC):
        return 'zip'
    if head.startswith(PICKLE_PROTO):
        return 'pickle'
    what = 'is empty (0 bytes)' if not head else f'starts with {head!r}'
    raise NotACheckpointError(
        f'checkpoint {name} is not a PyTorch file: it {what}, while torch.save writes a zip '
        f'archive (PK...) or a pickle (\\x80...). Is it a text file, a download error page or '
        f'a different format?'
    )


# what torch.load raises on a truncated / damaged file (besides UnpicklingError)
READ_ERRORS = (
    RuntimeError,
    OSError,
    EOFError,
    ValueError,
    KeyError,
    IndexError,
    struct.error,
    zipfile.BadZipFile,
)


def _is_truncation(err: Exception) -> bool:
    text = str(err)
    return isinstance(err, EOFError) or 'truncated' in text or 'EOF' in text


def safe_torch_load(
    source: Union[str, IO[bytes]], map_location: Optional[Any] = None, name: Optional[str] = None
) -> Any:
    """``torch.load(source, weights_only=True)`` with errors that name the file and the cause.

    Args:
        source: A local path or a binary file object.
        map_location: As for :func:`torch.load`.
        name: How to call the checkpoint in messages (default: ``source`` when a path).

    Raises:
        UnsafeCheckpointError: the pickle references a global that is not allow-listed.
        NotACheckpointError: ``source`` is not a PyTorch file at all.
        CorruptCheckpointError: a PyTorch file that is truncated or damaged.
    """
    name = name or (str(source) if isinstance(source, (str, os.PathLike)) else '<in-memory checkpoint>')
    kind = check_checkpoint_format(source, name)
    # again on every load: a torch.serialization.safe_globals(...) block elsewhere (timm's
    # loader uses one for argparse.Namespace) removes its globals on exit, ours included
    allow_mmengine_globals()
    try:
        return torch.load(source, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        what = refused_global(str(err))
        if what is None and kind == 'pickle' and _is_truncation(err):
            raise _corrupt(name, err) from None
        found = f'the global {what}' if what else 'an object that is not plain data'
        raise UnsafeCheckpointError(
            f'refused to load checkpoint {name}: its pickle refers to {found}, which is not on '
            f'the allow-list (tensors, plain containers, mmengine log history, '
            f'argparse.Namespace). dna_mm loads checkpoints with weights_only=True so that a '
            f'file cannot run code on load. Only if you made the file yourself and that global '
            f'is a plain data type (never a function), allow-list it with '
            f'torch.serialization.add_safe_globals([...]).'
        ) from None
    except READ_ERRORS as err:
        raise _corrupt(name, err) from None


def _corrupt(name: str, err: Exception) -> CorruptCheckpointError:
    reason = str(err).split('. ')[0].strip() or type(err).__name__
    return CorruptCheckpointError(
        f'checkpoint {name} is a PyTorch file but cannot be read: it is truncated or damaged '
        f'({type(err).__name__}: {reason}). Download or copy it again.'
    )


def load_checkpoint_file(
    filename: str, map_location: Optional[Any] = None, name: Optional[str] = None
) -> Any:
    """Load a local ``.pth`` (``weights_only=True``) or ``.safetensors`` checkpoint.

    Args:
        filename: Local path (``~`` expanded).
        map_location: As for :func:`torch.load`.
        name: How to call the checkpoint in messages (default: ``filename``).

    Raises:
        FileNotFoundError: ``filename`` does not exist.
        UnsafeCheckpointError: the pickle references a global that is not allow-listed.
        NotACheckpointError, CorruptCheckpointError: the file cannot be read as a checkpoint.
    """
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'checkpoint {name or filename} can not be found')
    if filename.endswith('.safetensors'):
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        device = map_location if isinstance(map_location, (str, torch.device)) else 'cpu'
        try:
            return load_file(filename, device=str(device))
        except SafetensorError as err:
            raise CorruptCheckpointError(
                f'checkpoint {name or filename} cannot be read as a safetensors file: {err}'
            ) from None
    return safe_torch_load(filename, map_location, name or filename)


def download_checkpoint(url: str, model_dir: Optional[str] = None) -> str:
    """Download ``url`` into the torch hub cache (once; local rank 0 first) and return the path.

    The cache is ``model_dir`` or ``torch.hub.get_dir()/checkpoints`` and the file keeps the
    URL's base name, as in mmengine / ``torch.hub.load_state_dict_from_url``.
    """
    model_dir = model_dir or osp.join(torch.hub.get_dir(), 'checkpoints')
    basename = osp.basename(urlparse(url).path)
    if not basename:
        raise ValueError(f'checkpoint URL {url} does not end in a file name')
    cached = osp.join(model_dir, basename)
    rank, world_size = get_dist_info()

    def fetch() -> None:
        if not osp.exists(cached):
            os.makedirs(model_dir, exist_ok=True)
            print_log(f'downloading {url} to {cached}', logger='current')
            torch.hub.download_url_to_file(url, cached, progress=False)

    if rank == 0:
        fetch()
    if world_size > 1:
        barrier()
        if rank > 0:
            fetch()  # other machines (on rank 0's machine the file is there now)
    return cached


def load_from_local(filename: str, map_location: Optional[Any] = None) -> Any:
    """mmengine scheme ``''`` (local paths): :func:`load_checkpoint_file`."""
    return load_checkpoint_file(filename, map_location)


def load_from_http(
    filename: str, map_location: Optional[Any] = None, model_dir: Optional[str] = None, progress: bool = False
) -> Any:
    """mmengine schemes ``http://`` / ``https://``: download (cached), then a safe load."""
    del progress  # mmengine's signature; downloads are logged instead
    cached = download_checkpoint(filename, model_dir)
    return load_checkpoint_file(cached, map_location, name=f'{filename} (cached as {cached})')


def load_from_torchvision(filename: str, map_location: Optional[Any] = None) -> Any:
    """mmengine schemes ``torchvision://NAME`` / ``modelzoo://NAME``: torchvision's URL for
    ``NAME``, then :func:`load_from_http`."""
    if filename.startswith('modelzoo://'):
        print_log(
            'The URL scheme of "modelzoo://" is deprecated, please use "torchvision://" instead',
            logger='current',
            level=logging.WARNING,
        )
    model_name = filename.split('://', 1)[1]
    urls = mm_checkpoint.get_torchvision_models()
    if model_name not in urls:
        raise KeyError(f'{filename}: torchvision has no model {model_name!r}')
    return load_from_http(urls[model_name], map_location=map_location)


def load_from_openmmlab(filename: str, map_location: Optional[Any] = None) -> Any:
    """mmengine schemes ``open-mmlab://NAME`` / ``openmmlab://NAME``: mmengine's model table
    (plus ``$MMENGINE_HOME/open_mmlab.json``), then a URL or a file under ``MMENGINE_HOME``."""
    prefix, model_name = filename.split('://', 1)
    deprecated = mm_checkpoint.get_deprecated_model_names()
    if model_name in deprecated:
        print_log(
            f'{prefix}://{model_name} is deprecated in favor of {prefix}://{deprecated[model_name]}',
            logger='current',
            level=logging.WARNING,
        )
        model_name = deprecated[model_name]
    urls = mm_checkpoint.get_external_models()
    if model_name not in urls:
        raise KeyError(f'{filename}: no model {model_name!r} in the OpenMMLab model table')
    url = urls[model_name]
    if url.startswith(('http://', 'https://')):
        return load_from_http(url, map_location=map_location)
    local = osp.join(mm_checkpoint._get_mmengine_home(), url)
    return load_checkpoint_file(local, map_location, name=f'{filename} ({local})')


def load_from_mmcls(filename: str, map_location: Optional[Any] = None) -> Any:
    """mmengine scheme ``mmcls://NAME``: mmengine's MMClassification table, then
    :func:`load_from_http` and mmengine's key processing."""
    model_name = filename[len('mmcls://') :]
    urls = mm_checkpoint.get_mmcls_models()
    if model_name not in urls:
        raise KeyError(f'{filename}: no model {model_name!r} in the MMClassification table')
    checkpoint = load_from_http(urls[model_name], map_location=map_location)
    return mm_checkpoint._process_mmcls_checkpoint(checkpoint)


def load_from_pavi(filename: str, map_location: Optional[Any] = None) -> Any:
    """mmengine scheme ``pavi://``: download with pavi's model cloud, then a safe load."""
    from tempfile import TemporaryDirectory

    try:
        from pavi import modelcloud
    except ImportError:
        raise ImportError(f'{filename}: install pavi to load checkpoints from its model cloud') from None
    model = modelcloud.get(filename[len('pavi://') :])
    with TemporaryDirectory() as tmp_dir:
        downloaded = osp.join(tmp_dir, model.name)
        model.download(downloaded)
        return load_checkpoint_file(downloaded, map_location, name=filename)


def load_from_ceph(filename: str, map_location: Optional[Any] = None, backend: str = 'petrel') -> Any:
    """mmengine schemes ``s3://`` / ``petrel://`` (optionally ``name:s3://``): read the bytes
    through mmengine's file backend, then a safe load."""
    file_backend = mm_checkpoint.get_file_backend(filename, backend_args={'backend': backend})
    with io.BytesIO(file_backend.get(filename)) as buffer:
        return safe_torch_load(buffer, map_location, name=filename)


# Every prefix mmengine 0.10.7 registers, with dna_mm's loader for it.
SAFE_SCHEMES: 'OrderedDict[str, Callable[..., Any]]' = OrderedDict(
    [
        ('', load_from_local),
        ('http://', load_from_http),
        ('https://', load_from_http),
        ('torchvision://', load_from_torchvision),
        ('modelzoo://', load_from_torchvision),
        ('open-mmlab://', load_from_openmmlab),
        ('openmmlab://', load_from_openmmlab),
        ('mmcls://', load_from_mmcls),
        ('pavi://', load_from_pavi),
        (r'(\S+\:)?s3://', load_from_ceph),
        (r'(\S+\:)?petrel://', load_from_ceph),
    ]
)


def _refusing_loader(prefix: str) -> Callable[..., Any]:
    """A loader for a scheme dna_mm does not know: refuses with a message instead of letting
    mmengine's own loader (possibly ``weights_only=False``) run."""

    def load_unknown_scheme(filename: str, map_location: Optional[Any] = None) -> Any:
        raise UnsafeCheckpointError(
            f'{filename}: mmengine loads {prefix!r} checkpoints with a loader dna_mm has not checked '
            f'(a newer mmengine than tested); download the file and give its local path'
        )

    return load_unknown_scheme


def install() -> None:
    """Allow-list mmengine's globals and route every mmengine checkpoint scheme through a
    ``weights_only`` loader (idempotent). A scheme dna_mm does not know (a newer mmengine) gets
    a warning and a loader that refuses, so no unchecked path stays open and the import works.
    Set ``DNA_MM_NO_SAFE_LOADING=1`` before ``import dna_mm`` to leave mmengine's loaders as
    they are (the files dna_mm itself reads are still loaded with ``weights_only=True``)."""
    allow_mmengine_globals()
    if os.environ.get('DNA_MM_NO_SAFE_LOADING') == '1':
        return
    unknown = sorted(set(CheckpointLoader._schemes) - set(SAFE_SCHEMES))
    if unknown:
        print_log(
            f'dna_mm: mmengine registers checkpoint schemes dna_mm has not checked: {unknown}; '
            f'loading from them is refused',
            logger='current',
            level=logging.WARNING,
        )
    for prefix in unknown:
        CheckpointLoader.register_scheme(prefixes=prefix, loader=_refusing_loader(prefix), force=True)
    for prefix, loader in SAFE_SCHEMES.items():
        CheckpointLoader.register_scheme(prefixes=prefix, loader=loader, force=True)
        setattr(mm_checkpoint, loader.__name__, loader)  # direct callers of mmengine's loaders


def read_checkpoint(source: str, map_location: Optional[Any] = 'cpu') -> Any:
    """Load a checkpoint from a local path, URL or any mmengine prefix (``open-mmlab://``, ...),
    always as a ``weights_only`` load (:func:`install` is applied first)."""
    install()
    return CheckpointLoader.load_checkpoint(source, map_location)


@dataclass
class StateDictReport:
    """How a checkpoint's weights match a model's (see :func:`compare_state_dict`)."""

    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # key, ckpt, model
    loaded: int = 0
    layout: str = 'state_dict'  # the checkpoint's layout (dna_mm.converters.whole_model)

    @property
    def complete(self) -> bool:
        """Every model key loaded and every checkpoint key used."""
        return not (self.missing or self.unexpected or self.mismatched)

    def describe(self, limit: int = 20) -> str:
        """The problems, one key per line (at most ``limit`` per kind, then a count)."""

        def block(title: str, items: list[str]) -> list[str]:
            if not items:
                return []
            shown = [f'    {item}' for item in items[:limit]]
            more = [f'    ... ({len(items) - limit} more)'] if len(items) > limit else []
            return [f'  {title} ({len(items)}):', *shown, *more]

        shapes = [f'{key}: checkpoint {list(ck)} vs model {list(mo)}' for key, ck, mo in self.mismatched]
        return '\n'.join(
            block('missing from the checkpoint', self.missing)
            + block('unexpected (not in the model)', self.unexpected)
            + block('shape mismatch', shapes)
        )


def apply_load_pre_hooks(model: nn.Module, state_dict: dict) -> OrderedDict:
    """``state_dict`` as ``model.load_state_dict`` hands it to the parameters: after every
    module's load pre-hooks (the key renames and conversions a module does on load, e.g. the
    attention swap reading a host's layout, :mod:`dna_mm.models.adapters.swap`).

    The hooks run on a shallow copy (tensors shared, ``state_dict`` itself unchanged), in the
    order and with the prefixes of ``nn.Module.load_state_dict`` (pre-order over the modules).
    A hook that only renames keys under its own prefix sees what it sees in a real load;
    loading the result runs the hooks again, on keys already in the model's layout.
    """
    converted = OrderedDict(state_dict)
    for name, module in model.named_modules():
        hooks = list(module._load_state_dict_pre_hooks.values())
        prefix = f'{name}.' if name else ''
        for hook in hooks:  # (state_dict, prefix, local_metadata, strict, missing, unexpected, errors)
            hook(converted, prefix, {}, True, [], [], [])
    return converted


def compare_state_dict(model: nn.Module, state_dict: dict) -> StateDictReport:
    """Compare ``state_dict`` with ``model.state_dict()`` key by key, as the model's load
    pre-hooks convert it (:func:`apply_load_pre_hooks`; BN's ``num_batches_tracked`` is ignored
    when missing, as mmengine does)."""
    return _compare_converted(model, apply_load_pre_hooks(model, state_dict))


def _compare_converted(model: nn.Module, state_dict: dict) -> StateDictReport:
    own = model.state_dict()
    report = StateDictReport()
    for key, value in state_dict.items():
        if key not in own:
            report.unexpected.append(key)
        elif hasattr(value, 'shape') and tuple(value.shape) != tuple(own[key].shape):
            report.mismatched.append((key, tuple(value.shape), tuple(own[key].shape)))
        else:
            report.loaded += 1
    report.missing = [k for k in own if k not in state_dict and not k.endswith('num_batches_tracked')]
    return report


def load_model_weights(
    model: nn.Module,
    checkpoint: dict,
    filename: str,
    strict: bool = True,
    revise_keys: Optional[list[tuple[str, str]]] = None,
) -> StateDictReport:
    """Load a whole-model ``checkpoint`` into ``model``.

    The weights are read as the code that wrote the file laid them out
    (:func:`dna_mm.converters.whole_model.whole_model_state_dict`): mmengine's ``state_dict``;
    the authors' TimeSformer checkpoints (PySlowFast's ``model_state``, ``model.*`` keys, head
    included) as a ``Recognizer3D``; their ImageNet ``vit/main.py`` file (``model``) with their
    attention layouts mapped; a bare state dict. A layout other than mmengine's is logged.

    Args:
        model: The (unwrapped) model.
        checkpoint: As loaded from ``filename``.
        filename: Named in the error / report.
        strict: Refuse any missing, unexpected or resized key (nothing is loaded then).
        revise_keys: ``(pattern, replacement)`` regexes applied to the keys first
            (default: strip a ``module.`` prefix, as mmengine does).

    Returns:
        The comparison (``layout``: the checkpoint's); with ``strict=False`` the matching keys
        were loaded and the rest left at the model's values.

    Raises:
        CheckpointMismatchError: ``strict`` and the checkpoint does not match the model.
    """
    from ..converters.whole_model import LAYOUT_NAMES, whole_model_state_dict

    if not isinstance(checkpoint, dict):
        raise CheckpointMismatchError(
            f'checkpoint {filename} holds a {type(checkpoint).__name__}, not a state dict'
        )
    state_dict, layout = whole_model_state_dict(checkpoint)
    if layout != 'mmengine':
        print_log(f'checkpoint {filename}: {LAYOUT_NAMES[layout]}', logger='current')
    for pattern, repl in revise_keys if revise_keys is not None else [(r'^module\.', '')]:
        state_dict = OrderedDict((re.sub(pattern, repl, k), v) for k, v in state_dict.items())
    state_dict = apply_load_pre_hooks(model, state_dict)  # e.g. a swapped attention's host keys
    report = _compare_converted(model, state_dict)
    report.layout = layout
    if strict and not report.complete:
        raise CheckpointMismatchError(
            f'checkpoint {filename} does not match the model ({report.loaded} of '
            f'{report.loaded + len(report.missing) + len(report.mismatched)} weights match):\n'
            f'{report.describe()}\nNothing was loaded. Use a checkpoint of this model, or accept '
            f'a partial load explicitly (tools: --partial-load; config: load_partial = True).'
        )
    usable = {
        k: v
        for k, v in state_dict.items()
        if k not in report.unexpected and k not in {m[0] for m in report.mismatched}
    }
    model.load_state_dict(usable, strict=False)
    return report


def not_resumable_message(filename: str, missing: str, layout: Optional[str] = None) -> str:
    """Why ``filename`` cannot be resumed from (it lacks ``missing``, e.g. ``'meta'``), naming
    its layout when it is another code's (``layout`` of :class:`StateDictReport`)."""
    from ..converters.whole_model import LAYOUT_NAMES

    if layout in (None, 'mmengine', 'state_dict'):
        return (
            f'cannot resume from {filename}: it has no {missing} entry, so it is not a training '
            f'checkpoint saved by mmengine (to start from its weights use load_from)'
        )
    return (
        f'cannot resume from {filename}: it is {LAYOUT_NAMES[layout]}, not a dna_mm training '
        f'checkpoint; --resume / resume=True continues dna_mm\'s own runs only. Its weights load '
        f'whole with load_from={filename} (training starts at epoch 0 with a fresh optimizer), '
        f'and tools/test.py CONFIG {filename} evaluates it'
    )
