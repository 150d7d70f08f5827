"""dna_mm's configs and tools as the package ships them (``dna_mm/.mim``, a link to the checkout's
folders here): every config is a ``dna_mm::`` base from any folder (mmengine's reader wrapped in
memory, switchable off), and ``python -m dna_mm.tools NAME`` runs ``tools/NAME.py`` with the same
flags. The wheel itself: ``test_wheel_install.py`` (slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO
from mmengine.config import Config

import dna_mm  # noqa: F401  (the mmengine patch)
from dna_mm.tools import find, run, scripts
from dna_mm.utils.mim_compat import mim_folder, packaged_config

SHIPPED = sorted(p.relative_to(REPO / 'configs').as_posix() for p in (REPO / 'configs').rglob('*.py'))


def test_the_package_folders_are_the_checkouts() -> None:
    for name in ('configs', 'tools'):
        assert mim_folder(name) == REPO / 'dna_mm' / '.mim' / name
        assert mim_folder(name).resolve() == REPO / name


@pytest.mark.parametrize('rel', SHIPPED)
def test_every_shipped_config_is_a_dna_mm_base(rel) -> None:
    path, scope = Config._get_cfg_path(f'dna_mm::{rel}', '/elsewhere/cfg.py')
    assert os.path.samefile(path, REPO / 'configs' / rel)
    assert scope is None  # read like a local base: the config's own default_scope builds it


def test_a_top_level_base_from_another_folder(tmp_path) -> None:
    (tmp_path / 'mine.py').write_text(
        "_base_ = ['dna_mm::timesformer_dna_ntu60.py']\ntrain_cfg = dict(max_epochs=3)\n"
    )
    mine = Config.fromfile(tmp_path / 'mine.py')
    ref = Config.fromfile(REPO / 'configs' / 'timesformer_dna_ntu60.py')
    assert mine.train_cfg.max_epochs == 3
    mine.train_cfg.max_epochs = ref.train_cfg.max_epochs
    assert mine.to_dict() == ref.to_dict()
    assert '_scope_' not in mine.model and mine.default_scope == 'mmaction'


def test_a_folder_base_and_a_detection_config(tmp_path) -> None:
    (tmp_path / 'a.py').write_text("_base_ = ['dna_mm::_base_/default_runtime_det.py']\n")
    (tmp_path / 'b.py').write_text("_base_ = 'dna_mm::vitdet_dna_coco.py'\n")
    assert Config.fromfile(tmp_path / 'a.py').default_scope == 'mmdet'
    b = Config.fromfile(tmp_path / 'b.py')
    assert b.to_dict() == Config.fromfile(REPO / 'configs' / 'vitdet_dna_coco.py').to_dict()


def test_other_package_bases_go_to_mmengine(tmp_path) -> None:
    (tmp_path / 'local.py').write_text('x = 1\n')
    (tmp_path / 'c.py').write_text("_base_ = ['./local.py']\n")
    assert Config.fromfile(tmp_path / 'c.py').x == 1
    with pytest.raises(AssertionError, match='does not support to load nopkg config'):
        Config._get_cfg_path('nopkg::a/b.py', str(tmp_path / 'c.py'))


def test_a_config_that_is_not_shipped_is_named() -> None:
    with pytest.raises(FileNotFoundError, match=r'dna_mm::nothing_k400\.py: dna_mm ships no such config'):
        packaged_config('dna_mm::nothing_k400.py')


def test_stock_mmengine_refuses_what_the_patch_reads() -> None:
    """What ``DNA_MM_NO_MMENGINE_PATCH=1`` leaves in place (its subprocess test: below): a file at
    the top of the configs is no ``package::folder/file``, and dna_mm is not in mmengine's table."""
    stock = Config._get_cfg_path.__wrapped__
    with pytest.raises(ValueError, match='please specify the package name and relative config path'):
        stock('dna_mm::timesformer_dna_ntu60.py', '/elsewhere/cfg.py')
    with pytest.raises(AssertionError, match='does not support to load dna_mm config'):
        stock('dna_mm::_base_/default_runtime.py', '/elsewhere/cfg.py')


def test_every_tool_script_has_a_name() -> None:
    known = scripts()
    assert {'train', 'test', 'infer', 'extract_features', 'data/build_custom_dataset'} <= set(known)
    assert {'analysis/get_flops', 'analysis/analyze_attention', 'dist_train.sh'} <= set(known)
    on_disk = {
        p for p in (REPO / 'tools').rglob('*') if p.suffix in ('.py', '.sh') and '__pycache__' not in p.parts
    }
    assert {p.resolve() for p in known.values()} == {p for p in on_disk if not p.name.startswith('_')}


def test_tool_names() -> None:
    tools = REPO / 'dna_mm' / '.mim' / 'tools'
    assert find('train') == find('tools/train.py') == tools / 'train.py'
    assert find('build_custom_dataset') == tools / 'data' / 'build_custom_dataset.py'
    with pytest.raises(LookupError, match='ambiguous: data/coco/check_annotations, data/kinetics'):
        find('check_annotations')
    with pytest.raises(LookupError, match="no tool 'trian' \\(did you mean 'train'\\?"):
        find('trian')
    with pytest.raises(LookupError, match="no tool 'build_custom' \\(did you mean 'build_custom_dataset'\\?"):
        find('build_custom')


def test_a_tool_runs_with_the_same_argv(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, 'argv', list(sys.argv))
    monkeypatch.setattr(sys, 'path', list(sys.path))
    with pytest.raises(SystemExit) as stop:
        run('train', ['dna_mm::timesformer_dna_demo.py', '--help'])
    assert stop.value.code == 0 and capsys.readouterr().out.startswith('usage: train.py')
    script = str(REPO / 'dna_mm' / '.mim' / 'tools' / 'train.py')
    assert sys.argv == [script, str(mim_folder('configs') / 'timesformer_dna_demo.py'), '--help']
    assert sys.path[0] == str(REPO / 'dna_mm' / '.mim' / 'tools')
    with pytest.raises(LookupError, match='dna_mm::timesformer_dna_dmo.py: dna_mm ships no such config'):
        run('train', ['dna_mm::timesformer_dna_dmo.py'])  # the launcher's one line, not a traceback


def test_the_demos_work_in_a_checkout_or_else_in_the_current_folder(monkeypatch, tmp_path) -> None:
    """A checkout's demos run its tools and configs in the checkout (wherever they are started);
    an installed dna_mm's (``.mim``: tools and configs, no package) the installed ones in the
    current folder (the wheel itself: ``test_wheel_install.py``)."""
    from dna_mm.utils.tool_runs import runs_home, shipped_config, tool_args

    monkeypatch.chdir(tmp_path)
    config = 'configs/timesformer_dna_demo.py'
    assert runs_home(REPO) == REPO
    assert tool_args('train', REPO) == ['tools/train.py'] and shipped_config(config, REPO) == config
    assert runs_home(REPO / 'dna_mm' / '.mim') == tmp_path
    assert tool_args('test', tmp_path) == ['-m', 'dna_mm.tools', 'test']
    assert shipped_config(config, tmp_path) == 'dna_mm::timesformer_dna_demo.py'


def _python(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k != 'PYTHONPATH'}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.integration
def test_the_listing_to_a_reader_that_stopped_early_is_no_error(monkeypatch) -> None:
    """``dna_mm --list | head -1``: the pipe is closed before the listing is written."""
    from dna_mm.tools.__main__ import main

    read, write = os.pipe()
    os.close(read)
    with open(write, 'w') as out:
        monkeypatch.setattr(sys, 'stdout', out)
        with pytest.raises(SystemExit) as stop:
            main(['--list'])
    assert stop.value.code == 0


def test_the_tools_and_the_switch_from_another_folder(tmp_path) -> None:
    """``python -m dna_mm.tools`` lists and runs the tools outside the checkout; with
    ``DNA_MM_NO_MMENGINE_PATCH=1`` mmengine refuses the ``dna_mm::`` base as it stands."""
    listing = _python('-m', 'dna_mm.tools', '--list', cwd=tmp_path)
    assert listing.returncode == 0 and '\n  train\n' in listing.stdout, listing.stderr
    unknown = _python('-m', 'dna_mm.tools', 'trian', cwd=tmp_path)
    assert unknown.returncode == 2, unknown.stderr
    expected = "dna_mm: error: no tool 'trian' (did you mean 'train'? dna_mm --list lists them)\n"
    assert unknown.stderr == expected
    config = _python('-m', 'dna_mm.tools', 'train', 'dna_mm::timesformer_dna_ntu6.py', cwd=tmp_path)
    assert config.returncode == 2 and len(config.stderr.splitlines()) == 1, config.stderr
    assert 'did you mean dna_mm::timesformer_dna_ntu60.py?' in config.stderr
    (tmp_path / 'mine.py').write_text("_base_ = ['dna_mm::_base_/default_runtime.py']\n")
    parse = (
        'import dna_mm, sys; from mmengine.config import Config; '
        'print(Config.fromfile(sys.argv[1]).default_scope)'
    )
    assert _python('-c', parse, 'mine.py', cwd=tmp_path).stdout.split() == ['mmaction']
    off = _python('-c', parse, 'mine.py', cwd=tmp_path, env={**os.environ, 'DNA_MM_NO_MMENGINE_PATCH': '1'})
    assert off.returncode != 0 and 'does not support to load dna_mm config' in off.stderr


#: a stand-in for the interpreter ``dist_train.sh`` execs torchrun's agent with: it prints its pid,
#: ends 143 on ``SIGTERM`` (as the agent does once its ranks saved), else 7 after ``AGENT_S`` seconds
STAND_IN_AGENT = """#!/usr/bin/env bash
trap 'echo "agent: SIGTERM"; exit 143' TERM
echo "agent pid $$"
sleep "$AGENT_S" &
wait
exit 7
"""


def test_a_launcher_runs_its_ranks_with_the_python_that_runs_dna_mm(monkeypatch) -> None:
    """``dna_mm dist_train.sh`` from a virtual environment that is not activated: the script's
    ``${PYTHON:-python}`` is this interpreter, not the first ``python`` on ``PATH`` (another
    environment's dna_mm, or none); a ``PYTHON`` of one's own is kept."""
    execs = []

    def execvp(file: str, args: list[str]) -> None:  # what bash would run the ranks with
        execs.append(os.environ.get('PYTHON'))
        raise SystemExit(0)

    monkeypatch.setattr(os, 'execvp', execvp)
    monkeypatch.delenv('PYTHON', raising=False)
    for python in (None, '/opt/mine/python'):
        if python:
            monkeypatch.setenv('PYTHON', python)
        with pytest.raises(SystemExit):
            run('dist_train.sh', ['cfg.py', '2'])
    assert execs == [sys.executable, '/opt/mine/python']


@pytest.mark.parametrize('signum', [None, signal.SIGTERM], ids=['ends', 'SIGTERM'])
def test_a_launcher_takes_the_place_of_the_process_that_runs_it(tmp_path, signum) -> None:
    """``python -m dna_mm.tools dist_train.sh`` (the console script ``dna_mm`` alike) becomes the
    launcher: a ``SIGTERM`` to the process the user (a container's stop, a job manager) started
    reaches torchrun's agent, which has its ranks save, and the exit status is the agent's. A
    Python that waited for ``bash`` would end alone on the signal, the agent training on."""
    (agent := tmp_path / 'python').write_text(STAND_IN_AGENT)
    agent.chmod(0o755)
    out = tmp_path / 'out'
    with open(out, 'w') as log:
        proc = subprocess.Popen(
            [sys.executable, '-m', 'dna_mm.tools', 'dist_train.sh', 'cfg.py', '2'],
            cwd=tmp_path,
            env={
                **os.environ,
                'PYTHON': str(agent),
                'PYTHONPATH': str(REPO),
                'AGENT_S': '30' if signum else '1',
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.time() + 60
        while 'agent pid' not in out.read_text() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert out.read_text().split()[:3] == ['agent', 'pid', str(proc.pid)], out.read_text()
        if signum is not None:
            proc.send_signal(signum)
        code = proc.wait(timeout=60)
        assert code == (143 if signum else 7), out.read_text()
        assert ('agent: SIGTERM' in out.read_text()) == bool(signum)
    finally:
        proc.kill()
