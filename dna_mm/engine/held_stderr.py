"""torch's C++ warnings about a store that went away, kept off the terminal.

A c10d store client that finds its server gone writes a warning with its C++ stack to the
process's stderr (file descriptor 2, below Python's ``sys.stderr``) before the call raises::

    [W1129 13:47:23.860616941 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(...): Connect...
    Exception raised from recvBytes at .../c10d/Utils.hpp:786 (most recent call first):
    frame #0: c10::Error::Error(...)
    ...

Where dna_mm asks a store that may be gone (a rank lost: :mod:`dna_mm.engine.distributed` asks
whether the store still answers, but the process that serves it can die between that question and
the read), the failure is what it reports, in one line; a C++ stack beside it would read as a
crash of its own. :func:`held_stderr` holds file descriptor 2 in a file while it runs and then
writes back everything but those warnings (:func:`without_store_warnings`;
:mod:`dna_mm.utils.held_output`).
"""

from __future__ import annotations

import re
from typing import ContextManager

from ..utils.held_output import held_output

#: the first line of a c10d warning (glog's prefix: level, date, time, source file and line)
_WARNING = re.compile(r'^\[[WE]\d{4} [\d:.]+ \w+\.cpp:\d+\] \[c10d\] ')
#: the lines of the C++ stack that follow it
_STACK = ('Exception raised from ', 'frame #', '<omitting python frames>')


def without_store_warnings(text: str) -> str:
    """``text`` without its c10d warnings and the C++ stack lines (and blank lines) after each."""
    kept, inside = [], False
    for line in text.splitlines(keepends=True):
        if _WARNING.match(line):
            inside = True
        elif not (inside and (line.startswith(_STACK) or not line.strip())):
            inside = False
            kept.append(line)
    return ''.join(kept)


def held_stderr() -> ContextManager[None]:
    """File descriptor 2 held in a file for the block, then written back without c10d's
    warnings (:func:`~dna_mm.utils.held_output.held_output`)."""
    return held_output(2, without_store_warnings)
