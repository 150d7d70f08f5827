"""dna_mm as a pip user gets it: the wheel built from a copy of the sources, installed (no ``-e``)
into a fresh environment beside the project's, used from a project folder outside the repo: a
config inheriting ``dna_mm::`` bases, trained and tested with the installed tools (the console
script, ``python -m dna_mm.tools``) and tested again with MMAction2's stock ``tools/test.py``
through ``python -m dna_mm.launch``; the video demo run there, writing its data and runs in that
folder, none in site-packages. Slow: about two minutes on 2 CPU cores."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, tiny_run_options

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f'{cmd[:4]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}')
    return proc


@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the sources (links kept, no build/ left over from the checkout)."""
    src = tmp_path_factory.mktemp('src')
    skip = shutil.ignore_patterns('__pycache__', '*.pyc')
    for name in ('setup.py', 'MANIFEST.in', 'README.md', 'pyproject.toml'):
        shutil.copy2(REPO / name, src / name)
    for name in ('requirements', 'dna_mm', 'configs', 'tools'):
        shutil.copytree(REPO / name, src / name, symlinks=True, ignore=skip)
    out = tmp_path_factory.mktemp('dist')
    pip = [sys.executable, '-m', 'pip', '--disable-pip-version-check']
    _run([*pip, 'wheel', '--no-deps', '--no-build-isolation', '--quiet', '-w', str(out), str(src)], cwd=src)
    (whl,) = out.glob('dna_mm-*.whl')
    return whl


@pytest.fixture(scope='module')
def fresh(wheel, tmp_path_factory) -> Path:
    """A new venv whose site-packages reaches the project's through a ``.pth`` line (after its
    own), with the wheel installed into it: its dna_mm shadows the project's editable one."""
    env_dir = tmp_path_factory.mktemp('env') / 'fresh'
    _run([sys.executable, '-m', 'venv', '--without-pip', str(env_dir)], cwd=env_dir.parent)
    python = env_dir / 'bin' / 'python'
    site = Path(
        _run(
            [str(python), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], cwd=env_dir
        ).stdout.strip()
    )
    (site / 'project_env.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    _run(
        [
            str(python),
            '-m',
            'pip',
            'install',
            '--no-deps',
            '--no-index',
            '--ignore-installed',
            '--quiet',
            str(wheel),
        ],
        cwd=env_dir,
    )
    return env_dir


def test_the_wheel_holds_every_config_and_tool(wheel) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ('configs', 'tools'):
        files = [p for p in (REPO / folder).rglob('*') if p.is_file() and '__pycache__' not in p.parts]
        assert files
        missing = [p for p in files if f'dna_mm/.mim/{p.relative_to(REPO).as_posix()}' not in names]
        assert not missing, missing
    assert 'dna_mm/tools/__main__.py' in names


def test_train_and_test_from_a_project_folder(fresh, tiny_video_set, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    env['PATH'] = f'{fresh / "bin"}{os.pathsep}{env["PATH"]}'
    python = str(fresh / 'bin' / 'python')
    where = _run(
        [
            python,
            '-c',
            'import dna_mm; from dna_mm.utils.mim_compat import mim_folder; '
            'print(dna_mm.__file__); print(mim_folder("configs"))',
        ],
        cwd=tmp_path,
        env=env,
    ).stdout.split()
    package = Path(where[0]).parent
    assert package.is_relative_to(fresh) and not Path(where[0]).is_relative_to(REPO), where
    assert Path(where[1]) == package / '.mim' / 'configs' and not Path(where[1]).is_symlink()

    project = tmp_path / 'project'
    project.mkdir()
    (project / 'tiny.py').write_text(
        "_base_ = ['dna_mm::timesformer_dna_demo.py']\ndefault_hooks = dict(checkpoint=dict(interval=1))\n"
    )
    opts = ['--cfg-options', *tiny_run_options(tiny_video_set)]
    _run(
        [str(fresh / 'bin' / 'dna_mm'), 'train', 'tiny.py', '--work-dir', 'run', *opts], cwd=project, env=env
    )
    ckpt = project / 'run' / 'epoch_1.pth'
    assert ckpt.is_file()
    out = _run(
        [python, '-m', 'dna_mm.tools', 'test', 'tiny.py', str(ckpt), '--work-dir', 'run', *opts],
        cwd=project,
        env=env,
    ).stdout
    assert any(ln.startswith('Test results: top-1: ') for ln in out.splitlines()), out[-2000:]

    stock = _run(
        [python, '-c', 'import mmaction, os; print(os.path.dirname(mmaction.__file__))'], cwd=project, env=env
    )
    script = Path(stock.stdout.strip()) / '.mim' / 'tools' / 'test.py'
    if not script.is_file():
        pytest.skip('mmaction2 ships no .mim/tools/test.py')
    out = _run(
        [python, '-m', 'dna_mm.launch', str(script), 'tiny.py', str(ckpt), '--work-dir', 'stock', *opts],
        cwd=project,
        env=env,
    )
    assert 'acc/top1' in out.stdout + out.stderr


def _files(folder: Path) -> set[str]:
    """The files under ``folder`` but Python's byte-code caches."""
    return {str(p.relative_to(folder)) for p in folder.rglob('*') if p.is_file() and p.suffix != '.pyc'}


def test_the_demo_writes_its_data_and_runs_in_the_current_folder(fresh, tmp_path) -> None:
    """``dna_mm demo`` from an installed dna_mm (the tiny model of the demo tests, one epoch):
    its clips and runs under the folder it runs in, nothing new in site-packages (``pip
    uninstall`` would leave it there); then a config of that folder inheriting the demo trains
    on those clips, saying nothing about the data; then the study (one run) works there too."""
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    env['PATH'] = f'{fresh / "bin"}{os.pathsep}{env["PATH"]}'
    python = str(fresh / 'bin' / 'python')
    site = Path(
        _run(
            [python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], tmp_path, env
        ).stdout.strip()
    )
    before = _files(site)
    project = tmp_path / 'project'
    project.mkdir()
    tiny = [o for o in tiny_run_options(tmp_path / 'nowhere') if '_dataloader.' not in o]  # the model
    tiny += [f'{split}_dataloader.num_workers=0' for split in ('train', 'val', 'test')]
    out = _run(
        [str(fresh / 'bin' / 'dna_mm'), 'demo', '--epochs', '1', '--cfg-options', *tiny], cwd=project, env=env
    ).stdout
    assert '-m dna_mm.tools train dna_mm::timesformer_dna_demo.py' in out, out[-3000:]  # the installed tools
    assert re.search(r'dna\s+top-1\s+[\d.]+%', out), out[-3000:]
    assert (project / 'data' / 'demo' / 'train.txt').is_file() and (
        project / 'data' / 'demo' / 'videos'
    ).is_dir()
    assert (project / 'work_dirs' / 'demo' / 'dna' / 'epoch_1.pth').is_file()
    assert _files(site) == before

    (project / 'mine.py').write_text("_base_ = ['dna_mm::timesformer_dna_demo.py']\n")
    _run(
        [python, '-m', 'dna_mm.tools', 'train', 'mine.py', '--work-dir', 'mine', '--cfg-options', *tiny],
        project,
        env,
    )
    assert (project / 'mine' / 'epoch_1.pth').is_file()
    assert _files(site) == before

    # the study, installed: its runs, held-out sets and report in this folder too
    study = [python, '-m', 'dna_mm.tools', 'analysis/study', '--methods', 'softmax', '--seeds', '1']
    study += ['--epochs', '1', '--distractors', '2', '--likeness', 'demo', '--heldout-per-class', '1']
    _run([*study, '--cfg-options', *tiny], project, env)
    assert (project / 'work_dirs' / 'study' / 'runs' / 'softmax_seed0' / 'result.json').is_file()
    assert (project / 'work_dirs' / 'study' / 'table.md').is_file()
    assert (project / 'data' / 'demo_heldout' / 'demo_2' / 'test.txt').is_file()
    assert _files(site) == before


#: a project's config: the shipped MMPretrain ViT example (the README's recipe on an
#: ``mmpretrain::`` base) made tiny, on an image folder of 4 classes
MMPRETRAIN_TINY = """
_base_ = ['dna_mm::examples/mmpretrain_vit-b16_dna_in1k.py']
model = dict(
    backbone=dict(
        model=dict(
            arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=4, feedforward_channels=64),
            img_size=32, patch_size=8)),
    head=dict(in_channels=32, hidden_dim=64, num_classes=4))
data_preprocessor = dict(num_classes=4)  # the base's top-level one, with its mean / std / to_rgb
classes = ['a', 'b', 'c', 'd']
train_pipeline = [
    dict(type='LoadImageFromFile'), dict(type='RandomResizedCrop', scale=32), dict(type='PackInputs')]
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='ResizeEdge', scale=36, edge='short'),
                 dict(type='CenterCrop', crop_size=32), dict(type='PackInputs')]
train_dataloader = dict(batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(data_root='images', metainfo=dict(classes=classes), pipeline=train_pipeline))
val_dataloader = dict(batch_size=8, num_workers=0, persistent_workers=False,
    dataset=dict(data_root='images', metainfo=dict(classes=classes), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1,))
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=1, val_interval=1)
param_scheduler = []
default_hooks = dict(logger=dict(interval=1))
"""


def _image_folders(root: Path) -> None:
    """MMPretrain's ``ImageNet`` folder layout: ``train/<class>/*.JPEG`` (6 each), ``val/`` (2 each)."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    for split, n in (('train', 6), ('val', 2)):
        for c, name in enumerate('abcd'):
            (root / split / name).mkdir(parents=True)
            for i in range(n):
                img = np.full((40, 40, 3), 60.0) + rng.normal(0, 20, (40, 40, 3))
                img[..., c % 3] += 120
                cv2.imwrite(str(root / split / name / f'{name}{i}.JPEG'), img.clip(0, 255).astype(np.uint8))


def test_the_recipe_on_an_mmpretrain_vit_trains_with_the_stock_tools(fresh, tmp_path) -> None:
    """A project config inheriting the shipped MMPretrain example by ``dna_mm::``, trained and
    tested with MMPretrain's own ``tools/train.py`` / ``test.py`` through ``python -m
    dna_mm.launch``: the ViT's 2 attentions are DnA's."""
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    python = str(fresh / 'bin' / 'python')
    stock = _run(
        [python, '-c', 'import mmpretrain, os; print(os.path.dirname(mmpretrain.__file__))'],
        cwd=tmp_path,
        env=env,
    )
    tools = Path(stock.stdout.strip()) / '.mim' / 'tools'
    if not (tools / 'train.py').is_file():
        pytest.skip('mmpretrain ships no .mim/tools/train.py')
    project = tmp_path / 'project'
    project.mkdir()
    _image_folders(project / 'images')
    (project / 'tiny.py').write_text(MMPRETRAIN_TINY)
    train = [python, '-m', 'dna_mm.launch', str(tools / 'train.py'), 'tiny.py', '--work-dir', 'run']
    out = _run(train, cwd=project, env=env)
    assert 'loss:' in out.stdout + out.stderr
    ckpt = project / 'run' / 'epoch_1.pth'
    assert ckpt.is_file()
    keys = f'from dna_mm.checkpoint import read_checkpoint as r; print(list(r({str(ckpt)!r})["state_dict"]))'
    state = _run([python, '-c', keys], cwd=project, env=env).stdout
    for key in ('q_neg.weight', 'v_neg.weight', 'alpha'):
        assert f'backbone.layers.1.attn.attn.{key}' in state, key
    test = [python, '-m', 'dna_mm.launch', str(tools / 'test.py'), 'tiny.py', str(ckpt), '--work-dir', 'run']
    out = _run(test, cwd=project, env=env)
    assert 'accuracy/top1' in out.stdout + out.stderr
