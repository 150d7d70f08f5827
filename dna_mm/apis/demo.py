"""The demos' runs (``tools/demo.py``, ``tools/demo_det.py``): the repository's own train and
test tools in subprocesses, as a user would type them."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_tool(args: list[str], name: str = 'demo') -> str:
    """``python <args>`` in the repository root, the command echoed first; its output, or exit
    with the last of it when it fails."""
    cmd = [sys.executable, *args]
    print('$ ' + shlex.join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-4000:], file=sys.stderr)
        sys.exit(f'{name}: command failed with exit code {proc.returncode}')
    return proc.stdout


def test_line(out: str) -> str:
    """The ``Test results: ...`` line that ``tools/test.py`` prints."""
    return next(ln for ln in out.splitlines() if ln.startswith('Test results:'))


def train_then_test(
    config: str, work_dir: str, opts: list[str], dump: str, name: str = 'demo'
) -> tuple[str, float]:
    """``tools/train.py`` (seed 0), then ``tools/test.py`` on its last checkpoint with
    ``--dump``; the test line and the seconds both took."""
    start = time.time()
    run_tool(['tools/train.py', config, '--work-dir', work_dir, '--seed', '0', '--cfg-options', *opts], name)
    ckpt = (REPO / work_dir / 'last_checkpoint').read_text().strip()
    out = run_tool(
        ['tools/test.py', config, ckpt, '--work-dir', work_dir, '--dump', dump, '--cfg-options', *opts], name
    )
    return test_line(out), time.time() - start
