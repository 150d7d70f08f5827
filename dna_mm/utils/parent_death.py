"""Processes that end with the process that started them.

A process killed outright (``kill -9``, the kernel's out-of-memory killer) runs none of its own
code, so what it started runs on: a rank's data-loader workers, which hold the copies of the
rank's sockets that ``fork`` gave them (the other ranks then see no connection close), and
torchrun's ranks when their agent is killed (they would train on, holding their GPUs, with no
agent to report to). Linux can signal a child when its parent ends (``PR_SET_PDEATHSIG``):
:func:`signal_on_parent_death`, which :func:`die_with_parent` (every data-loader worker that
dna_mm starts: :mod:`dna_mm.engine.loader_workers`, :mod:`dna_mm.apis.features`) and
:func:`follow_torchrun_agent` use.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal

#: Linux's ``prctl`` option that sets the signal a process gets when its parent ends
PR_SET_PDEATHSIG = 1
#: the agent's pid, which dna_mm's torchrun (:mod:`dna_mm.tools.torchrun`) gives its ranks
AGENT_PID_VAR = 'DNA_MM_TORCHRUN_AGENT_PID'


def signal_on_parent_death(signum: int) -> bool:
    """Have the kernel send this process ``signum`` when its parent ends, however it ends
    (strictly, when the parent's thread that started it ends: mmengine's loops and torchrun's
    agent start their processes from the main thread). Kept across ``exec``, not given to this
    process's own children. ``False`` where the system has no such call (macOS)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, 'prctl'):
        return False
    return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0


def die_with_parent(*_: object) -> bool:
    """``SIGKILL`` this process (a worker that ``multiprocessing`` started: a data-loader worker)
    when the process that started it ends, and now if that process ended already; ``False`` where
    the system cannot (macOS). Takes and ignores any arguments, so that it serves as a loader's
    ``worker_init_fn``."""
    if not signal_on_parent_death(signal.SIGKILL):
        return False
    parent = multiprocessing.parent_process()
    if parent is not None and not parent.is_alive():  # it ended before the call above
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (an ended one not yet reaped by its parent does not)."""
    try:
        stat = open(f'/proc/{pid}/stat').read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return stat[stat.rindex(')') + 2 :][:1] not in 'ZX'


def _named_agent() -> int:
    """The pid of the agent of dna_mm's torchrun that started this process or its parent
    (:data:`AGENT_PID_VAR`); 0 when none is named."""
    named = os.environ.get(AGENT_PID_VAR, '')
    return int(named) if named.isdigit() else 0


#: the pid of the agent this rank follows (:func:`follow_torchrun_agent`); 0: none
_followed = 0


def follow_torchrun_agent() -> bool:
    """Under torchrun (``TORCHELASTIC_RUN_ID`` set), ``SIGTERM`` to this rank when its agent ends,
    however it ends: the rank saves its iteration and exits 143, as when the agent forwards a
    ``SIGTERM`` (:class:`~dna_mm.engine.PreemptionHook`). Whether it was set up.

    dna_mm's torchrun names its pid (:data:`AGENT_PID_VAR`): a process whose parent is not that
    agent was started by a rank (a tool's subprocess) and is left alone while the agent lives; an
    agent that already ended stops the rank now. Under plain torchrun the parent is taken to be
    the agent."""
    global _followed
    if 'TORCHELASTIC_RUN_ID' not in os.environ:
        return False
    agent = _named_agent()
    if agent and os.getppid() != agent and _alive(agent):
        return False
    if not signal_on_parent_death(signal.SIGTERM):
        return False
    _followed = agent or os.getppid()
    if agent_ended():  # it ended before the call above
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def agent_ended() -> bool:
    """Whether the agent this rank follows (:func:`follow_torchrun_agent`) has ended or is ending:
    the rank has another parent, or the agent's main thread has ended (the kernel signals the rank
    then, while the agent's other threads end)."""
    return bool(_followed) and (os.getppid() != _followed or not _alive(_followed))
