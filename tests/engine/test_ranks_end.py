"""Many ranks: a rank that dies stops the others at once with one line naming it, however the
ranks were started (by hand, as ``srun`` starts them, by torchrun); the launchers return
``128 + N`` for a run that signal N stopped; torchrun's elastic restarts resume from the last
checkpoint. The collective timeout comes from the config.

Real processes throughout: 2 gloo ranks of ``tools/train.py`` on the tiny demo (two data-loader
workers each, as the demo ships them) on 127.0.0.1, a real ``kill -9`` of one rank, a real
``SIGTERM`` to torchrun's agent. Each test bounds its waits and asserts the exit status and the
time from the event to the exit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
from conftest import DEMO_CONFIG, REPO, free_port, run_main, tiny_run_options
from mmengine.config import Config
from processes import REACH_S, Session, steps, wait_for

from dna_mm.config.prepare import prepare_cfg
from dna_mm.engine.distributed import DEFAULT_TIMEOUT, collective_timeout
from dna_mm.errors import ConfigError
from dna_mm.tools.torchrun import exit_status, local_rendezvous, signal_status, static_restarts

#: seconds the other ranks may take to end after a rank is killed (the issue's bound)
END_WITHIN_S = 30
#: torch's environment of a rank started by hand or by torchrun: not inherited by a run that
#: sets its own
TORCH_VARS = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'LOCAL_WORLD_SIZE')

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------------------------------------
# the collective timeout from the config


def test_the_collective_timeout_comes_from_the_config_with_a_default() -> None:
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl', timeout=120))))
    assert collective_timeout(cfg) == 120.0
    bare = Config(dict(model=dict(type='X')))
    assert collective_timeout(bare) == DEFAULT_TIMEOUT == 300
    assert collective_timeout(Config(dict(env_cfg=dict(dist_cfg=dict(timeout=None))))) == 300
    assert bare.env_cfg.dist_cfg.timeout == 300  # what mmengine's init_dist passes on (NCCL)
    for name in ('default_runtime.py', 'default_runtime_det.py'):
        runtime = Config.fromfile(str(REPO / 'configs' / '_base_' / name))
        assert runtime.env_cfg.dist_cfg.timeout == (600 if 'det' in name else 300)
    imagenet = Config.fromfile(str(REPO / 'configs' / 'imagenet' / '_base_' / 'default_runtime.py'))
    assert imagenet.env_cfg.dist_cfg.timeout == 300


@pytest.mark.parametrize('value', [0, -5, 'soon', True, [300]])
def test_a_bad_collective_timeout_is_one_line_naming_the_key(value) -> None:
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(timeout=value))))
    with pytest.raises(ConfigError, match=r'^env_cfg\.dist_cfg\.timeout=.*a number of seconds > 0'):
        prepare_cfg(cfg, 'x.py')


def test_a_bad_collective_timeout_stops_train_py_with_one_line(tmp_path) -> None:
    opts = ['--cfg-options', 'env_cfg.dist_cfg.timeout=0']
    proc = run_main(['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path), *opts], check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (
        'train.py: error: env_cfg.dist_cfg.timeout=0: the collective timeout is a number of seconds > 0'
        in (proc.stderr)
    )
    assert 'Traceback' not in proc.stderr


def test_a_signal_stop_is_128_plus_n_whatever_form_it_takes() -> None:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    assert signal_status(-9) == 137 and signal_status(143) == 143 and signal_status(-10) == 138
    assert signal_status(1) is None and signal_status(2) is None and signal_status(0) is None
    assert exit_status(SignalException('agent', sigval=signal.SIGTERM)) == 143
    assert exit_status(SignalException('agent', sigval=signal.SIGUSR1)) == 138

    def failed(*codes: int) -> ChildFailedError:  # the first code fails first
        failures = {}
        for rank, code in enumerate(codes):
            failures[rank] = ProcessFailure(
                local_rank=rank, pid=100 + rank, exitcode=code, error_file='<N/A>'
            )
            failures[rank].timestamp = 1000 + rank
        return ChildFailedError('tools/train.py', failures)

    assert exit_status(failed(-9, 1)) == 137  # a rank killed; the other stopped on its account
    assert exit_status(failed(143, 143)) == 143 and exit_status(failed(1, -15)) == 1
    assert exit_status(failed(2)) == 2 and exit_status(failed(255)) == 1


def test_torchrun_refuses_restarts_under_the_static_rendezvous() -> None:
    line = static_restarts(['--nproc_per_node=2', '--max-restarts=1', '--master-port=29500', 'x.py'])
    assert line and line.startswith('--max-restarts=1 needs the c10d rendezvous')
    c10d = ['--rdzv-backend=c10d', '--rdzv-endpoint=127.0.0.1:29400']
    assert static_restarts(['--nnodes=2', '--max-restarts=1', *c10d, 'x.py']) is None
    assert static_restarts(['--nnodes=2', '--node-rank=0', '--master-port=29500', 'x.py']) is None
    assert static_restarts(['--nnodes=2', '--max-restarts=1', 'x.py'])


@pytest.mark.parametrize(
    'options',
    [
        ['--nproc_per_node=2', '--max-restarts=1'],
        ['--nproc-per-node', '2', '--max-restarts=1'],
        ['--nproc_per_node=2'],
    ],
)
def test_one_machine_without_a_port_takes_the_c10d_rendezvous_on_every_torch(options: list[str]) -> None:
    """torch 2.15 takes it itself; torch 2.6-2.14 would take the static one on port 29500 (two
    runs on one machine collide, restarts fail): the c10d one on a free port on all of them."""
    argv = local_rendezvous([*options, 'x.py', '--master-port=7'])  # the script's own argument
    assert argv[:2] == ['--rdzv-backend=c10d', '--rdzv-endpoint=localhost:0'], argv
    assert argv[2].startswith('--rdzv-id=') and argv[3:] == [*options, 'x.py', '--master-port=7']
    assert static_restarts(argv) is None


@pytest.mark.parametrize(
    'options',
    [
        ['--master-port=29500'],
        ['--master_port', '29500'],
        ['--nnodes=2'],
        ['--rdzv-backend=static'],
        ['--rdzv_endpoint=127.0.0.1:29400', '--rdzv-backend=c10d'],
        ['--standalone'],
    ],
)
def test_a_rendezvous_the_command_names_is_kept(options: list[str]) -> None:
    argv = [*options, '--nproc_per_node=2', 'x.py']
    assert local_rendezvous(argv) == argv


def test_a_port_from_the_environment_is_kept(monkeypatch) -> None:
    monkeypatch.setenv('PET_MASTER_PORT', '29511')
    assert local_rendezvous(['--nproc_per_node=2', 'x.py']) == ['--nproc_per_node=2', 'x.py']


# ---------------------------------------------------------------------------------------------
# describe_lost_rank on real gloo groups: a rank killed, one that noted its end, one that hangs


def _peer(rank: int, world: int, port: int, out: str, case: str) -> None:
    """One rank of ``world`` (gloo on 127.0.0.1): the last rank is killed (``killed``), ends on
    an error it notes (``noted``) or hangs (``hung``, a 3 s collective timeout) after one
    all-reduce; the others meet it in the next all-reduce and write ``describe_lost_rank``'s line
    and how long it took to ``out/rank<r>.json``."""
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    os.environ.update(LOCAL_RANK=str(rank), OMP_NUM_THREADS='1', GLOO_SOCKET_IFNAME='lo')
    import torch
    import torch.distributed as dist

    from dna_mm.config.prepare import shutdown_distributed
    from dna_mm.engine.distributed import describe_lost_rank, init_cpu_group, note_rank_end

    init_cpu_group('pytorch', timeout=3 if case == 'hung' else 60)
    dist.all_reduce(torch.ones(1))
    if rank == world - 1:
        if case == 'killed':
            os.kill(os.getpid(), signal.SIGKILL)
        if case == 'noted':
            note_rank_end('ValueError: boom')
            shutdown_distributed()
            return
        time.sleep(60)  # hung
    time.sleep(0.5)
    start = time.time()
    try:
        dist.all_reduce(torch.ones(1))
        line = None
    except RuntimeError as err:
        line = describe_lost_rank(err)
    took = time.time() - start
    shutdown_distributed()
    Path(out, f'rank{rank}.json').write_text(
        json.dumps(dict(line=line, took=took, ended=time.time() - start))
    )


@pytest.mark.parametrize(
    'case, world, expected',
    [
        ('noted', 2, 'rank 1 of 2 stopped (ValueError: boom: its own output says more)'),
        (
            'hung',
            2,
            'rank 1 of 2 did not answer within the collective timeout (env_cfg.dist_cfg.timeout = 3 s',
        ),
        pytest.param(  # three processes: ~25 s on 2 busy cores
            'killed',
            3,
            'rank 2 of 3 is gone (its process ended without a word: killed)',
            marks=pytest.mark.slow,
        ),
    ],
)
def test_the_line_names_the_lost_rank_and_how_it_ended(tmp_path, case, world, expected) -> None:
    import torch.multiprocessing as mp

    ctx, port = mp.get_context('spawn'), free_port()
    procs = [ctx.Process(target=_peer, args=(r, world, port, str(tmp_path), case)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        for p in procs[:-1]:
            p.join(120)
            assert p.exitcode == 0, f'a survivor ended with {p.exitcode}'
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(30)
    for r in range(world - 1):
        result = json.loads((tmp_path / f'rank{r}.json').read_text())
        took, ended = result['took'], result['ended']
        print(f'\n{case}, rank {r}: {result["line"]!r}, named in {took:.1f} s, ended in {ended:.1f} s')
        assert result['line'] and result['line'].startswith(expected), result
        assert (
            result['ended'] < (3 if case == 'hung' else 0) + 10
        )  # the store's and the peers' answers are bounded


# ---------------------------------------------------------------------------------------------
# real runs: helpers


def _options(root: Path, epochs: int) -> list[str]:
    """The demo at tiny settings, two loader workers (the demo's own), no validation, a
    checkpoint every epoch: ``epochs`` of 2 iterations on each of 2 ranks."""
    opts = [
        o for o in tiny_run_options(root, epochs=epochs) if not o.startswith('train_dataloader.num_workers')
    ]
    return [
        *opts,
        'train_dataloader.num_workers=2',
        'default_hooks.checkpoint.interval=1',
        'val_dataloader=None',
        'val_cfg=None',
        'val_evaluator=None',
    ]


def _env(**values: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in TORCH_VARS and not k.startswith(('SLURM_', 'TORCHELASTIC_', 'PET_'))
    }
    return {**env, 'OMP_NUM_THREADS': '1', 'GLOO_SOCKET_IFNAME': 'lo', **values}


def _sessions_left(pids: list[int], within: float = 8.0) -> list[str]:
    """The processes still alive in the sessions of ``pids`` after ``within`` seconds (the
    killed rank's loader workers notice their parent's death within a few seconds)."""
    deadline = time.time() + within
    while True:
        left = [p for sid in pids for p in _session(sid)]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.2)


def _proc_fields(pid: str) -> Optional[list[str]]:
    """``state ppid pgrp session ...`` of ``/proc/<pid>/stat`` (``None``: gone)."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return None
    return stat[stat.rindex(')') + 2 :].split()


def _session(sid: int) -> list[str]:
    """``pid: command`` of the live processes of session ``sid``."""
    found = []
    for entry in Path('/proc').iterdir():
        fields = _proc_fields(entry.name) if entry.name.isdigit() else None
        if fields and int(fields[3]) == sid and fields[0] not in 'ZX':
            try:
                cmd = (entry / 'cmdline').read_bytes().replace(b'\0', b' ').decode()[:100]
            except OSError:
                continue
            found.append(f'{entry.name}: {cmd}')
    return found


def _ranks_of(agent: int) -> dict[int, int]:
    """``{RANK: pid}`` of torchrun's workers under the agent ``agent`` (its children with
    ``tools/train.py`` on the command line)."""
    found = {}
    for entry in Path('/proc').iterdir():
        fields = _proc_fields(entry.name) if entry.name.isdigit() else None
        if not fields or int(fields[1]) != agent:
            continue
        try:
            cmd = (entry / 'cmdline').read_bytes()
            env = dict(
                kv.split('=', 1)
                for kv in (entry / 'environ').read_bytes().decode(errors='replace').split('\0')
                if '=' in kv
            )
        except OSError:
            continue
        if b'tools/train.py' in cmd and 'RANK' in env:
            found[int(env['RANK'])] = int(entry.name)
    return found


def _lines(text: str, words: str) -> list[str]:
    return [ln for ln in text.splitlines() if words in ln]


# ---------------------------------------------------------------------------------------------
# (a) ranks started by hand or as srun starts them: kill -9 of one rank


def _start_ranks(tmp_path: Path, root: Path, launcher: str, epochs: int) -> tuple[list[Session], Path]:
    """Two ranks of ``tools/train.py``, each in its own session, started with ``launcher``'s
    environment: ``slurm`` (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NODELIST, as
    ``srun`` sets them) or ``pytorch`` (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT by hand)."""
    port, work = str(free_port()), tmp_path / 'work'
    cmd = [sys.executable, 'tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--launcher', launcher]
    procs = []
    for rank in (0, 1):
        if launcher == 'slurm':
            env = _env(
                SLURM_PROCID=str(rank),
                SLURM_NTASKS='2',
                SLURM_LOCALID=str(rank),
                SLURM_NODELIST='localhost',
                MASTER_PORT=port,
            )
        else:
            env = _env(
                RANK=str(rank),
                WORLD_SIZE='2',
                LOCAL_RANK=str(rank),
                MASTER_ADDR='127.0.0.1',
                MASTER_PORT=port,
            )
        procs.append(Session(tmp_path, f'rank{rank}', [*cmd, '--cfg-options', *_options(root, epochs)], env))
    return procs, work


def _kill_one_rank(tmp_path: Path, root: Path, launcher: str, killed: int) -> None:
    ranks, work = _start_ranks(tmp_path, root, launcher, epochs=100)
    try:
        wait_for(lambda: steps(work) >= 2, ranks, 'rank 0 trained 2 steps')
        victim, survivor = ranks[killed], ranks[1 - killed]
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        code = survivor.end(END_WITHIN_S + 60)
        took = survivor.ended_at - killed_at
        assert victim.end(10) == -signal.SIGKILL
        text = survivor.text()
        print(f'\n{launcher}, kill -9 of rank {killed}: rank {1 - killed} exit {code} after {took:.1f} s')
        assert code == 1, text[-4000:]
        named = _lines(text, f'rank {killed} of 2')
        assert len(named) == 1 and 'stopped:' in named[0], text[-4000:]
        print(named[0])
        assert 'Traceback' not in text and 'frame #' not in text, text[-4000:]  # nor a C++ stack
        assert took < END_WITHIN_S, text[-4000:]
        assert not _sessions_left([r.pid for r in ranks])
    finally:
        for r in ranks:
            r.kill_all()


def test_a_killed_rank_stops_the_other_with_one_line_naming_it_srun_style(tiny_video_set, tmp_path) -> None:
    _kill_one_rank(tmp_path, tiny_video_set, 'slurm', killed=1)


@pytest.mark.slow
@pytest.mark.parametrize('killed', [1, 0], ids=['rank-1', 'rank-0 (it held the store)'])
def test_a_killed_rank_stops_the_other_with_one_line_naming_it_by_hand(
    tiny_video_set, tmp_path, killed
) -> None:
    _kill_one_rank(tmp_path, tiny_video_set, 'pytorch', killed=killed)


# ---------------------------------------------------------------------------------------------
# tools/slurm_train.sh: srun's status is the script's (no SLURM here: a stand-in srun)

#: a stand-in ``srun``: ``--ntasks=N`` local tasks of the command with SLURM's variables (one
#: host), and srun's exit status: the highest of the tasks' statuses, ``128 + N`` for a task a
#: signal N ended. Like srun it outlives the signals that scancel sends the job's processes.
FAKE_SRUN = """#!{python}
import os, signal, subprocess, sys

STOPS = (signal.SIGTERM, signal.SIGUSR1)


def task_start():
    for sig in STOPS:  # an ignored signal stays ignored across exec
        signal.signal(sig, signal.SIG_DFL)


for sig in STOPS:
    signal.signal(sig, signal.SIG_IGN)
args = sys.argv[1:]
ntasks = int(next(a.split('=', 1)[1] for a in args if a.startswith('--ntasks=')))
first = next(i for i, a in enumerate(args) if not a.startswith('-') and args[i - 1] != '-p')
tasks = []
for rank in range(ntasks):
    slurm = dict(SLURM_PROCID=rank, SLURM_NTASKS=ntasks, SLURM_LOCALID=rank, SLURM_NODELIST='localhost')
    env = dict(os.environ, **{{k: str(v) for k, v in slurm.items()}})
    tasks.append(subprocess.Popen(args[first:], env=env, preexec_fn=task_start))
codes = [t.wait() for t in tasks]
sys.exit(max(c if c >= 0 else 128 - c for c in codes))
"""


def test_slurm_train_sh_exits_143_when_scancel_stops_its_tasks(tiny_video_set, tmp_path) -> None:
    (srun := tmp_path / 'bin' / 'srun').parent.mkdir()
    srun.write_text(FAKE_SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    work = tmp_path / 'work'
    env = _env(PATH=f'{srun.parent}:{os.environ["PATH"]}', GPUS='2', MASTER_PORT=str(free_port()))
    env['PYTHON'] = sys.executable
    cmd = ['bash', 'tools/slurm_train.sh', 'cpu', 'ranks', DEMO_CONFIG, str(work)]
    job = Session(tmp_path, 'job', [*cmd, '--cfg-options', *_options(tiny_video_set, 100)], env)
    try:
        wait_for(lambda: steps(work) >= 3, [job], 'training')
        os.killpg(job.pid, signal.SIGTERM)  # scancel: SIGTERM to every process of the job step
        sent_at = time.time()
        code = job.end(END_WITHIN_S + 60)
        took = job.ended_at - sent_at
        text = job.text()
        print(f'\nslurm_train.sh (2 tasks), SIGTERM to the step: exit {code} after {took:.1f} s')
        assert code == 143 and took < END_WITHIN_S, text[-4000:]
        assert _lines(text, 'preempted by SIGTERM: saved iteration'), text[-4000:]
        assert Path((work / 'last_checkpoint').read_text().strip()).name.startswith('preempted_iter_')
        assert not _sessions_left([job.pid])
    finally:
        job.kill_all()


# ---------------------------------------------------------------------------------------------
# (b, c) under torchrun (tools/dist_train.sh): kill -9 of a rank, SIGTERM to the agent


#: how a user starts ``tools/dist_train.sh``: from a checkout, or as an installed package's tool
#: (``dna_mm dist_train.sh``, the console script, alike)
LAUNCHERS = {
    'bash': ['bash', 'tools/dist_train.sh'],
    'dna_mm': [sys.executable, '-m', 'dna_mm.tools', 'dist_train.sh'],
}


def _dist_train(tmp_path: Path, root: Path, epochs: int, launcher: str = 'bash') -> tuple[Session, Path]:
    """``bash tools/dist_train.sh DEMO 2 ...`` (torchrun's agent and 2 ranks; or ``launcher``, one
    of :data:`LAUNCHERS`) in its own session."""
    work = tmp_path / 'work'
    cmd = [*LAUNCHERS[launcher], DEMO_CONFIG, '2', '--work-dir', str(work)]
    env = _env(PORT=str(free_port()), PYTHON=sys.executable)
    return Session(tmp_path, 'launcher', [*cmd, '--cfg-options', *_options(root, epochs)], env), work


def _agent(launcher: Session) -> int:
    """The pid of torchrun's agent: ``dist_train.sh`` execs it (and ``python -m dna_mm.tools``
    execs ``bash``), so the launcher's own."""
    return launcher.pid


@pytest.mark.slow
def test_a_killed_rank_under_torchrun_stops_the_launcher_at_once(tiny_video_set, tmp_path) -> None:
    launcher, work = _dist_train(tmp_path, tiny_video_set, epochs=100)
    try:
        wait_for(lambda: steps(work) >= 2 and len(_ranks_of(_agent(launcher))) == 2, [launcher], 'training')
        os.kill(_ranks_of(_agent(launcher))[1], signal.SIGKILL)
        killed_at = time.time()
        code = launcher.end(END_WITHIN_S + 60)
        took = launcher.ended_at - killed_at
        text = launcher.text()
        print(f'\ndist_train.sh, kill -9 of rank 1: launcher exit {code} after {took:.1f} s')
        assert code != 0 and took < END_WITHIN_S, text[-4000:]
        named = _lines(text, 'rank 1 of 2 is gone')
        assert named, text[-4000:]
        print(named[0])
        assert not _sessions_left([launcher.pid])
    finally:
        launcher.kill_all()


@pytest.mark.slow
def test_a_killed_torchrun_agent_stops_its_ranks_saved(tiny_video_set, tmp_path) -> None:
    """``kill -9`` of torchrun's agent (nothing of it runs; plain torchrun's ranks would train on,
    in sessions of their own): each rank gets ``SIGTERM`` from the kernel, both save one iteration
    and end, their loader workers with them."""
    launcher, work = _dist_train(tmp_path, tiny_video_set, epochs=100)
    try:
        wait_for(lambda: steps(work) >= 2 and len(_ranks_of(_agent(launcher))) == 2, [launcher], 'training')
        ranks = list(_ranks_of(_agent(launcher)).values())
        os.kill(_agent(launcher), signal.SIGKILL)
        killed_at = time.time()
        assert launcher.end(10) == -signal.SIGKILL
        left = _sessions_left(ranks, within=END_WITHIN_S)
        took = time.time() - killed_at
        text = launcher.text()  # the ranks write to the agent's output
        print(f"\ndist_train.sh, kill -9 of torchrun's agent: both ranks ended within {took:.1f} s")
        assert not left, text[-4000:]
        told = _lines(text, "SIGTERM (torchrun's agent ended): saving at the end of this iteration")
        assert len(told) == 2, _lines(text, 'SIGTERM')  # one line from each rank
        saved = _lines(text, "preempted by SIGTERM (torchrun's agent ended): saved iteration")
        assert saved, text[-4000:]
        print(saved[0])
        assert Path((work / 'last_checkpoint').read_text().strip()).name.startswith('preempted_iter_')
    finally:
        launcher.kill_all()


@pytest.mark.slow
@pytest.mark.parametrize('started_by', sorted(LAUNCHERS))
@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGUSR1], ids=['SIGTERM', 'SIGUSR1'])
def test_a_signal_to_torchruns_agent_saves_both_ranks_and_exits_128_plus_n(
    tiny_video_set, tmp_path, signum, started_by
) -> None:
    """``scancel`` / preemption (SIGTERM), SLURM's ``--signal=USR1@T`` (SIGUSR1), to the process
    the user started (the agent): it forwards the signal to the ranks, which save; the launcher
    exits 143 / 138."""
    launcher, work = _dist_train(tmp_path, tiny_video_set, epochs=100, launcher=started_by)
    try:
        wait_for(lambda: steps(work) >= 3, [launcher], 'training')
        os.kill(_agent(launcher), signum)
        sent_at = time.time()
        code = launcher.end(END_WITHIN_S + 60)
        took = launcher.ended_at - sent_at
        text = launcher.text()
        name = signal.Signals(signum).name
        print(
            f'\n{" ".join(LAUNCHERS[started_by][-2:])}, {name} to the agent: exit {code} after {took:.1f} s'
        )
        assert code == 128 + signum, text[-4000:]
        assert took < END_WITHIN_S, text[-4000:]
        saved = _lines(text, f'preempted by {name}: saved iteration')
        assert len(saved) >= 1, text[-4000:]  # rank 0's logger; both ranks stopped at it
        pointer = (work / 'last_checkpoint').read_text().strip()
        assert Path(pointer).name.startswith('preempted_iter_') and Path(pointer).is_file()
        assert 'Traceback' not in text, text[-4000:]
        assert not _sessions_left([launcher.pid])
    finally:
        launcher.kill_all()


# ---------------------------------------------------------------------------------------------
# (d) torchrun --max-restarts: the restarted ranks resume from the last checkpoint


def _torchrun(tmp_path: Path, name: str, options: list[str], work: Path, root: Path, epochs: int) -> Session:
    """``python -m dna_mm.tools.torchrun OPTIONS tools/train.py DEMO --launcher pytorch ...``."""
    cmd = [sys.executable, '-m', 'dna_mm.tools.torchrun', *options, 'tools/train.py', DEMO_CONFIG]
    cmd += ['--launcher', 'pytorch', '--work-dir', str(work), '--cfg-options', *_options(root, epochs)]
    return Session(tmp_path, name, cmd, _env())


def _restarted_and_resumed(agents: list[Session], work: Path, epochs: int) -> None:
    """Once a checkpoint exists, ``kill -9`` of rank 1: every agent ends 0, the ranks having
    resumed from a checkpoint and trained to the last epoch."""
    try:
        wait_for(lambda: (work / 'epoch_1.pth').is_file(), agents, 'the first checkpoint')
        ranks = {r: pid for a in agents for r, pid in _ranks_of(a.pid).items()}
        assert set(ranks) == {0, 1}, ranks
        os.kill(ranks[1], signal.SIGKILL)
        killed_at = time.time()
        codes = [a.end(REACH_S) for a in agents]
        text = '\n'.join(a.text() for a in agents)
        took = max(a.ended_at for a in agents) - killed_at
        resumed = _lines(text, 'resume: continuing from')
        print(f'\nkill -9 of rank 1 after a checkpoint: agents exit {codes}, {took:.0f} s later')
        print(*_lines(text, 'elastic restart 1'), *resumed, sep='\n')
        assert codes == [0] * len(agents), text[-4000:]
        assert resumed and all('/epoch_' in ln or '/preempted_iter_' in ln for ln in resumed), text[-4000:]
        assert _lines(text, 'elastic restart 1 (torchrun --max-restarts): resuming'), text[-4000:]
        assert (work / f'epoch_{epochs}.pth').is_file()
        assert (work / 'last_checkpoint').read_text().strip().endswith(f'epoch_{epochs}.pth')
        assert not _sessions_left([a.pid for a in agents])
    finally:
        for a in agents:
            a.kill_all()


@pytest.mark.slow
def test_torchrun_restarts_two_ranks_that_resume_from_the_last_checkpoint(tiny_video_set, tmp_path) -> None:
    work, epochs = tmp_path / 'work', 8
    options = ['--nproc_per_node=2', '--max-restarts=1']  # one machine: the c10d rendezvous
    agent = _torchrun(tmp_path, 'agent', options, work, tiny_video_set, epochs)
    _restarted_and_resumed([agent], work, epochs)


@pytest.mark.slow
def test_two_torchrun_agents_restart_their_ranks_that_resume_from_the_last_checkpoint(
    tiny_video_set, tmp_path
) -> None:
    """Two "nodes": two agents meeting at a c10d rendezvous on 127.0.0.1, one rank each."""
    work, epochs = tmp_path / 'work', 8
    options = ['--nnodes=2', '--nproc_per_node=1', '--max-restarts=1', '--rdzv-backend=c10d']
    options += [f'--rdzv-endpoint=127.0.0.1:{free_port()}', '--rdzv-id=ranks-end-test']
    agents = [_torchrun(tmp_path, f'node{n}', options, work, tiny_video_set, epochs) for n in (0, 1)]
    _restarted_and_resumed(agents, work, epochs)


# ---------------------------------------------------------------------------------------------
# a store gone between the question whether it answers and the read: no C++ stack on stderr

STORE_GONE = """
import subprocess, sys, time
from datetime import timedelta
import torch.distributed as dist
from dna_mm.engine.distributed import _bounded, _State

port = {port}
serve = "import datetime, time, torch.distributed as d; "
serve += f"s = d.TCPStore('127.0.0.1', {{port}}, 2, True, timeout=datetime.timedelta(seconds=30), "
serve += "wait_for_workers=False); print('listening', flush=True); time.sleep(60)"
server = subprocess.Popen([sys.executable, '-c', serve], stdout=subprocess.PIPE, text=True)
server.stdout.readline()  # a client that asked before would time out (a slow machine) and log a stack
for _ in range(100):
    try:
        client = dist.TCPStore('127.0.0.1', port, 2, False, timeout=timedelta(seconds=5))
        break
    except Exception:
        time.sleep(0.1)
client.set('a', 'b')
server.kill()
server.wait()
state = _State()
state.store = client
if sys.argv[1] == 'bounded':
    print('read:', _bounded(state, lambda store: store.check(['a'])))
else:
    try:
        client.check(['a'])
    except Exception as err:
        print('read failed:', type(err).__name__)
print('after', file=sys.stderr)
"""


@pytest.mark.parametrize('how', ['bounded', 'bare'])
def test_a_store_gone_since_it_was_asked_leaves_no_cpp_stack(how: str) -> None:
    """torch writes a C++ stack to file descriptor 2 when a store's server has gone; dna_mm's
    bounded reads hold it back (``bare``: torch's own call shows that it is written)."""
    import subprocess

    code = STORE_GONE.format(port=free_port())
    proc = subprocess.run(
        [sys.executable, '-c', code, how], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    if how == 'bounded':
        assert 'read: None' in proc.stdout, proc.stdout
        assert '[c10d]' not in proc.stderr and 'frame #' not in proc.stderr, proc.stderr[-3000:]
    else:
        assert 'read failed' in proc.stdout
        assert '[c10d]' in proc.stderr and 'frame #' in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.rstrip().endswith('after'), proc.stderr[-3000:]  # what follows still shows


def test_without_store_warnings_keeps_everything_else() -> None:
    from dna_mm.engine.held_stderr import without_store_warnings

    text = (
        'before\n'
        '[W1129 13:47:23.860616941 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=3): reset\n'
        'Exception raised from recvBytes at Utils.hpp:786 (most recent call first):\n'
        'frame #0: c10::Error::Error() + 0x9d\n'
        '<omitting python frames>\n'
        'frame #16: <unknown function> + 0x2724a\n'
        '\n'
        'train.py: stopped: rank 0 of 2 is gone\n'
        '[W1129 13:47:24.1 ProcessGroupGloo.cpp:12] Warning: not a store one\n'
    )
    assert without_store_warnings(text) == (
        'before\ntrain.py: stopped: rank 0 of 2 is gone\n'
        '[W1129 13:47:24.1 ProcessGroupGloo.cpp:12] Warning: not a store one\n'
    )
