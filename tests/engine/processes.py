"""What the tests that start real runs share: a process in its own session (its process group:
its data-loader workers with it) whose wait is bounded, and how far a run has trained."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest
from conftest import REPO

#: seconds a test waits for a run to reach the point where the event is injected
REACH_S = 240


class Session:
    """``cmd`` started in the repo root in a session of its own, its output in
    ``tmp_path/<name>.out``; :meth:`end` waits for it, bounded. Python's ``faulthandler`` is on in
    it, so that a process that does not end shows where it stands."""

    def __init__(self, tmp_path: Path, name: str, cmd: list[str], env: dict[str, str]) -> None:
        self.name, self.out = name, tmp_path / f'{name}.out'
        self._log = open(self.out, 'w')
        self.proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env={**env, 'PYTHONFAULTHANDLER': '1'},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.ended_at = 0.0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.out.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> float:
        """``signum`` to the session's process group (workers included); when it was sent."""
        os.killpg(self.pid, signum)
        return time.time()

    def end(self, limit: float = REACH_S) -> int:
        """The exit status; past ``limit`` seconds the test fails with the stacks of the process's
        threads (``SIGABRT``: ``faulthandler`` writes them to its output) and the group is killed."""
        try:
            code = self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            with contextlib.suppress(ProcessLookupError):  # the group's last process ended on it
                os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f'{self.name} did not end within {limit:.0f} s:\n{self.text()[-8000:]}')
        finally:
            self._log.close()
        self.ended_at = time.time()
        return code

    def kill_all(self) -> None:
        """Clean-up: whatever is left of the session."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=30)

    def assert_nothing_left(self, within: float = 5.0) -> None:
        """No process of the session's group outlives it by more than ``within`` seconds."""
        deadline = time.time() + within
        while True:
            try:
                os.killpg(self.pid, 0)
            except ProcessLookupError:
                return
            if time.time() > deadline:
                left = group(self.pid)
                os.killpg(self.pid, signal.SIGKILL)
                pytest.fail(f'processes of {self.name} outlived it: {left}')
            time.sleep(0.1)


def wait_for(ready: Callable[[], bool], sessions: list[Session], what: str) -> None:
    """Poll ``ready()`` while every session lives, at most :data:`REACH_S`."""
    start = time.time()
    while not ready():
        for s in sessions:
            assert s.alive(), f'{s.name} ended before {what}:\n{s.text()[-4000:]}'
        assert time.time() - start < REACH_S, f'not {what} after {REACH_S} s:\n{sessions[0].text()[-4000:]}'
        time.sleep(0.05)


def group(pgid: int) -> list[str]:
    """``pid: command`` of the live processes in process group ``pgid``."""
    found = []
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / 'stat').read_text()
            cmd = (entry / 'cmdline').read_bytes().replace(b'\0', b' ').decode()[:120]
        except OSError:
            continue
        fields = stat[stat.rindex(')') + 2 :].split()  # after "(comm)": state ppid pgrp
        if int(fields[2]) == pgid and fields[0] != 'Z':
            found.append(f'{entry.name}: {cmd}')
    return found


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (its data-loader workers)."""
    try:
        return [int(p) for p in Path(f'/proc/{pid}/task/{pid}/children').read_text().split()]
    except OSError:
        return []


def ignored(pid: int) -> set[signal.Signals]:
    """The signals process ``pid`` ignores (``SigIgn`` of ``/proc/PID/status``)."""
    line = next(ln for ln in Path(f'/proc/{pid}/status').read_text().splitlines() if ln.startswith('SigIgn:'))
    mask = int(line.split()[1], 16)
    return {s for s in signal.Signals if s < 64 and mask >> (s - 1) & 1}


def steps(work_dir: Path) -> int:
    """The last training step logged in ``work_dir`` so far (0: none; a line being written is
    left for the next look)."""
    runs = sorted(Path(work_dir).glob('*/vis_data/scalars.json'))
    lines = runs[-1].read_text().splitlines() if runs else []
    return max((json.loads(ln).get('step', 0) for ln in lines if ln.endswith('}')), default=0)
