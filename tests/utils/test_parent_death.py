"""Processes that end with the one that started them: torchrun's ranks with their agent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO

from dna_mm.utils.parent_death import AGENT_PID_VAR

#: a stand-in for torchrun's agent: starts ``rank.py`` with torchrun's and dna_mm's variables, waits
AGENT = f"""
import os, subprocess, sys, time
env = dict(os.environ, TORCHELASTIC_RUN_ID='run', {AGENT_PID_VAR}=str(os.getpid()))
subprocess.Popen([sys.executable, sys.argv[1] + '/rank.py', sys.argv[1]], env=env)
time.sleep(60)
"""
#: the rank, which starts a tool of its own (``rank.py OUT tool``, the same environment); each says
#: in files under OUT what ``follow_torchrun_agent`` set up, and the SIGTERM it got
RANK = """
import os, signal, subprocess, sys, time
from pathlib import Path
from dna_mm.utils.parent_death import agent_ended, follow_torchrun_agent

out, me = Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else 'rank'

def stop(signum, frame):
    (out / f'{me}.signal').write_text(f'SIGTERM agent_ended={agent_ended()}')
    sys.exit(143)

signal.signal(signal.SIGTERM, stop)
(out / f'{me}.pid').write_text(str(os.getpid()))
(out / f'{me}.set').write_text(str(follow_torchrun_agent()))
if me == 'rank':
    subprocess.Popen([sys.executable, __file__, str(out), 'tool'])
time.sleep(60)
"""


def _read(path: Path, within: float = 30.0) -> str:
    deadline = time.time() + within
    while not path.exists() or not path.read_text():
        assert time.time() < deadline, f'no {path.name} after {within:.0f} s'
        time.sleep(0.05)
    return path.read_text()


def test_a_rank_gets_sigterm_when_its_agent_is_killed_and_a_tool_it_starts_is_left_alone(tmp_path) -> None:
    (tmp_path / 'rank.py').write_text(RANK)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    agent = subprocess.Popen([sys.executable, '-c', AGENT, str(tmp_path)], env=env)
    pids = []
    try:
        assert _read(tmp_path / 'rank.set') == 'True'  # its parent is the agent named
        assert _read(tmp_path / 'tool.set') == 'False'  # its parent is the rank: not followed
        pids = [int(_read(tmp_path / f'{who}.pid')) for who in ('rank', 'tool')]
        agent.kill()  # not reaped yet: the test is its parent
        killed_at = time.time()
        said = _read(tmp_path / 'rank.signal', within=5.0)
        print(f'\nthe rank got SIGTERM {time.time() - killed_at:.2f} s after kill -9 of its agent')
        assert said == 'SIGTERM agent_ended=True'
        assert not (tmp_path / 'tool.signal').exists()
    finally:
        agent.kill()
        agent.wait()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


#: a tool that runs another (the demos, the study: ``run_script``), which reports its pid and the
#: SIGTERM it gets in files under OUT
RUNS_A_TOOL = """
import sys
from dna_mm.utils.tool_runs import run_script

tool = '''
import os, signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def stop(signum, frame):
    (out / 'tool.signal').write_text('SIGTERM')
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
(out / 'tool.pid').write_text(str(os.getpid()))
time.sleep(60)
'''
run_script(['-c', tool, sys.argv[1]], repo=sys.argv[1])
"""


def test_a_tool_that_a_killed_tool_ran_gets_sigterm(tmp_path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    parent = subprocess.Popen(
        [sys.executable, '-c', RUNS_A_TOOL, str(tmp_path)], env=env, stdout=subprocess.DEVNULL
    )
    pid = 0
    try:
        pid = int(_read(tmp_path / 'tool.pid'))
        parent.kill()
        assert _read(tmp_path / 'tool.signal', within=5.0) == 'SIGTERM'
    finally:
        parent.kill()
        parent.wait()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
