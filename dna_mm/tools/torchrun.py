"""``python -m dna_mm.tools.torchrun [torchrun options] SCRIPT [ARGS...]``: torchrun
(``torch.distributed.run``, the same options) whose exit status says when a signal stopped the run.

torchrun's agent ends with status 1 whatever stopped it: a ``SIGTERM`` it handled (``scancel``,
preemption; it forwards the signal to the workers, which save and exit 143) raises its
``SignalException``, and a worker killed by a signal is a ``ChildFailedError``. A job script that
requeues on ``[ $? -ge 128 ]`` (what a shell and ``srun`` report for a process a signal ended)
then cannot tell a preemption from a crash. Here (:func:`exit_status`):

* the agent stopped by signal N → ``128 + N`` (143 for ``SIGTERM``, 138 for ``SIGUSR1``);
* failed workers → the status of the first one to fail (torchrun's "root cause"): ``128 + N``
  when signal N stopped it (killed: torch's exit code ``-N``; or saved and exited ``128 + N``,
  :class:`~dna_mm.engine.PreemptionHook`), else its own status where it is one of 1..127
  (dna_mm's tools: 1 a crash or a lost peer, 2 a mistake in the input), else 1. The first, not
  all of them: which others the agent counts depends on when it looked (a rank that stopped on
  the lost one's account is counted or not), and the first is what ``srun`` reports too (the
  highest status: ``128 + N`` above the others' 1);
* success → 0.

A mistake in the input (the first rank to fail exited 2) is printed once, as the ranks would
print it, in place of torchrun's failure report (:mod:`dna_mm.tools.rank_errors`).

Killed outright (``kill -9``, the out-of-memory killer), the agent cannot tell its ranks: each
gets ``SIGTERM`` from the kernel instead, saves its iteration and exits 143
(:func:`~dna_mm.utils.parent_death.follow_torchrun_agent`; the agent's pid travels to them in
``DNA_MM_TORCHRUN_AGENT_PID``). dna_mm's tools under plain torchrun do the same (their parent is
taken to be the agent); other scripts would train on, with no agent.

The agent also handles ``SIGUSR1`` (SLURM's ``--signal=USR1@T`` before the time limit; torchrun
forwards the signals it handles to the workers), unless ``--signals-to-handle`` or
``PET_SIGNALS_TO_HANDLE`` names others.

Elastic restarts (``--max-restarts``). torch 2.15's agent keeps one store for all the rounds of
its rendezvous, and the workers' ``env://`` start no longer puts each attempt under its own
prefix: restarted workers read the last attempt's addresses and fail to connect ("Connection
refused"). With the c10d rendezvous (``--rdzv-backend=c10d``, or one machine without
``--master-port``) each round gets a new store at a new port where
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, which is set here unless the environment sets it; the
static rendezvous (``--master-port``, or ``--nnodes`` > 1 without ``--rdzv-backend``) cannot, so
``--max-restarts`` with it is refused in one line.

One machine without ``--master-port`` (nor ``--rdzv-backend`` / ``--rdzv-endpoint``) takes the
c10d rendezvous on a free local port on every torch (:func:`local_rendezvous`): torch 2.15 does
so itself, torch 2.6–2.14 take the static one on port 29500 (two runs on one machine then
collide, and restarts fail as above).

A mistake in torchrun's own options is one line and exit status 2 before anything starts: a
``--nproc-per-node`` that is not a number of processes >= 1 (nor ``auto`` / ``cpu`` / ``gpu``
where it can be; :func:`nproc_mistake`), and a rendezvous port that another process holds (two
runs with one ``--master-port``: the line names the port and how to pick another; :func:`port_in_use`).

The module imports torch alone (the agent does not train); ``python -m`` imports the dna_mm
package first, a few seconds at the agent's start.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import uuid
from typing import Optional

from ..utils.parent_death import AGENT_PID_VAR
from .rank_errors import FOLDER_VAR, told_lines

#: the signals the agent handles and forwards: torchrun's own and SIGUSR1
SIGNALS = 'SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1'


def signal_status(code: int) -> Optional[int]:
    """``128 + N`` for a process exit code that says signal N stopped it (``-N``: killed, as
    Python's ``subprocess`` reports it; ``128 + N``: exited so, as a shell and dna_mm's preemption
    do), else ``None``."""
    n = -code if code < 0 else code - 128 if code > 128 else 0
    return 128 + n if 0 < n < signal.NSIG else None


def exit_status(err: BaseException) -> int:
    """The exit status for torchrun's agent ending on ``err`` (module docstring)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if isinstance(err, SignalException):
        return 128 + int(err.sigval)
    if isinstance(err, ChildFailedError) and err.failures:
        _, first = err.get_first_failure()
        return signal_status(first.exitcode) or (first.exitcode if 0 < first.exitcode < 128 else 1)
    return 1


def _given(options: list[str], name: str) -> bool:
    """Whether torchrun option ``name`` (``'master_port'``) is on the command line (``--master-port``
    or ``--master_port``, ``=VALUE`` or not) or in its environment variable (``PET_MASTER_PORT``)."""
    flags = {f'--{name}', f'--{name.replace("_", "-")}'}
    return any(o.split('=', 1)[0] in flags for o in options) or f'PET_{name.upper()}' in os.environ


def local_rendezvous(argv: list[str]) -> list[str]:
    """``argv`` with ``--rdzv-backend=c10d --rdzv-endpoint=localhost:0 --rdzv-id=<new>`` in
    front where torchrun runs on one machine with neither ``--master-port`` nor a rendezvous
    named (module docstring; ``--standalone`` does the same itself); else ``argv``."""
    from torch.distributed.run import parse_args, parse_min_max_nnodes

    args = parse_args(argv)
    options = argv[: len(argv) - len(args.training_script_args) - 1]  # before the script
    _, max_nodes = parse_min_max_nnodes(args.nnodes)
    named = any(_given(options, n) for n in ('master_port', 'rdzv_backend', 'rdzv_endpoint', 'standalone'))
    if max_nodes > 1 or named:
        return argv
    return ['--rdzv-backend=c10d', '--rdzv-endpoint=localhost:0', f'--rdzv-id={uuid.uuid4()}', *argv]


def static_restarts(argv: list[str]) -> Optional[str]:
    """The line refusing torchrun options that restart workers under the static rendezvous
    (module docstring), else ``None``."""
    from torch.distributed.run import parse_args, parse_min_max_nnodes

    args = parse_args(argv)
    _, max_nodes = parse_min_max_nnodes(args.nnodes)
    static = args.rdzv_backend == 'static' and not args.standalone and not args.rdzv_endpoint
    if args.max_restarts > 0 and static and (args.master_port is not None or max_nodes > 1):
        return (
            f'--max-restarts={args.max_restarts} needs the c10d rendezvous: the static one (--master-port, '
            f'or --nnodes > 1 without --rdzv-backend) hands restarted workers the last attempt\'s '
            f'addresses; use --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT (one machine: leave out '
            f'--master-port)'
        )
    return None


#: the ``--nproc-per-node`` values other than a number that torchrun takes
NPROC_WORDS = ('auto', 'cpu', 'gpu')


def nproc_mistake(argv: list[str]) -> Optional[str]:
    """The line refusing ``--nproc-per-node`` of ``argv`` (torch: a ``ValueError`` or a bare
    ``AssertionError`` traceback) when it is not a whole number >= 1 nor a word torchrun takes
    here (``gpu`` without CUDA), else ``None``."""
    from torch.distributed.run import determine_local_world_size, parse_args

    value = str(parse_args(argv).nproc_per_node).strip()
    expected = 'the number of processes on this machine, a whole number >= 1'
    try:
        count = determine_local_world_size(value)
    except ValueError as err:
        if value in NPROC_WORDS:  # gpu without CUDA
            return f'--nproc-per-node={value}: {str(err).rstrip(".")} here; give {expected}'
        count = 0
    if count >= 1:
        return None
    return f'--nproc-per-node={value}: expected {expected} (or {", ".join(NPROC_WORDS)})'


def port_in_use(err: BaseException, argv: list[str]) -> Optional[str]:
    """The line for torchrun's agent that could not listen on the rendezvous port (``err``: torch's
    ``DistNetworkError`` naming ``EADDRINUSE``; two runs on one machine with one ``--master-port``),
    else ``None``."""
    import re

    from torch.distributed.run import parse_args

    text = str(err)
    if 'EADDRINUSE' not in text and 'address already in use' not in text.lower():
        return None
    found = re.search(r'port: (\d+)', text)
    port = found.group(1) if found else '?'
    args = parse_args(argv)
    if args.rdzv_endpoint and args.rdzv_backend != 'static':
        flag, example = f'--rdzv-endpoint={args.rdzv_endpoint}', ''
    else:
        flag = f'--master-port={port} (PORT of tools/dist_train.sh, dist_test.sh)'
        example = f' (PORT={int(port) + 1})' if port.isdigit() else ''
    return (
        f'{flag}: port {port} is in use on this machine (another run, or another program); choose a '
        f'free port{example}, or on one machine leave it out: a free one is picked'
    )


def main(argv: Optional[list[str]] = None) -> None:
    from torch.distributed import DistNetworkError
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault('PET_SIGNALS_TO_HANDLE', SIGNALS)
    os.environ.setdefault('TORCH_DISABLE_SHARE_RDZV_TCP_STORE', '1')
    os.environ[AGENT_PID_VAR] = str(os.getpid())  # the ranks stop when this agent ends
    argv = local_rendezvous(argv)
    refused = nproc_mistake(argv) or static_restarts(argv)
    if refused:
        print(f'torchrun: error: {refused}', file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix='dna_mm_ranks_') as told:
        os.environ[FOLDER_VAR] = told  # a rank's mistake in the input: printed once, here
        try:
            torchrun(argv)
        except SignalException as err:
            status = exit_status(err)
            name = signal.Signals(err.sigval).name
            print(
                f'torchrun: stopped by {name}; the workers were told; exit status {status}', file=sys.stderr
            )
            sys.exit(status)
        except ChildFailedError as err:
            status = exit_status(err)
            mistake = told_lines(told) if status == 2 else None
            report = mistake if mistake else str(err).strip()  # a crash: torchrun's report
            print(f'{report}\ntorchrun: exit status {status}', file=sys.stderr)
            sys.exit(status)
        except DistNetworkError as err:  # the rendezvous store's port: before any worker started
            busy = port_in_use(err, argv)
            if busy is None:
                raise
            print(f'torchrun: error: {busy}', file=sys.stderr)
            sys.exit(2)


if __name__ == '__main__':
    main()
