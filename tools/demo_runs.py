"""The demos' runs (``tools/demo.py``, ``tools/demo_det.py``): ``tools/train.py`` and
``tools/test.py`` of this checkout in subprocesses, as a user would type them, their output
shown live (mmengine's progress lines with the ETA) and the log file named."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

TOOLS = Path(__file__).resolve().parent
REPO = TOOLS.parent  # the commands run here, so that config-relative paths resolve


def latest_log(work_dir: str | Path) -> Optional[Path]:
    """The newest mmengine log file (``<work_dir>/<timestamp>/<timestamp>.log``), if any."""
    logs = sorted((REPO / work_dir).glob('*/*.log'), key=lambda p: p.stat().st_mtime)
    return logs[-1] if logs else None


def run_tool(args: list[str], name: str = 'demo', work_dir: Optional[str] = None) -> str:
    """``python tools/<args>`` in the repository root, the command echoed first and its output
    shown as it comes; returns the output. A failure exits naming the log file."""
    cmd = [sys.executable, *args]
    print('$ ' + shlex.join(cmd), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    lines = []
    with subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env
    ) as proc:
        for line in proc.stdout:  # live: mmengine's progress lines as they are logged
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    log = latest_log(work_dir) if work_dir is not None else None
    if proc.returncode != 0:
        where = f'; full log: {log}' if log is not None else ''
        sys.exit(f'{name}: command failed with exit code {proc.returncode}{where}')
    if log is not None:
        print(f'full log: {log}', flush=True)
    return ''.join(lines)


def test_line(out: str) -> str:
    """The ``Test results: ...`` line that ``tools/test.py`` prints."""
    return next(ln for ln in out.splitlines() if ln.startswith('Test results:'))


def demo_options(attn: str, data_root: str, epochs: Optional[int] = None) -> list[str]:
    """``--cfg-options`` of a run of the video demo's config: ``attn`` in every attention
    (``model.backbone.attn_cfg``), the clips of ``data_root`` (``train.txt``; ``test.txt`` for validation and
    test), ``epochs`` (the schedule's end, validation and checkpoint intervals move with it)."""
    opts = [f'model.backbone.attn_cfg={attn}']
    for split, ann in (('train', 'train'), ('val', 'test'), ('test', 'test')):
        opts += [
            f'{split}_dataloader.dataset.ann_file={data_root}/{ann}.txt',
            f'{split}_dataloader.dataset.data_prefix.video={data_root}/videos',
        ]
    if epochs:
        opts += [f'train_cfg.max_epochs={epochs}']
    return opts


def train_then_test(
    config: str, work_dir: str, opts: list[str], dump: str, name: str = 'demo', seed: int = 0
) -> tuple[str, float]:
    """``tools/train.py`` (``--seed seed``), then ``tools/test.py`` on its last checkpoint with
    ``--dump``; the test line and the seconds both took."""
    start = time.time()
    run_tool(
        ['tools/train.py', config, '--work-dir', work_dir, '--seed', str(seed), '--cfg-options', *opts],
        name,
        work_dir,
    )
    ckpt = (REPO / work_dir / 'last_checkpoint').read_text().strip()
    out = run_tool(
        ['tools/test.py', config, ckpt, '--work-dir', work_dir, '--dump', dump, '--cfg-options', *opts],
        name,
        work_dir,
    )
    return test_line(out), time.time() - start
