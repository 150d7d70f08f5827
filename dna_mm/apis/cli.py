"""The one wrapper every dna_mm tool runs its ``main`` in (``@cli_main('train.py')``): a user's
mistake is one line on stderr and exit status 2, a programming error keeps its traceback.

A user's mistake is any :class:`dna_mm.errors.UserError` (the checkpoint errors of
:mod:`dna_mm.checkpoint` included), a missing file (``FileNotFoundError``: a ``load_from`` path, a
config file), a ``type`` that is not registered (mmengine's ``KeyError: 'X is not in the ...
registry'``) and a failed download (offline: the file to put in place is named). ``--debug``
anywhere on the command line re-raises it with the traceback.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any, Callable, Optional
from urllib.error import HTTPError, URLError

from ..errors import MissingFileError, UserError

DEBUG_FLAG = '--debug'
DEBUG_HELP = 'print the traceback of an input error (default: one line, exit status 2)'
# mmengine's registry prefixes a build error with the class it was building
_BUILD_PREFIX = re.compile(r'class `\w+` in [\w/.\-]+\.py: ')
_NOT_REGISTERED = re.compile(r'is not in the [\w:]+ registry')
USER_ERRORS = (UserError, FileNotFoundError, IsADirectoryError, NotADirectoryError, URLError)


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


def user_file(path: str, what: str) -> str:
    """``path`` if it is an existing file or a URL / mmengine prefix (``scheme://``), else a
    :class:`~dna_mm.errors.MissingFileError` naming ``what`` (``'config'``, ``'load_from'``, ...)."""
    if '://' in str(path) or os.path.isfile(path):
        return path
    where = 'is a folder, not a file' if os.path.isdir(path) else 'does not exist'
    raise MissingFileError(f'{what} {path} {where}')


def parse_size(text: str) -> tuple[int, int]:
    """A ``WIDTHxHEIGHT`` argument: ``'1920x1080'`` → ``(1920, 1080)``; a clear ``ValueError``
    otherwise (both sides at least 16)."""
    try:
        w, h = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise ValueError(f'size {text!r}: expected WIDTHxHEIGHT, e.g. 1920x1080') from None
    if w < 16 or h < 16:
        raise ValueError(f'size {text!r}: width and height must be at least 16')
    return w, h


class UserExit(SystemExit):
    """``SystemExit`` with status 2 whose ``str()`` is the error message (what the tool printed)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def cli_main(prog: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a tool's ``main(argv=None)``: a user's mistake prints ``prog: error: <message>``
    on stderr and raises :class:`UserExit` (exit status 2, no traceback); with ``--debug`` in the
    arguments, or for any other exception, the exception propagates with its traceback."""

    def decorate(main: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(main)
        def wrapped(argv: Optional[list[str]] = None, *args: Any, **kwargs: Any) -> Any:
            try:
                return main(argv, *args, **kwargs)
            except Exception as err:  # noqa: BLE001 (sorted below: only the user's mistakes are caught)
                given = sys.argv[1:] if argv is None else argv
                unregistered = isinstance(err, KeyError) and _NOT_REGISTERED.search(str(err))
                if not (isinstance(err, USER_ERRORS) or unregistered) or DEBUG_FLAG in given:
                    raise
                message = error_line(err)
                print(
                    f'{prog}: error: {message}\n{prog}: ({DEBUG_FLAG} prints the traceback)', file=sys.stderr
                )
                raise UserExit(message) from None

        return wrapped

    return decorate
