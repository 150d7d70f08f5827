"""Exceptions for a user's mistakes: a config value, a list line, a missing file, a model dna_mm
cannot take, a checkpoint that is unsafe, unreadable or does not match the model.

dna_mm's tools print these as one line and exit with status 2 (``--debug`` shows the traceback,
:func:`dna_mm.apis.cli.cli_main`); anything else is a programming error and keeps its traceback.
Each class also derives from the built-in exception a caller would expect (``ValueError``,
``FileNotFoundError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import pickle


class UserError(Exception):
    """Base class: the input is wrong, not the code. The message names the file / key and what
    was expected."""


class ConfigError(UserError, ValueError):
    """A config value that cannot work (a length or size <= 0, an unknown attention name)."""


class DataError(UserError, ValueError):
    """A dataset's annotation is malformed (a bad list line, a label out of range) or its
    videos cannot be read."""


class MissingFileError(UserError, FileNotFoundError):
    """A file the run needs does not exist (``load_from``, a list, a video)."""


class UnsupportedModelError(UserError, ValueError):
    """A model dna_mm cannot put its attention into (named with the reason)."""


class CheckpointMismatchError(UserError, RuntimeError):
    """A whole-model checkpoint does not match the model (missing / unexpected / resized keys)."""


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
