"""mmengine's deprecation notices about code a dna_mm user does not write, off the terminal.

MMAction2's ``DecordInit`` makes a ``FileClient``, and mmengine warns at each one that
``FileClient`` and ``HardDiskBackend`` will be deprecated: a notice for MMAction2's developers,
not for whoever runs a tool. A run's terminal drops them (its log file keeps them;
:class:`~dna_mm.engine.runner.SetupDumpFilter`, ``--verbose`` shows them), and so does every
other tool's (:func:`quiet_library_notices`, called by :func:`dna_mm.tools.cli.run_tool`).
So does every tool's the warning setuptools gives when mmengine imports ``pkg_resources`` to
find the package of a ``mmaction::`` / ``mmdet::`` base config (:data:`LIBRARY_WARNINGS`).
"""

from __future__ import annotations

import logging
import warnings

#: the start of each notice (after mmengine's leading newlines or dashes)
LIBRARY_NOTICES = ('"FileClient" will be deprecated', '"HardDiskBackend" is the alias')
#: the start of each ``warnings`` message given by a library's code, not a user's
LIBRARY_WARNINGS = ('pkg_resources is deprecated as an API',)


def is_library_notice(record: logging.LogRecord) -> bool:
    """Whether ``record`` is one of :data:`LIBRARY_NOTICES`."""
    return record.getMessage().lstrip('\n-').startswith(LIBRARY_NOTICES)


class LibraryNoticeFilter(logging.Filter):
    """A handler filter that drops :data:`LIBRARY_NOTICES` and passes everything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not is_library_notice(record)


def quiet_library_notices() -> None:
    """:class:`LibraryNoticeFilter` on the terminal handlers of mmengine's logger outside a run
    (``MMLogger`` ``'mmengine'``, where ``print_log(logger='current')`` writes when no runner has
    made its own), once; :data:`LIBRARY_WARNINGS` ignored."""
    from mmengine.logging import MMLogger

    for message in LIBRARY_WARNINGS:
        warnings.filterwarnings('ignore', message=message, category=UserWarning)

    logger = MMLogger.get_instance('mmengine')
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            if not any(isinstance(f, LibraryNoticeFilter) for f in handler.filters):
                handler.addFilter(LibraryNoticeFilter())
