"""Exceptions for a user's mistakes: a config value, a list line, a missing file, a model dna_mm
cannot take.

dna_mm's tools print these as one line and exit with status 2 (``--debug`` shows the traceback,
:func:`dna_mm.apis.cli.cli_main`); anything else is a programming error and keeps its traceback.
Each class also derives from the built-in exception a caller would expect (``ValueError``,
``FileNotFoundError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations


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
