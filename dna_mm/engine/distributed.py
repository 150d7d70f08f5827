"""Process groups for ``--launcher pytorch`` / ``slurm``: their start, their timeout, and the
line that names a rank lost under them.

* **Start.** mmengine's launchers call ``torch.cuda.set_device``, so without CUDA
  :func:`init_cpu_group` starts the gloo group itself (mmengine's runner then finds it
  initialised). For SLURM, :func:`slurm_environment` turns SLURM's variables into torch's on every
  machine: ``RANK`` = ``SLURM_PROCID``, ``WORLD_SIZE`` = ``SLURM_NTASKS``, ``LOCAL_RANK`` =
  ``SLURM_LOCALID``, ``MASTER_ADDR`` = the first host of ``SLURM_NODELIST`` (:func:`first_host`:
  read from the list, without ``scontrol``; a ``MASTER_ADDR`` already set wins), ``MASTER_PORT``
  (default 29500).
* **The launcher and the environment** (:func:`check_launcher`, before any work): a launcher whose
  variables are not set (``--launcher pytorch`` without torchrun, ``slurm`` without ``srun``,
  ``mpi`` without ``mpirun``) is one line naming them and the script that starts the tool so; a
  tool that torchrun (``WORLD_SIZE`` > 1) or ``mpirun`` started without its launcher is refused
  too: each process would run the whole job alone. ``mpi`` without CUDA: the gloo group from
  Open MPI's variables (:func:`mpi_environment`).
* **Timeout.** ``env_cfg.dist_cfg.timeout`` (seconds, :func:`collective_timeout`; default
  :data:`DEFAULT_TIMEOUT`) bounds every collective: a rank that waits longer for the others stops.
  gloo (started here) and NCCL (mmengine's ``init_dist``) both take it; NCCL's own default, 30
  minutes, would leave a job with a dead rank idle for half an hour.
* **A lost rank.** gloo reports a peer whose process ended at once ("Connection closed by peer"),
  but not which rank it was. So each rank writes to the process group's store how it can be
  asked whether it lives (:func:`answer_peers`: a listening socket, answered by the kernel) and,
  when it ends on an error, how it ended (:func:`note_rank_end`). :func:`describe_lost_rank`
  notes its own end, leaves the group, and names the ranks whose socket refuses (killed), does
  not answer (machine lost) or, after a collective timeout, that live but never noted (hung); or
  else the reason a rank gave. Where the store itself no longer answers, the process that held it
  is the one lost: rank 0 when the ranks were started by hand or by ``srun`` (``env://``: rank 0
  serves the store), torchrun's agent otherwise. Every store access and knock is bounded (a
  connection test first, then threads given a few seconds): nothing here can hang; a store gone
  between that test and the read leaves no C++ stack on the terminal
  (:mod:`~dna_mm.engine.held_stderr`).
* **Elastic restarts.** A worker that ``torchrun --max-restarts`` started again continues from the
  work dir's last checkpoint (:func:`resume_after_restart`).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import os.path as osp
import re
import socket
import sys
import threading
import time
import weakref
from numbers import Real
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.dist import is_main_process
from mmengine.logging import print_log

from ..errors import ConfigError
from .checkpoint_hook import checkpoint_folder, resume_candidates
from .held_stderr import held_stderr
from .ranks import max_over_ranks

#: one entry of a SLURM host list: a prefix and an optional bracketed range list (``gpu[01-04,07]``)
_HOST = re.compile(r'([^,\[]+)(?:\[([^\]]+)\])?')
SLURM_REQUIRED = ('SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_NODELIST')
#: torch's ``env://`` variables (torchrun sets them, and ``LOCAL_RANK``, which CUDA needs)
TORCH_REQUIRED = ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')
#: Open MPI's variables (``mpirun``) that ``--launcher mpi`` reads
MPI_REQUIRED = ('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK')
#: the script that starts a tool under a launcher (another tool: the launcher's command, :func:`_start`)
LAUNCH_SCRIPTS = {
    ('pytorch', 'train.py'): 'tools/dist_train.sh CONFIG NPROC',
    ('pytorch', 'test.py'): 'tools/dist_test.sh CONFIG CHECKPOINT NPROC',
    ('slurm', 'train.py'): 'tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR',
    ('slurm', 'test.py'): 'tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT',
}
#: the collective timeout (seconds) of a config without ``env_cfg.dist_cfg.timeout``. It must
#: cover the longest thing one rank does while the others wait in their next collective: rank 0
#: writing a checkpoint (a ViT-L's weights and AdamW state, some GB, to network storage) or
#: finishing a validation alone, and the slowest rank's first iteration (torch.compile); 5
#: minutes does, and a lost rank still stops the job in minutes, not in NCCL's 30
DEFAULT_TIMEOUT = 300
#: how long :func:`describe_lost_rank` waits, after a collective timeout among more than 2 ranks,
#: for the other ranks to time out and note it too (seconds): they entered the collective within
#: moments of each other, the hung rank never will. (A peer found gone needs no wait: a rank notes
#: its end before it leaves, and its socket tells whether it lives.)
NOTE_WAIT = 5.0
#: the bound on one look at the store (seconds): a store whose process is stopped accepts the
#: connection but never answers
STORE_WAIT = 3.0
#: the store keys of the notes, and of the addresses each rank answers at (:func:`answer_peers`)
NOTE_KEY = 'dna_mm/rank_end/{}'
ALIVE_KEY = 'dna_mm/alive/{}'
#: the words of a collective whose peer process ended (gloo: its sockets closed by its kernel)
PEER_GONE = (
    'Connection closed by peer',
    'Connection reset by peer',
    'Broken pipe',
    'NCCL communicator was aborted',
)
#: the words of a collective that waited out the timeout (gloo; NCCL's watchdog)
TIMED_OUT = (
    'Timed out waiting',
    'Application timeout caused pair closure',
    'Operation timed out',
    'Watchdog caught collective operation timeout',
)


def first_host(nodelist: str) -> str:
    """The first host of a SLURM host list: ``'gpu[07-08,11],cpu01'`` → ``'gpu07'``,
    ``'node1,node2'`` → ``'node1'``, ``'host'`` → ``'host'`` (zero padding kept)."""
    m = _HOST.match(nodelist.strip())
    if not m:
        raise ConfigError(f'SLURM_NODELIST={nodelist!r}: not a SLURM host list')
    prefix, ranges = m.groups()
    if not ranges:
        return prefix
    return prefix + ranges.split(',')[0].split('-')[0]


def _tool(tool: Optional[str]) -> Optional[str]:
    """The tool that runs: ``tool``, else the script Python runs (``train.py``), else ``None``."""
    name = tool or osp.basename(sys.argv[0] if sys.argv else '')
    return name if name.endswith('.py') and not name.startswith('__') else None


def _start(launcher: str, tool: Optional[str]) -> str:
    """How ``tool`` is started under ``launcher``: its script, else the launcher's command."""
    script = LAUNCH_SCRIPTS.get((launcher, tool))
    if script is not None:
        return script
    if tool is None and launcher in ('pytorch', 'slurm'):
        kind = 'dist' if launcher == 'pytorch' else 'slurm'
        return f'tools/{kind}_train.sh, tools/{kind}_test.sh'
    command = {
        'pytorch': 'python -m dna_mm.tools.torchrun --nproc_per_node NPROC',
        'slurm': 'srun ... python',
        'mpi': 'mpirun -n NPROC python',
    }[launcher]
    return f'{command} tools/{tool or "TOOL.py"} ... --launcher {launcher}'


def launcher_mistake(
    launcher: str, tool: Optional[str] = None, environ: Optional[dict] = None
) -> Optional[str]:
    """The line refusing ``--launcher launcher`` of ``tool`` (``'train.py'``; default: the script
    Python runs) in ``environ`` (default ``os.environ``), else ``None``:

    * ``pytorch`` / ``slurm`` / ``mpi`` without the variables its launcher sets (torchrun's
      :data:`TORCH_REQUIRED`, and ``LOCAL_RANK`` with CUDA; :data:`SLURM_REQUIRED`;
      :data:`MPI_REQUIRED`): they are named, and the script that starts the tool so;
    * ``none`` (no ``--launcher``) in a process that torchrun (``WORLD_SIZE`` > 1) or ``mpirun``
      (``OMPI_COMM_WORLD_SIZE`` > 1) started: every process would run the whole job alone (the
      same results printed and files written by each) or refuse the others' work dir."""
    env = os.environ if environ is None else environ
    tool = _tool(tool)
    if launcher == 'none':
        started = (('WORLD_SIZE', 'pytorch', 'torchrun'), ('OMPI_COMM_WORLD_SIZE', 'mpi', 'mpirun'))
        for var, needed, by in started:
            size = str(env.get(var, '')).strip()
            if size.isdigit() and int(size) > 1:
                job = {'train.py': 'training', 'test.py': 'test'}.get(tool or '', 'job')
                return (
                    f'{tool or "the tool"} was started as one of {size} processes ({by}: {var}={size}) '
                    f'without --launcher {needed}: each would run the whole {job} alone; add '
                    f'--launcher {needed}'
                )
        return None
    required = {'pytorch': TORCH_REQUIRED, 'slurm': SLURM_REQUIRED, 'mpi': MPI_REQUIRED}.get(launcher)
    if required is None:
        return None
    if launcher == 'pytorch' and torch.cuda.is_available():
        required = (*required, 'LOCAL_RANK')
    missing = [k for k in required if k not in env]
    if not missing:
        return None
    by = {'pytorch': 'torchrun', 'slurm': 'srun', 'mpi': 'mpirun'}[launcher]
    return (
        f'--launcher {launcher}: {", ".join(missing)} not set; start {tool or "the tool"} with {by} '
        f'({_start(launcher, tool)}), or leave out --launcher for one process'
    )


def check_launcher(launcher: str, tool: Optional[str] = None) -> None:
    """A ``ConfigError`` with :func:`launcher_mistake`'s line, if any: before any work."""
    line = launcher_mistake(launcher, tool)
    if line is not None:
        raise ConfigError(line)


def slurm_environment(
    environ: os._Environ | dict | None = None, tool: Optional[str] = None
) -> dict[str, str]:
    """Set torch's rendezvous variables from SLURM's in ``environ`` (default ``os.environ``)
    and return them; a ``ConfigError`` naming the missing SLURM variables (not inside a SLURM
    job step: run through ``srun``; ``tool``'s script named, :func:`launcher_mistake`)."""
    env = os.environ if environ is None else environ
    line = launcher_mistake('slurm', tool, env)
    if line is not None:
        raise ConfigError(line)
    values = {
        'RANK': env['SLURM_PROCID'],
        'WORLD_SIZE': env['SLURM_NTASKS'],
        'LOCAL_RANK': env.get('SLURM_LOCALID', '0'),
        'MASTER_ADDR': env.get('MASTER_ADDR') or first_host(env['SLURM_NODELIST']),
        'MASTER_PORT': env.get('MASTER_PORT', '29500'),
    }
    env.update(values)
    return values


def mpi_environment(environ: os._Environ | dict | None = None, tool: Optional[str] = None) -> dict[str, str]:
    """Set torch's rendezvous variables from Open MPI's (``mpirun``) in ``environ`` (default
    ``os.environ``) and return them: ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` from
    ``OMPI_COMM_WORLD_RANK`` / ``_SIZE`` / ``_LOCAL_RANK``, ``MASTER_PORT`` (default 29500),
    ``MASTER_ADDR`` (default ``127.0.0.1`` where all the ranks run on one machine; across machines
    it must be set: ``mpirun -x MASTER_ADDR=HOST``). A ``ConfigError`` when they are not set."""
    env = os.environ if environ is None else environ
    line = launcher_mistake('mpi', tool, env)
    if line is not None:
        raise ConfigError(line)
    size = env['OMPI_COMM_WORLD_SIZE']
    one_machine = env.get('OMPI_COMM_WORLD_LOCAL_SIZE', size) == size
    address = env.get('MASTER_ADDR') or ('127.0.0.1' if one_machine else None)
    if address is None:
        raise ConfigError(
            '--launcher mpi: MASTER_ADDR not set, and the ranks run on several machines; set it to the '
            "address of rank 0's machine (mpirun -x MASTER_ADDR=HOST)"
        )
    values = {
        'RANK': env['OMPI_COMM_WORLD_RANK'],
        'WORLD_SIZE': env['OMPI_COMM_WORLD_SIZE'],
        'LOCAL_RANK': env['OMPI_COMM_WORLD_LOCAL_RANK'],
        'MASTER_ADDR': address,
        'MASTER_PORT': env.get('MASTER_PORT', '29500'),
    }
    env.update(values)
    return values


def collective_timeout(cfg: Config) -> float:
    """``env_cfg.dist_cfg.timeout`` of ``cfg`` in seconds, written there as
    :data:`DEFAULT_TIMEOUT` when the config has none or ``None`` (mmengine's ``init_dist`` passes it to
    ``init_process_group``); a value that is not a number > 0 is a ``ConfigError`` naming the key."""
    env_cfg = cfg.get('env_cfg') or {}
    dist_cfg = env_cfg.get('dist_cfg') or {}
    value = dist_cfg.get('timeout')
    value = DEFAULT_TIMEOUT if value is None else value
    if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
        raise ConfigError(
            f'env_cfg.dist_cfg.timeout={value!r}: the collective timeout is a number of seconds > 0 '
            f'(default {DEFAULT_TIMEOUT})'
        )
    cfg.env_cfg = {**env_cfg, 'dist_cfg': {**dist_cfg, 'timeout': value}}
    return float(value)


def init_cpu_group(launcher: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Without CUDA: the gloo process group from torch's (``pytorch``), SLURM's (``slurm``) or
    Open MPI's (``mpi``) environment with collective ``timeout`` (seconds), unless one exists;
    with CUDA, ``slurm`` / ``mpi`` only set the environment and mmengine starts the group (nccl)
    on ``LOCAL_RANK``'s GPU."""
    _launcher_environment(launcher)
    _TIMEOUT[0] = float(timeout)
    if torch.cuda.is_available() or launcher not in ('pytorch', 'slurm', 'mpi') or dist.is_initialized():
        return
    # env:// (torchrun / the SLURM or Open MPI variables above)
    dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=timeout))
    answer_peers()
    print_log(
        f'no CUDA: gloo process group, rank {dist.get_rank()} of {dist.get_world_size()}', logger='current'
    )


def _launcher_environment(launcher: str) -> None:
    """Refuse ``launcher`` in an environment it does not fit (:func:`check_launcher`), and set
    torch's variables from SLURM's / Open MPI's."""
    check_launcher(launcher)
    if launcher == 'slurm':
        slurm_environment()
    elif launcher == 'mpi':
        mpi_environment()


def start_distributed(launcher: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, int, str]:
    """``(rank, world size, device)`` for a tool that is not a runner (feature extraction):
    ``'none'``: ``(0, 1, 'cuda:0' or 'cpu')``; else the process group (mmengine's launcher on
    CUDA, :func:`init_cpu_group` without; collective ``timeout`` in seconds) and this process's
    GPU (``LOCAL_RANK``). A launcher that does not fit the environment is refused first
    (:func:`check_launcher`)."""
    check_launcher(launcher)
    if launcher == 'none':
        return 0, 1, 'cuda:0' if torch.cuda.is_available() else 'cpu'
    if torch.cuda.is_available():
        from mmengine.dist import init_dist

        _launcher_environment(launcher)
        _TIMEOUT[0] = float(timeout)
        if not dist.is_initialized():
            init_dist(launcher, timeout=timeout)
        answer_peers()
        device = f'cuda:{torch.cuda.current_device()}'
    else:
        init_cpu_group(launcher, timeout)
        device = 'cpu'
    return dist.get_rank(), dist.get_world_size(), device


class _State:
    """What this process knows of its process group ``group`` (a weak reference: a group held
    here would keep its sockets open after it is left): this rank's note (``None``: it has not
    ended), the line :func:`describe_lost_rank` gave, the socket of :func:`answer_peers`, and the
    store itself (kept: on rank 0 of an ``env://`` start it serves the others after the group is left)."""

    def __init__(self, group: Any = None) -> None:
        self.group = weakref.ref(group) if group is not None else lambda: None
        self.store = dist.distributed_c10d._get_default_store() if group is not None else None
        self.note: Optional[str] = None
        self.line: Optional[str] = None
        self.listener: Optional[socket.socket] = None


_STATES = [_State()]
#: the collective timeout of the group this process started last (seconds), for the lines
_TIMEOUT = [float(DEFAULT_TIMEOUT)]


def _state() -> _State:
    """This process's :class:`_State` for its current process group (a new one for a new
    group; the last one once the group is left)."""
    group = dist.group.WORLD if dist.is_available() and dist.is_initialized() else None
    if group is not None and _STATES[0].group() is not group:
        _STATES[0] = _State(group)
    return _STATES[0]


def answer_peers() -> None:
    """Let the other ranks tell whether this process lives: a listening socket that a daemon
    thread accepts on (the kernel answers it even while the process is busy) at an address
    written to the store (``dna_mm/alive/<rank>``). A peer whose socket refuses has ended; one
    that does not answer has lost its machine. Once per process group; :func:`init_cpu_group`
    calls it (gloo); bounded, never raises."""
    state = _state()
    if state.store is None or state.listener is not None or not _store_answers(state):
        return
    try:
        listener = socket.create_server(('', 0), backlog=socket.SOMAXCONN)
    except OSError:
        return
    state.listener = listener
    # a forked child (a data-loader worker) must not answer for this process once it has ended
    os.register_at_fork(after_in_child=listener.close)

    def accept() -> None:
        while True:
            try:
                listener.accept()[0].close()
            except OSError:
                return

    threading.Thread(target=accept, name='dna_mm-alive', daemon=True).start()
    address = f'{_own_address()}:{listener.getsockname()[1]}'
    key = ALIVE_KEY.format(dist.get_rank())
    _bounded(state, lambda store: store.set(key, address), failing=False)


def rank_ended() -> bool:
    """Whether this rank has ended on an error (:func:`note_rank_end`): it must not wait for the
    others in a collective any more."""
    return _state().note is not None


def note_rank_end(reason: str) -> None:
    """Record in the process group's store that this rank ends, and ``reason`` (one line: what
    stopped it), for the ranks that will find it gone (:func:`describe_lost_rank`). Call it when
    the rank ends on an error, before it leaves; the first note counts. Bounded, never raises;
    nothing without a process group."""
    if not (dist.is_available() and dist.is_initialized()) or _state().note is not None:
        return
    state = _state()
    state.note = reason = ' '.join(str(reason).split())[:300] or 'stopped'
    key = NOTE_KEY.format(dist.get_rank())
    if _store_answers(state):
        _bounded(state, lambda store: store.set(key, reason))


def describe_lost_rank(err: BaseException) -> Optional[str]:
    """One line naming the rank that was lost when ``err`` is a collective that failed because
    a peer process is gone (gloo's "Connection closed by peer", a collective timeout); ``None``
    for anything else. Notes this rank's own end (:func:`note_rank_end`), leaves the group
    (:func:`leave_group`) and asks the store and the peers (:func:`answer_peers`) who is gone;
    after a timeout among more than 2 ranks it waits up to :data:`NOTE_WAIT` s for the others to
    time out too. Milliseconds in the common case; bounded by :data:`NOTE_WAIT` + 5
    :data:`STORE_WAIT` (20 s) where the store's machine hangs."""
    kind = _failure_kind(err)
    state = _state()
    if kind is None or state.line is not None or not dist.is_initialized():
        return state.line if kind else None
    rank, world = dist.get_rank(), dist.get_world_size()
    note_rank_end(f'rank {rank} stopped: it lost a peer')
    leave_group()
    wait = kind == 'timeout' and world > 2
    found = _others(state, rank, world, wait) if _store_answers(state) else None
    state.line = _lost_line(kind, rank, world, found)
    return state.line


def leave_group() -> None:
    """Leave the default process group: destroyed, or, on a rank that ended on an error
    (:func:`rank_ended`), at once without waiting for the others (NCCL's communicators aborted: a
    destroy could wait for a collective that never ends; gloo's group destroyed); this rank stops
    answering its peers. Never raises."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    state = _state()  # keeps the store: on rank 0 of an env:// start it serves the others' notes
    try:
        nccl = dist.get_backend() == 'nccl' and hasattr(dist.distributed_c10d, '_abort_process_group')
        if nccl and state.note is not None:
            dist.distributed_c10d._abort_process_group()
        else:
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 (a group that fails to close is left to the process's exit)
        pass
    if state.listener is not None:
        state.listener.close()


def _failure_kind(err: BaseException) -> Optional[str]:
    """``'gone'`` (a peer process ended), ``'timeout'`` (the collective timed out) or ``None``,
    from the words of ``err`` or of the errors it was raised from."""
    seen = 0
    while err is not None and seen < 8:  # the runner may wrap torch's error
        if isinstance(err, RuntimeError):
            text = str(err)
            if any(words in text for words in TIMED_OUT):
                return 'timeout'
            if any(words in text for words in PEER_GONE) or isinstance(err, dist.DistNetworkError):
                return 'gone'
        err, seen = err.__cause__ or err.__context__, seen + 1
    return None


def _store_address() -> Optional[tuple[str, int]]:
    """Where the process group's store listens (``env://``: ``MASTER_ADDR:MASTER_PORT``, set by
    torchrun, srun's variables or by hand)."""
    host, port = os.environ.get('MASTER_ADDR'), os.environ.get('MASTER_PORT', '')
    return (host, int(port)) if host and port.isdigit() else None


def _own_address() -> str:
    """The address the other ranks reach this machine at: the one of the route to the store."""
    address = _store_address()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # connect() sends nothing
            s.connect(address or ('127.0.0.1', 1))
            return s.getsockname()[0]
    except OSError:
        return '127.0.0.1'


def _store_answers(state: _State) -> bool:
    """Whether the store's process still takes connections (asked each time: a connection,
    closed at once). A store that is gone is not asked anything: torch would print a C++ stack."""
    address = _store_address()
    try:
        if address is not None:
            socket.create_connection(address, timeout=STORE_WAIT).close()
    except OSError:
        return False
    return state.store is not None


def _bounded(
    state: _State, look: Callable[[Any], Any], seconds: float = STORE_WAIT, *, failing: bool = True
) -> Any:
    """``look(store)`` in a daemon thread, given ``seconds``: its result, or ``None`` when it
    failed or did not answer in time (the thread is left). ``failing``: a look after a failure,
    at a store that may have gone since it answered (:mod:`~dna_mm.engine.held_stderr`); a
    healthy run's look (:func:`answer_peers`) leaves stderr alone."""
    result: list = []

    def run() -> None:
        try:
            result.append(look(state.store))
        except Exception:  # noqa: BLE001 (a store that fails is a store that does not answer)
            pass

    thread = threading.Thread(target=run, name='dna_mm-store', daemon=True)
    # a store gone since it was asked: torch's C++ stack kept off the terminal
    with held_stderr() if failing else contextlib.nullcontext():
        thread.start()
        thread.join(seconds)
    return result[0] if result else None


def _others(state: _State, rank: int, world: int, wait: bool) -> Optional[dict[int, str]]:
    """How each other rank stands: its note, else ``'alive'`` / ``'gone'`` (its socket refuses)
    / ``'lost'`` (no answer from its machine) / ``'silent'`` (no socket to ask: it did not
    :func:`answer_peers`); ``wait``: up to :data:`NOTE_WAIT` s for the live ones' notes first.
    ``None`` when the store does not answer (what was read before it went away, where it did
    during the wait: rank 0, which served it, has stopped waiting)."""
    others = [r for r in range(world) if r != rank]
    last: list[dict] = []

    def read(store: Any) -> dict[int, tuple[Optional[str], Optional[str]]]:
        end = time.monotonic() + (NOTE_WAIT if wait else 0)
        while True:
            seen = {}
            for r in others:
                keys = (NOTE_KEY.format(r), ALIVE_KEY.format(r))
                seen[r] = tuple(
                    store.get(k).decode(errors='replace') if store.check([k]) else None for k in keys
                )
            last[:] = [seen]
            if all(note for note, _ in seen.values()) or time.monotonic() > end:
                return seen
            time.sleep(0.2)

    seen = _bounded(state, read, (NOTE_WAIT if wait else 0) + STORE_WAIT) or (last[0] if last else None)
    if seen is None:
        return None
    found = {r: note for r, (note, _) in seen.items() if note}
    asked = {r: address for r, (note, address) in seen.items() if not note and address}
    found.update(_knock(asked))
    found.update({r: 'silent' for r in others if r not in found})
    return found


def _knock(addresses: dict[int, str]) -> dict[int, str]:
    """``{rank: 'alive' | 'gone' | 'lost'}`` for each ``rank: 'host:port'`` of
    :func:`answer_peers`, all asked at once, in :data:`STORE_WAIT` seconds."""
    answers: dict[int, str] = {}

    def knock(r: int, address: str) -> None:
        host, _, port = address.rpartition(':')
        try:
            socket.create_connection((host, int(port)), timeout=STORE_WAIT - 0.5).close()
            answers[r] = 'alive'
        except ConnectionRefusedError:
            answers[r] = 'gone'
        except (OSError, ValueError):
            answers[r] = 'lost'

    threads = [threading.Thread(target=knock, args=item, daemon=True) for item in addresses.items()]
    for t in threads:
        t.start()
    end = time.monotonic() + STORE_WAIT
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    return {r: answers.get(r, 'lost') for r in addresses}


def _ranks(ranks: list[int], world: int) -> str:
    """``'rank 1 of 2'``, ``'ranks 1, 3 of 8'``."""
    return f'rank{"s" if len(ranks) > 1 else ""} {", ".join(map(str, ranks))} of {world}'


def _lost_line(kind: str, rank: int, world: int, found: Optional[dict[int, str]]) -> str:
    """The line for a collective that failed (``kind``) on ``rank``, given how the others stand
    (:func:`_others`; ``None``: the store did not answer)."""
    if found is None:
        address = ':'.join(map(str, _store_address() or ('?', '?')))
        if os.environ.get('TORCHELASTIC_USE_AGENT_STORE') == 'True':
            return (
                f"torchrun's agent that held the rendezvous store ({address}) is gone (its machine "
                f'lost, or the agent killed); rank {rank} of {world} stops too'
            )
        if rank != 0:
            return (
                f'rank 0 of {world} is gone (it held the rendezvous store, {address}, which no longer '
                f'answers: killed, or its machine lost)'
            )
        return f'a peer of rank 0 of {world} is gone, and the rendezvous store no longer answers'
    where = {
        how: sorted(r for r, h in found.items() if h == how) for how in ('gone', 'lost', 'alive', 'silent')
    }
    said = {r: note for r, note in found.items() if note not in where and 'it lost a peer' not in note}
    if where['gone']:
        return _gone(where['gone'], world, 'ended without a word: killed')
    if where['lost']:
        return f'{_ranks(where["lost"], world)} cannot be reached (the machine lost, or its network)'
    if said:
        r, note = min(said.items())
        return f'rank {r} of {world} stopped ({note}: its own output says more)'
    if kind == 'timeout' and (where['alive'] or where['silent']):
        return (
            f'{_ranks(where["alive"] or where["silent"], world)} did not answer within the collective '
            f'timeout (env_cfg.dist_cfg.timeout = {_TIMEOUT[0]:g} s: hung, or busy with something the '
            f'others do not wait for)'
        )
    if where['silent']:
        return _gone(where['silent'], world, 'ended without a word: killed, or the machine lost')
    return f'a peer of rank {rank} of {world} is gone (each one left a note or answers)'


def _gone(ranks: list[int], world: int, how: str) -> str:
    """``'rank 1 of 2 is gone (its process HOW)'``, ``'ranks 1, 3 of 8 are gone (their ...)'``."""
    if len(ranks) > 1:
        return f'{_ranks(ranks, world)} are gone (their processes {how})'
    return f'{_ranks(ranks, world)} is gone (its process {how})'


def resume_after_restart(cfg: Config) -> bool:
    """Under ``torchrun --max-restarts``, a worker started again (``TORCHELASTIC_RESTART_COUNT``
    > 0) continues from the last checkpoint in ``cfg.work_dir`` (``resume=True``,
    ``load_from=None``, one log line) when there is one and it is newer than a checkpoint the
    command named (``--resume CKPT``: resuming that one again would repeat the epochs since).
    Returns whether it did; without a checkpoint the attempt starts as the first one did."""
    if 'TORCHELASTIC_RESTART_COUNT' not in os.environ:  # not under torchrun
        return False
    if cfg.get('launcher', 'none') != 'none' and not dist.is_initialized():
        start_distributed(cfg.launcher, collective_timeout(cfg))  # CUDA: mmengine's group, started now
    # the largest over the ranks: an agent whose own workers did not fail restarts them for the
    # new round without counting a restart (torch 2.15), and all ranks must resume alike
    restart = int(max_over_ranks([int(os.environ['TORCHELASTIC_RESTART_COUNT'] or 0)])[0])
    if restart < 1:
        return False
    out_dir = ((cfg.get('default_hooks') or {}).get('checkpoint') or {}).get('out_dir')
    found = [
        p for p in resume_candidates(cfg.work_dir, checkpoint_folder(cfg.work_dir, out_dir)) if osp.isfile(p)
    ]
    named = cfg.get('load_from') if cfg.get('resume') else None
    if found and named and osp.isfile(named) and osp.getmtime(named) >= osp.getmtime(found[0]):
        found = []
    if found:
        cfg.resume, cfg.load_from = True, None
        said = f'elastic restart {restart} (torchrun --max-restarts): resuming from the last checkpoint in '
    else:
        said = f'elastic restart {restart}: no newer checkpoint; starting as the first attempt did, in '
    if is_main_process():
        print_log(said + cfg.work_dir, logger='current')
    return bool(found)
