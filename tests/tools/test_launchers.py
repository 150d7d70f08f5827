"""A launcher that does not fit how the tool was started, a bad process count, a busy port: one
line naming the flag or variable and what to do, exit status 2, before any model is built.

* ``--launcher pytorch`` / ``mpi`` / ``slurm`` without torchrun / ``mpirun`` / ``srun``: the
  missing variables and the script that starts that tool (``dist_test.sh`` for test.py);
* a tool that torchrun started as one of several without ``--launcher pytorch``: refused, not
  run once per rank (each printing the results and writing the same ``--dump``);
* ``tools/dist_*.sh`` with an ``NPROC`` that is not a number >= 1, ``torchrun --nproc-per-node``
  alike; a rendezvous port in use; ``dist_*.sh`` on one machine without ``PORT``: a free port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from conftest import DEMO_CONFIG, REPO, free_port, run_main

from dna_mm.errors import ConfigError
from dna_mm.tools import torchrun

#: what torchrun, srun and mpirun set: cleared for a run "started by hand"
LAUNCH_VARS = (
    'RANK',
    'WORLD_SIZE',
    'LOCAL_RANK',
    'MASTER_ADDR',
    'MASTER_PORT',
    'LOCAL_WORLD_SIZE',
    'SLURM_PROCID',
    'SLURM_NTASKS',
    'SLURM_LOCALID',
    'SLURM_NODELIST',
    'OMPI_COMM_WORLD_RANK',
    'OMPI_COMM_WORLD_SIZE',
    'OMPI_COMM_WORLD_LOCAL_RANK',
    'OMPI_COMM_WORLD_LOCAL_SIZE',
)


@pytest.fixture
def plain_env(monkeypatch):
    """No launcher's variables (restored afterwards)."""
    for name in LAUNCH_VARS:
        monkeypatch.setenv(name, '')
        monkeypatch.delenv(name)
    return monkeypatch


def _tool_args(tool: str, tmp_path) -> list[str]:
    if tool == 'test.py':
        (ckpt := tmp_path / 'ckpt.pth').write_bytes(b'never read')
        return ['tools/test.py', DEMO_CONFIG, str(ckpt), '--work-dir', str(tmp_path / 'work')]
    return ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'work')]


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if ': error: ' in line]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize('tool', ['test.py', 'train.py'])
@pytest.mark.parametrize(
    'launcher, missing, script',
    [
        ('pytorch', 'RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set', 'tools/dist_{kind}.sh'),
        ('mpi', 'OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK not set', 'mpirun'),
        ('slurm', 'SLURM_PROCID, SLURM_NTASKS, SLURM_NODELIST not set', 'tools/slurm_{kind}.sh'),
    ],
)
def test_a_launcher_without_its_environment_is_one_line(
    tool, launcher, missing, script, plain_env, tmp_path
) -> None:
    proc = run_main([*_tool_args(tool, tmp_path), '--launcher', launcher], check=False)
    line = _one_error_line(proc)
    kind = tool.removesuffix('.py')
    assert f'--launcher {launcher}: {missing}' in line
    assert script.format(kind=kind) in line and f'start {tool} with' in line
    other = {'test': 'train', 'train': 'test'}[kind]
    assert f'_{other}.sh' not in line  # the script of the tool that runs
    assert not (tmp_path / 'work').exists()  # refused before anything


@pytest.mark.parametrize('tool', ['test.py', 'train.py'])
def test_a_rank_of_torchrun_without_launcher_pytorch_is_refused(tool, plain_env, tmp_path) -> None:
    """What torchrun gives each rank; the tool without ``--launcher pytorch`` would run alone."""
    for name, value in dict(RANK='1', WORLD_SIZE='2', LOCAL_RANK='1', LOCAL_WORLD_SIZE='2').items():
        plain_env.setenv(name, value)
    dump = tmp_path / 'out.csv'
    extra = ['--dump', str(dump)] if tool == 'test.py' else []
    proc = run_main([*_tool_args(tool, tmp_path), *extra], check=False)
    line = _one_error_line(proc)
    assert 'one of 2 processes (torchrun: WORLD_SIZE=2) without --launcher pytorch' in line
    assert line.endswith('add --launcher pytorch')
    assert not dump.exists() and not (tmp_path / 'work').exists()


def test_which_environment_fits_which_launcher(plain_env) -> None:
    from dna_mm.engine.distributed import launcher_mistake

    assert launcher_mistake('none', 'test.py', {}) is None
    assert launcher_mistake('none', 'test.py', {'WORLD_SIZE': '1', 'RANK': '0'}) is None  # torchrun, 1 rank
    mpi = launcher_mistake('none', 'train.py', {'OMPI_COMM_WORLD_SIZE': '4'})
    assert 'one of 4 processes (mpirun' in mpi and mpi.endswith('add --launcher mpi')
    torch_vars = dict(RANK='0', WORLD_SIZE='2', LOCAL_RANK='0', MASTER_ADDR='h', MASTER_PORT='1')
    assert launcher_mistake('pytorch', 'train.py', torch_vars) is None
    own = launcher_mistake('pytorch', 'extract_features.py', {})
    assert 'python -m dna_mm.tools.torchrun --nproc_per_node NPROC tools/extract_features.py' in own
    slurm = launcher_mistake('slurm', 'test.py', {'SLURM_PROCID': '0'})
    assert 'tools/slurm_test.sh' in slurm and 'slurm_train' not in slurm


def test_mpi_variables_become_torchs(plain_env) -> None:
    from dna_mm.engine.distributed import mpi_environment

    env = dict(OMPI_COMM_WORLD_RANK='3', OMPI_COMM_WORLD_SIZE='4', OMPI_COMM_WORLD_LOCAL_RANK='3')
    assert mpi_environment(dict(env)) == dict(
        RANK='3', WORLD_SIZE='4', LOCAL_RANK='3', MASTER_ADDR='127.0.0.1', MASTER_PORT='29500'
    )
    across = dict(env, OMPI_COMM_WORLD_LOCAL_SIZE='2')  # two machines: rank 0's address is not known
    with pytest.raises(ConfigError, match='MASTER_ADDR not set, and the ranks run on several machines'):
        mpi_environment(across)
    assert mpi_environment(dict(across, MASTER_ADDR='node1'))['MASTER_ADDR'] == 'node1'
    with pytest.raises(ConfigError, match='--launcher mpi: OMPI_COMM_WORLD_SIZE, .* not set'):
        mpi_environment(dict(OMPI_COMM_WORLD_RANK='0'))


# ---------------------------------------------------------------------------------------------
# torchrun (dna_mm.tools.torchrun) and tools/dist_*.sh


@pytest.mark.parametrize('value', ['two', '0', '-1', '1.5'])
def test_a_process_count_that_is_not_one_is_one_line(value) -> None:
    line = torchrun.nproc_mistake([f'--nproc_per_node={value}', 'x.py'])
    assert line == (
        f'--nproc-per-node={value}: expected the number of processes on this machine, a whole number >= 1 '
        '(or auto, cpu, gpu)'
    )


def test_good_process_counts_pass() -> None:
    for value in ('1', '8', 'cpu', 'auto'):
        assert torchrun.nproc_mistake([f'--nproc-per-node={value}', 'x.py']) is None


@pytest.fixture
def agent_env(monkeypatch):
    """The variables :func:`dna_mm.tools.torchrun.main` sets in its process: restored."""
    from dna_mm.tools.rank_errors import FOLDER_VAR
    from dna_mm.utils.parent_death import AGENT_PID_VAR

    for name in ('PET_SIGNALS_TO_HANDLE', 'TORCH_DISABLE_SHARE_RDZV_TCP_STORE', AGENT_PID_VAR, FOLDER_VAR):
        monkeypatch.setenv(name, os.environ.get(name, ''))
        if not os.environ[name]:
            monkeypatch.delenv(name)


def test_torchrun_refuses_a_bad_process_count(agent_env, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        torchrun.main(['--nproc_per_node=two', 'x.py'])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        'torchrun: error: --nproc-per-node=two: expected the number of processes on this machine, '
        'a whole number >= 1 (or auto, cpu, gpu)'
    )


def test_a_port_in_use_is_one_line(agent_env, capsys) -> None:
    """Two runs with one ``--master-port`` (dist_*.sh's PORT): the second's agent cannot listen."""
    with socket.socket() as held:
        held.bind(('127.0.0.1', 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(SystemExit) as stop:
            torchrun.main(['--nproc_per_node=1', f'--master_port={port}', 'x.py'])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert 'Traceback' not in err and len(err.splitlines()) == 1, err
    where = f'--master-port={port} (PORT of tools/dist_train.sh, dist_test.sh)'
    assert err.startswith(f'torchrun: error: {where}')
    assert f'port {port} is in use on this machine' in err and f'PORT={port + 1}' in err


#: a stand-in for the Python ``dist_*.sh`` execs torchrun's agent with: it prints its arguments
STAND_IN = '#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n'


def _dist(tmp_path, script: str, nproc: str, **env: str) -> subprocess.CompletedProcess:
    (python := tmp_path / 'python').write_text(STAND_IN)
    python.chmod(0o755)
    args = ['cfg.py', nproc] if script == 'dist_train.sh' else ['cfg.py', 'ckpt.pth', nproc]
    clean = {k: v for k, v in os.environ.items() if k not in ('PORT', 'NNODES', 'NODE_RANK', 'MASTER_ADDR')}
    return subprocess.run(
        ['bash', f'tools/{script}', *args, '--seed', '1'],
        cwd=REPO,
        env={**clean, 'PYTHON': str(python), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize('script', ['dist_train.sh', 'dist_test.sh'])
@pytest.mark.parametrize('nproc', ['two', '0', ''])
def test_dist_scripts_refuse_a_bad_nproc(script, nproc, tmp_path) -> None:
    proc = _dist(tmp_path, script, nproc)
    assert proc.returncode == 2 and proc.stdout == ''  # torchrun never started
    assert proc.stderr.startswith(f'tools/{script}: error: NPROC={nproc}: expected the number of processes')
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize('script', ['dist_train.sh', 'dist_test.sh'])
def test_dist_scripts_take_a_free_port_on_one_machine(script, tmp_path) -> None:
    """Without ``PORT`` on one machine no ``--master_port`` is passed: dna_mm's torchrun takes
    the c10d rendezvous on a free port (two runs side by side do not collide); ``PORT`` (or
    several machines) keeps the static rendezvous on that port."""
    tool = 'train.py' if script == 'dist_train.sh' else 'test.py'
    alone = _dist(tmp_path, script, '2').stdout.splitlines()
    assert alone[:2] == ['-m', 'dna_mm.tools.torchrun'] and '--nproc_per_node=2' in alone
    assert not any(a.startswith(('--master_port', '--master_addr')) for a in alone)
    at = next(i for i, a in enumerate(alone) if a.endswith(f'tools/{tool}'))
    assert alone[at - 1] == '--nproc_per_node=2' and alone[-4:] == ['--launcher', 'pytorch', '--seed', '1']
    port = str(free_port())
    fixed = _dist(tmp_path, script, '2', PORT=port).stdout.splitlines()
    assert f'--master_port={port}' in fixed and '--master_addr=127.0.0.1' in fixed
    nodes = _dist(tmp_path, script, '2', NNODES='2', NODE_RANK='1', MASTER_ADDR='n0').stdout.splitlines()
    assert {'--nnodes=2', '--node_rank=1', '--master_addr=n0', '--master_port=29500'} <= set(nodes)
    bad = _dist(tmp_path, script, '2', PORT='next')
    assert bad.returncode == 2 and bad.stderr.startswith(f'tools/{script}: error: PORT=next: expected a port')


def test_local_rendezvous_for_dist_scripts_without_port() -> None:
    """What dist_*.sh passes without PORT gets a free port from :func:`torchrun.local_rendezvous`."""
    argv = torchrun.local_rendezvous(['--nnodes=1', '--nproc_per_node=2', 'tools/test.py', 'c.py'])
    assert argv[:2] == ['--rdzv-backend=c10d', '--rdzv-endpoint=localhost:0']


@pytest.mark.skipif(sys.platform != 'linux', reason='torchrun agent on Linux')
def test_torchrun_without_launcher_pytorch_stops_with_one_line(tmp_path) -> None:
    """``torchrun --nproc_per_node=2 tools/test.py ... --dump out.csv`` without ``--launcher
    pytorch``: each rank refuses, the agent prints the line once, exit status 2, no dump."""
    (ckpt := tmp_path / 'ckpt.pth').write_bytes(b'never read')
    dump = tmp_path / 'out.csv'
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    cmd = [sys.executable, '-m', 'dna_mm.tools.torchrun', '--nproc_per_node=2', 'tools/test.py', DEMO_CONFIG]
    cmd += [str(ckpt), '--work-dir', str(tmp_path / 'work'), '--dump', str(dump)]
    proc = subprocess.run(cmd, cwd=REPO, env={**env, 'OMP_NUM_THREADS': '1'}, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if ': error: ' in line]
    assert said == [
        'test.py: error: test.py was started as one of 2 processes (torchrun: WORLD_SIZE=2) without '
        '--launcher pytorch: each would run the whole test alone; add --launcher pytorch'
    ]
    assert 'Test results' not in proc.stdout and not dump.exists()
