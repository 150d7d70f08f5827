"""tools/train.py --tensorboard without the tensorboard package: one line naming the install
command, exit status 2, before any work."""

from __future__ import annotations

import sys

from conftest import DEMO_CONFIG, run_main, tiny_run_options


def test_tensorboard_asked_for_but_not_installed_is_one_line(tiny_video_set, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, 'tensorboard', None)  # `import tensorboard` fails, as without it
    work = tmp_path / 'work'
    args = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--tensorboard']
    done = run_main([*args, '--cfg-options', *tiny_run_options(tiny_video_set)], check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert 'Traceback' not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if 'error:' in ln]
    assert (
        "--tensorboard needs the tensorboard package" in line and "pip install 'dna_mm[tensorboard]'" in line
    )
    assert not work.exists()  # before the run started
