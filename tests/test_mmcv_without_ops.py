"""dna_mm on mmcv without its compiled ops (mmcv-lite, as a pip user may have it, or the op-less
build ``make demo`` installs): video recognition trains and tests, the ViTDet backbone and its
``SimpleFPN`` neck (plain torch) build and train, and what needs the ops (a Mask R-CNN config,
the detector demo) stops with one line naming the command that builds them.

The environment: OpenMMLab's ``mmcv-lite`` 2.0.1 wheel (from the package index, cached beside
mmcv's other wheels) installed into a folder put first on ``PYTHONPATH``, so that it takes the
place of the project's mmcv for the tools run here; the rest of the stack is the project's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO, tiny_backbone, tiny_run_options

pytestmark = pytest.mark.integration

CACHE = Path(os.environ.get('DNA_MM_CACHE', Path.home() / '.cache' / 'dna_mm')) / 'wheels' / 'mmcv-lite-2.0.1'


@pytest.fixture(scope='module')
def lite_env(tmp_path_factory) -> dict:
    """The environment variables of a run whose ``mmcv`` is mmcv-lite 2.0.1."""
    if not list(CACHE.glob('mmcv_lite-2.0.1-*.whl')):
        pip = [sys.executable, '-m', 'pip', '--disable-pip-version-check']
        fetch = pip + [
            'download',
            '-q',
            '--no-deps',
            '--only-binary=:all:',
            'mmcv-lite==2.0.1',
            '-d',
            str(CACHE),
        ]
        subprocess.run(fetch, check=True, capture_output=True, timeout=300)
    site = tmp_path_factory.mktemp('mmcv_lite')
    wheel = next(CACHE.glob('mmcv_lite-2.0.1-*.whl'))
    install = [sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-index', '--target', str(site)]
    subprocess.run(install + [str(wheel)], check=True, capture_output=True, timeout=300)
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_environment_has_no_ops_and_dna_mm_imports(lite_env) -> None:
    code = 'import mmcv, dna_mm; from dna_mm.utils.mmcv_ops import has_ops; print(mmcv.__file__, has_ops())'
    proc = _run(['-c', code], lite_env)
    assert proc.returncode == 0, proc.stderr
    where, ops = proc.stdout.split()[-2:]
    assert 'mmcv_lite' in where and ops == 'False'
    assert _run(['-c', 'import mmcv.ops'], lite_env).returncode != 0  # really without the ops


def test_no_warning_about_the_missing_detection_op(lite_env) -> None:
    """mmcv-lite warns at every import of its transformer bricks (in every process of a run) that
    MultiScaleDeformableAttention is missing; after ``import dna_mm`` that warning is not shown,
    and other warnings still are."""
    code = (
        'import warnings, dna_mm, mmcv.cnn.bricks.transformer, mmaction.models; '
        "warnings.warn('another warning')"
    )
    proc = _run(['-W', 'default', '-c', code], lite_env)
    assert proc.returncode == 0, proc.stderr
    assert 'MultiScaleDeformableAttention' not in proc.stderr, proc.stderr
    assert 'another warning' in proc.stderr
    bare = _run(['-W', 'default', '-c', 'import mmcv.cnn.bricks.transformer'], lite_env)
    assert 'Fail to import ``MultiScaleDeformableAttention``' in bare.stderr  # what it quiets


def test_video_recognition_trains_and_tests(lite_env, tiny_video_set, tmp_path) -> None:
    work = tmp_path / 'w'
    opts = tiny_run_options(tiny_video_set)
    train = _run(['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--cfg-options', *opts], lite_env)
    assert train.returncode == 0, train.stderr[-3000:]
    args = [DEMO_CONFIG, str(work / 'epoch_1.pth'), '--work-dir', str(work), '--cfg-options', *opts]
    test = _run(['tools/test.py', *args], lite_env)
    assert test.returncode == 0, test.stderr[-3000:]
    assert 'acc/top1' in test.stdout + test.stderr


#: the ViTDet backbone (a windowed block with relative positions, a global one) and its neck,
#: built from the root registry with and without MMAction2's scope current, trained one step
VITDET_AND_NECK = """
import sys
import torch
import dna_mm
from mmengine.registry import MODELS, DefaultScope
from dna_mm.utils.mmcv_ops import has_ops

assert not has_ops()
neck = dict(type='SimpleFPN', backbone_channel=32, in_channels=[8, 16, 32, 32], out_channels=16,
            num_outs=5, norm_cfg=dict(type='LN2d', eps=1e-6))
for scope in (None, 'mmaction'):
    with DefaultScope.overwrite_default_scope(scope):
        model = torch.nn.Sequential(MODELS.build(BACKBONE), MODELS.build(neck))
    outs = model(torch.randn(2, 3, 32, 32))
    sum(out.square().mean() for out in outs).backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.isfinite().all()]
    assert not missing, missing
    print(scope, [tuple(out.shape) for out in outs])
print('ops imported:', 'mmcv._ext' in sys.modules)
"""


def test_the_vitdet_backbone_and_its_neck_build_and_train(lite_env) -> None:
    backbone = tiny_backbone('ViTDet', window_size=2, window_block_indexes=[0], use_rel_pos=True)
    proc = _run(['-c', f'BACKBONE = {backbone!r}' + VITDET_AND_NECK], lite_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shapes = [(2, 16, side, side) for side in (16, 8, 4, 2, 1)]  # strides 2..32 of the 32-pixel image
    assert proc.stdout.splitlines() == [f'None {shapes}', f'mmaction {shapes}', 'ops imported: False']


#: the GPU check's ViTDet step at the CPU's size (scripts/device/gpu_check.py, rehearsal profile)
TINY_VITDET = [
    'model.backbone.img_size=64', 'model.backbone.patch_size=8', 'model.backbone.embed_dim=64',
    'model.backbone.depth=3', 'model.backbone.num_heads=2', 'model.backbone.window_size=4',
    'model.backbone.window_block_indexes=[0,1]', 'model.backbone.pretrain_img_size=32',
    'model.neck.backbone_channel=64', 'model.neck.in_channels=[16,32,64,64]', 'model.neck.out_channels=32',
    'optim_wrapper.paramwise_cfg.num_layers=3',
]  # fmt: skip


def test_the_vitdet_backbone_step_of_a_detection_config(lite_env, tmp_path) -> None:
    """A Mask R-CNN config's backbone and neck alone (``benchmark_train_step.py --part backbone``,
    as the GPU check runs it where the kit has mmcv-lite): built from the config without
    MMDetection's models, so without the ops."""
    out = tmp_path / 'step.json'
    args = ['tools/benchmarks/benchmark_train_step.py', '--configs', 'configs/vitdet_softmax_coco_lsj.py']
    args += ['configs/vitdet_dna_coco_lsj.py', '--part', 'backbone', '--device', 'cpu', '--reps', '1']
    proc = _run([*args, '--batch', '1', '--json', str(out), '--cfg-options', *TINY_VITDET], lite_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file() and 'vitdet_dna_coco_lsj' in out.read_text()


@pytest.mark.parametrize(
    'args',
    [
        ['tools/train.py', 'configs/vitdet_dna_demo.py', '--work-dir', 'WORK'],
        ['tools/analysis/get_flops.py', 'configs/vitdet_dna_demo.py'],  # the Mask R-CNN built, no run
        ['tools/demos/demo_det.py', '--iters', '1', '--work-dir', 'WORK'],
    ],
    ids=['mask_rcnn_config', 'mask_rcnn_build', 'demo_det'],
)
def test_what_needs_the_ops_says_so_in_one_line(lite_env, args, tmp_path) -> None:
    proc = _run([str(tmp_path / 'w') if arg == 'WORK' else arg for arg in args], lite_env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if ': error: ' in line]
    assert len(errors) == 1 and "mmcv's compiled ops are needed" in errors[0], proc.stderr[-3000:]
    assert "'make install'" in errors[0] and 'Traceback' not in proc.stderr
