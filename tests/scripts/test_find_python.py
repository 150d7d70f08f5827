"""scripts/install/find_python.sh: an interpreter is taken only after it answers ``-V``; a pyenv shim of a
version that is installed but not activated (the shim fails) falls back to pyenv's installed
copy; with none, one line names the variable to set. A failing shim on PATH, as pyenv writes one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

SHIM = """#!/usr/bin/env bash
echo "pyenv: $(basename "$0"): command not found" >&2
exit 127
"""


def _find(name: str, tmp_path: Path, root: Path, *var: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / 'shims'
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / 'python3.12'
    shim.write_text(SHIM)
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f'{bin_dir}:/usr/bin:/bin', PYENV_ROOT=str(root))
    cmd = ['bash', str(REPO / 'scripts' / 'install' / 'find_python.sh'), name, *var]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


def test_a_failing_shim_falls_back_to_pyenvs_installed_version(tmp_path) -> None:
    root = tmp_path / 'pyenv'
    for version in ('3.12.1', '3.12.4'):  # the newest that answers is taken
        (root / 'versions' / version / 'bin').mkdir(parents=True)
    broken = root / 'versions' / '3.12.4' / 'bin' / 'python3.12'
    broken.write_text('#!/bin/sh\nexit 1\n')
    broken.chmod(0o755)
    (root / 'versions' / '3.12.1' / 'bin' / 'python3.12').symlink_to(sys.executable)
    found = _find('python3.12', tmp_path, root)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == str(root / 'versions' / '3.12.1' / 'bin' / 'python3.12')


def test_no_interpreter_is_one_line_naming_the_variable(tmp_path) -> None:
    found = _find('python3.12', tmp_path, tmp_path / 'empty', 'PYTHON312')
    assert found.returncode == 1 and found.stdout == ''
    assert found.stderr.splitlines() == [
        f'find_python: python3.12 does not run and pyenv ({tmp_path / "empty"}) has no Python 3.12 '
        'that does; set PYTHON312=/path/to/python3.12'
    ]


def test_an_interpreter_that_answers_is_taken_as_it_is(tmp_path) -> None:
    found = _find(sys.executable, tmp_path, tmp_path / 'empty')
    assert found.returncode == 0 and found.stdout.strip() == sys.executable
