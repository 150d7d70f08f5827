"""Exceptions for a user's mistakes: a config value, a list line, a missing file, a model dna_mm
cannot take, a checkpoint that is unsafe, unreadable or does not match the model.

dna_mm's tools print these as one line and exit with status 2 (``--debug`` shows the traceback,
:func:`dna_mm.tools.cli.cli_main`); anything else is a programming error and keeps its traceback.
Each class also derives from the built-in exception a caller would expect (``ValueError``,
``FileNotFoundError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import pickle
import re
from urllib.error import HTTPError, URLError

_BUILD_PREFIX = re.compile(r'class `\w+` in [\w/.\-]+\.py: ')


class UserError(Exception):
    """Base class: the input is wrong, not the code. The message names the file / key and what
    was expected."""


class ConfigError(UserError, ValueError):
    """A config value that cannot work (a length or size <= 0, an unknown attention name)."""


class SettingError(ConfigError):
    """A member's setting that cannot be: an unknown DnA variant, a setting other than
    ``+gated`` in a method's name (``dna+gatd``), a variant of a member without variants."""


class MemberError(ConfigError):
    """An attention member that breaks the member contract (docs/attention.md): a short name or
    class name another member holds, no ``attend`` of its own, an ``attend`` output of the wrong
    shape. Named with the member's class and module."""


class DataError(UserError, ValueError):
    """A dataset's annotation is malformed (a bad list line, a label out of range) or its
    videos cannot be read."""


class MissingFileError(UserError, FileNotFoundError):
    """A file the run needs does not exist (``load_from``, a list, a video)."""


class UnsupportedModelError(UserError, ValueError):
    """A model dna_mm cannot put its attention into (named with the reason)."""


class CheckpointMismatchError(UserError, RuntimeError):
    """A whole-model checkpoint does not match the model (missing / unexpected / resized keys)."""


class PretrainedMismatchError(CheckpointMismatchError, ValueError):
    """A backbone's ``pretrained`` file that does not fit it (a tensor of another shape, a layout
    it cannot read, an attention with some of its tensors only). Also a ``ValueError``, what
    :func:`dna_mm.models.backbones.load_pretrained` raised before."""


class UnsafeCheckpointError(UserError, pickle.UnpicklingError):
    """A checkpoint's pickle references a global that is not allow-listed."""


class UnreadableCheckpointError(UserError, ValueError):
    """A checkpoint file that cannot be read (base of the two cases below)."""


class NotACheckpointError(UnreadableCheckpointError):
    """The file is not a PyTorch checkpoint: neither ``torch.save``'s zip format nor its
    older pickle format (a text file, random bytes, an empty file)."""


class CorruptCheckpointError(UnreadableCheckpointError):
    """A PyTorch (or safetensors) file that is truncated or damaged."""


class RunStopped(RuntimeError):
    """A run stopped by an event outside its code: a data-loader worker or another rank that
    died. Not the user's mistake, nor a bug to trace: dna_mm's tools print its one line (what was
    lost, how, and how to go on) and exit with status 1 (``--debug``: the traceback)."""


def error_line(err: BaseException) -> str:
    """The message of ``err`` without the wrappers mmengine and torch's DataLoader add (the
    class being built, a worker's traceback)."""
    if isinstance(err, URLError) and not isinstance(err, HTTPError):  # offline, no such host
        return (
            f'a download failed ({err.reason}): the run needs a file it could not fetch (the '
            f'"downloading URL to PATH" line above names it; put the file at PATH to run offline)'
        )
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    if 'Original Traceback' in text:  # re-raised from a DataLoader worker: keep its last error
        marker = f'{type(err).__name__}: '
        text = text[text.rindex(marker) + len(marker) :] if marker in text else text
    return _BUILD_PREFIX.sub('', text).strip()
