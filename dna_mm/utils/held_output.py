"""What a library's C++ code prints on the process's terminal, held while a call runs and then
written back filtered.

C++ writes to file descriptors 1 and 2 directly, below Python's ``sys.stdout`` / ``sys.stderr``,
where no redirection of Python's streams reaches it: c10d's warnings with their C++ stack about a
store that went away (:mod:`dna_mm.engine.held_stderr`), the TorchScript ONNX exporter's dump of
the graph it was building when it met an operator it cannot export (:mod:`dna_mm.deployment.onnx`).
Where dna_mm reports such a failure in one line, the dump beside it would read as a crash of its
own. :func:`held_output` holds the descriptor in a file while the block runs, then writes back
what ``keep`` leaves of it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from typing import Callable, Iterator

_LOCK = threading.RLock()
#: the Python stream over each descriptor, flushed around the hold
_STREAMS = {1: 'stdout', 2: 'stderr'}


@contextlib.contextmanager
def held_output(fd: int, keep: Callable[[str], str]) -> Iterator[None]:
    """File descriptor ``fd`` (1 or 2) held in a file for the block, then ``keep(text)`` written
    back to it. What other threads of this process write to it meanwhile comes out after the block."""
    stream = getattr(sys, _STREAMS[fd])
    with _LOCK, tempfile.TemporaryFile() as held:
        stream.flush()
        saved = os.dup(fd)
        os.dup2(held.fileno(), fd)
        try:
            yield
        finally:
            stream.flush()
            os.dup2(saved, fd)
            os.close(saved)
            held.seek(0)
            kept = keep(held.read().decode(errors='replace'))
            if kept:
                os.write(fd, kept.encode())
