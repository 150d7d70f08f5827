"""A mistake in the input under torchrun is told once for all the ranks, not once per rank among
torchrun's failure report; a crash keeps torchrun's report with its traceback.

Real processes: dna_mm's torchrun (what ``tools/dist_train.sh`` runs) with 2 ranks of a tool run
in dna_mm's tool wrapper, and ``tools/dist_train.sh`` itself on the demo config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO, free_port, tiny_run_options

from dna_mm.tools.rank_errors import FOLDER_VAR, hand_to_agent, told_lines
from dna_mm.utils.parent_death import AGENT_PID_VAR

#: a tool in dna_mm's wrapper whose ranks stop as ``sys.argv[1]`` says: ``same`` (one mistake on
#: every rank), ``crash`` (a bug)
TOOL = '''
import argparse, os, sys
from dna_mm.errors import ConfigError
from dna_mm.tools.cli import run_tool

def work(args):
    if args.kind == 'crash':
        raise RuntimeError('a bug in rank ' + os.environ['RANK'])
    raise ConfigError('bad.value must be > 0')

run_tool('tool.py', work, argparse.Namespace(kind=sys.argv[1]))
'''


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('TORCHELASTIC_', 'PET_', FOLDER_VAR))}
    skip = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'LOCAL_WORLD_SIZE')
    env = {k: v for k, v in env.items() if k not in skip}
    return {**env, 'OMP_NUM_THREADS': '1', 'PYTHONPATH': str(REPO)}


def _torchrun(tmp_path: Path, kind: str) -> subprocess.CompletedProcess:
    tool = tmp_path / 'tool.py'
    tool.write_text(TOOL)
    cmd = [sys.executable, '-m', 'dna_mm.tools.torchrun', '--nproc-per-node', '2', str(tool), kind]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=240, cwd=tmp_path)


def _ours(stderr: str) -> list[str]:
    return [
        ln for ln in stderr.splitlines() if 'tool.py' in ln and 'Traceback' not in ln or 'torchrun:' in ln
    ]


def test_the_ranks_lines_are_told_once_with_the_ranks_where_they_differ(tmp_path) -> None:
    same = 'train.py: error: x must be > 0\ntrain.py: (--debug prints the traceback)'
    for rank in (3, 0, 1):
        (tmp_path / f'{rank}.txt').write_text(same + '\n')
    assert told_lines(str(tmp_path)) == same
    (tmp_path / '1.txt').write_text('train.py: error: y.txt does not exist\n')
    assert told_lines(str(tmp_path)).splitlines() == [
        '[ranks 0, 3] train.py: error: x must be > 0',
        '[ranks 0, 3] train.py: (--debug prints the traceback)',
        '[rank 1] train.py: error: y.txt does not exist',
    ]
    assert told_lines(str(tmp_path / 'none')) is None


def test_a_rank_prints_its_line_itself_without_dna_mms_agent(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(FOLDER_VAR, raising=False)
    monkeypatch.setenv('RANK', '0')
    monkeypatch.setenv(AGENT_PID_VAR, str(os.getppid()))  # this process: as if the agent's rank
    assert not hand_to_agent('line')  # plain torchrun, srun, by hand: the caller prints
    monkeypatch.setenv(FOLDER_VAR, str(tmp_path))
    monkeypatch.setenv(AGENT_PID_VAR, str(os.getpid()))  # a tool a rank runs: its parent is the rank
    assert not hand_to_agent('line') and not list(tmp_path.iterdir())
    monkeypatch.setenv(AGENT_PID_VAR, str(os.getppid()))
    monkeypatch.setenv(FOLDER_VAR, str(tmp_path / 'gone'))
    assert not hand_to_agent('line')  # the folder cannot be written: printed, not lost
    monkeypatch.setenv(FOLDER_VAR, str(tmp_path))
    assert hand_to_agent('line') and (tmp_path / '0.txt').read_text() == 'line'


@pytest.mark.slow
def test_one_mistake_on_every_rank_is_one_line_and_status_2(tmp_path) -> None:
    proc = _torchrun(tmp_path, 'same')
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert _ours(proc.stderr) == [
        'tool.py: error: bad.value must be > 0',
        'tool.py: (--debug prints the traceback)',
        'torchrun: exit status 2',
    ], proc.stderr[-3000:]
    assert 'ChildFailedError' not in proc.stderr and 'Root Cause' not in proc.stderr


@pytest.mark.slow
def test_a_crash_keeps_torchruns_report_and_its_traceback(tmp_path) -> None:
    proc = _torchrun(tmp_path, 'crash')
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert 'Traceback' in proc.stderr and 'RuntimeError: a bug in rank' in proc.stderr
    assert 'Root Cause' in proc.stderr and proc.stderr.rstrip().endswith('torchrun: exit status 1')


@pytest.mark.slow
def test_dist_train_sh_tells_a_misspelt_option_once(tiny_video_set, tmp_path) -> None:
    """``tools/dist_train.sh CONFIG 2`` with a misspelt ``--cfg-options`` key: the line once,
    status 2, torchrun's report left out."""
    env = {**_env(), 'PYTHON': sys.executable, 'PORT': str(free_port())}
    cmd = ['bash', 'tools/dist_train.sh', DEMO_CONFIG, '2', '--work-dir', str(tmp_path / 'work')]
    cmd += ['--cfg-options', *tiny_run_options(tiny_video_set), 'train_cfgg.max_epochs=1']
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, cwd=REPO)
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith(('train.py:', 'torchrun:'))]
    assert ours == [
        "train.py: error: --cfg-options train_cfgg.max_epochs: 'train_cfgg' is not a key of the config, "
        "nor one that mmengine's runner or dna_mm reads; did you mean 'train_cfg'?",
        'train.py: (--debug prints the traceback)',
        'torchrun: exit status 2',
    ], proc.stderr[-3000:]
    assert 'Root Cause' not in proc.stderr
