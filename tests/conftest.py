"""Shared fixtures. Every test runs on CPU with tiny models."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch

try:  # PyAV before decord: decord loads an older libvpx process-wide, which then breaks PyAV's
    import av  # noqa: F401  VP9 encoder ("ABI version mismatch"; the decoding matrix writes VP9)
except ImportError:  # a machine without PyAV (the GPU check's)
    pass

if os.environ.get('PYTEST_XDIST_WORKER'):
    # a pytest-xdist worker (`make test` runs one per core): one thread, in this process and in
    # the tools it starts, so that the workers do not oversubscribe the cores
    os.environ['OMP_NUM_THREADS'] = '1'
    torch.set_num_threads(1)
else:
    os.environ.setdefault('OMP_NUM_THREADS', '2')
# torch.distributed's gloo (the multi-process tests) on the loopback interface: no lookup of the
# machine's host name, which an offline machine may not resolve
os.environ.setdefault('GLOO_SOCKET_IFNAME', 'lo')
# torch.compile's on-disk caches (inductor's FX graphs, AOTAutograd's) in a directory of this run:
# a cached graph is keyed on the graph, not on a custom operator's fake implementation, so a cache
# that an earlier checkout wrote may answer for operators this one changed, and tests would run
# that code instead of this checkout's
os.environ['TORCHINDUCTOR_CACHE_DIR'] = tempfile.mkdtemp(prefix='dna_mm_tests_inductor_')
atexit.register(shutil.rmtree, os.environ['TORCHINDUCTOR_CACHE_DIR'], ignore_errors=True)
if not torch.cuda.is_available():
    # Triton kernels (dna_mm.ops) run in Triton's interpreter on the CPU. Triton reads the
    # variable when it is first imported, which any earlier test module may do (torch.compile,
    # timm), so it is set here, before every test module.
    os.environ.setdefault('TRITON_INTERPRET', '1')
    # and the kernels built for it now: dna_mm.ops builds them for the interpreter only when the
    # variable is set at their first import, and a test that unsets it for a while (a CPU without
    # the interpreter) must not be that first import, whichever order the tests run in
    with contextlib.suppress(ImportError):
        import dna_mm.ops.triton_dna  # noqa: F401


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _default_scope() -> None:
    """Each test starts in MMAction2's scope (the project's default), whatever scope an earlier
    test left current: mmengine builds through the current scope's registry, so a test that
    ran after a detector's would otherwise look for MMAction2 models in MMDetection's."""
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')


@pytest.fixture(autouse=True)
def _no_console_on_a_closed_stream() -> None:
    """mmengine's loggers outlive the test that made them: a console handler left on the stream of
    an earlier test's ``capsys`` (closed since) prints to this test's stdout instead of failing."""
    import logging
    import sys

    from mmengine.logging import MMLogger

    for logger in MMLogger._instance_dict.values():
        for handler in logger.handlers:
            if type(handler) is logging.StreamHandler and getattr(handler.stream, 'closed', False):
                handler.stream = sys.stdout


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        'markers', 'slow: long-running; skipped by `make test` and CI, run by `make test-slow`'
    )
    config.addinivalue_line(
        'markers',
        'integration: runs a tool as a user does (a new Python process); `make test` runs them, '
        '`-m "not integration"` leaves them out',
    )
    config.addinivalue_line(
        'markers',
        'cuda(interpreter=False): runs on the GPU; `make test-gpu` and the GPU check run these '
        '(`-m cuda`). Skipped without CUDA, unless interpreter=True: the Triton kernel\'s tests, which '
        'run on the CPU in Triton\'s interpreter',
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        '--failures-now',
        action='store_true',
        help='print each failure (its last traceback lines) as soon as it happens, not only at '
        'the end: a run cut off by a time limit (the GPU check) still shows what failed',
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``--failures-now``: one block per failure, printed when its report arrives (with
    pytest-xdist, in the controller)."""
    config = _CONFIG.get('config')
    if not report.failed or config is None or not config.getoption('--failures-now'):
        return
    text = str(report.longrepr).rstrip().splitlines()
    print(f'\nFAILED NOW {report.nodeid} ({report.when}):\n  ' + '\n  '.join(text[-25:]), flush=True)


_CONFIG: dict[str, pytest.Config] = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG['config'] = session.config
    _REPO_RUNS['before'] = _runs_in_repo()


#: the checkout's work_dirs/ entries when the session started: a test that leaves a run there
#: (a tool run without --work-dir) fails the session
_REPO_RUNS: dict[str, set[str]] = {}


def _runs_in_repo() -> set[str]:
    """``work_dirs/<config>/<run>`` paths under the checkout."""
    root = Path(__file__).resolve().parents[1] / 'work_dirs'
    return {str(p.relative_to(root)) for p in root.glob('*/*')} if root.is_dir() else set()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, 'workerinput') or 'before' not in _REPO_RUNS:  # xdist: the controller says it
        return
    left = sorted(_runs_in_repo() - _REPO_RUNS['before'])
    if left:
        print(f'\nthe tests left runs in the checkout\'s work_dirs/ (a tool run without --work-dir): {left}')
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: why a test marked ``cuda`` skips on a machine without CUDA
NEEDS_CUDA = 'needs CUDA (make test-gpu; scripts/device/gpu_check.sh)'


def pytest_runtest_setup(item: pytest.Item) -> None:
    cuda = item.get_closest_marker('cuda')
    if cuda is not None and not cuda.kwargs.get('interpreter') and not torch.cuda.is_available():
        pytest.skip(NEEDS_CUDA)


REPO = Path(__file__).resolve().parents[1]
DEMO_CONFIG = str(REPO / 'configs' / 'timesformer_dna_demo.py')

#: tiny backbones by registry type: 32 wide, 2 heads, 2 blocks, 32-pixel inputs in 8-pixel patches
TINY_BACKBONES = {
    'DnATimeSformer': dict(
        num_frames=4, img_size=32, patch_size=8, embed_dims=32, num_heads=2, num_transformer_layers=2
    ),
    'VisionTransformer': dict(  # MMAction2's (VideoMAE)
        img_size=32, patch_size=8, embed_dims=32, depth=2, num_heads=2, num_frames=4, tubelet_size=2
    ),
    'ViTDet': dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, pretrain_img_size=32),
}


def tiny_backbone(type: str, **overrides) -> dict:
    """The registry config of a tiny ``type`` backbone (:data:`TINY_BACKBONES`), ``overrides``
    on top."""
    return dict(type=type, **{**TINY_BACKBONES[type], **overrides})


#: the tiny ImageNet sets' classes, by WordNet id
WNIDS = [f'n0{c:07d}' for c in range(4)]


def tiny_imagenet_options(root, train: bool = False, batch: int = 8) -> list[str]:
    """``--cfg-options`` for a 2-block DnA-ViT-T at 32 px (patch 8) on ``root`` (ImageNet's
    folders, the classes :data:`WNIDS`): its val and test loaders (and, with ``train``, its train
    loader and one epoch), ``batch`` images a batch, no workers."""
    classes = '[' + ','.join(WNIDS) + ']'
    opts = [
        'model.head.num_classes=4',
        'data_preprocessor.num_classes=4',  # the top-level one (model.data_preprocessor: refused)
        'model.backbone.img_size=32',
        'model.backbone.patch_size=8',
        'model.backbone.depth=2',
    ]
    for split in ('train', 'val', 'test') if train else ('val', 'test'):
        opts += [
            f'{split}_dataloader.dataset.data_root={root}',
            f'{split}_dataloader.dataset.metainfo.classes={classes}',
            f'{split}_dataloader.batch_size={batch}',
            f'{split}_dataloader.num_workers=0',
            f'{split}_dataloader.persistent_workers=False',
        ]
    if train:
        opts += ['train_dataloader.dataset.pipeline.1.scale=32', 'train_cfg.max_epochs=1']
    for split in ('val', 'test'):
        opts += [
            f'{split}_dataloader.dataset.pipeline.1.scale=36',
            f'{split}_dataloader.dataset.pipeline.2.crop_size=32',
        ]
    return opts


@pytest.fixture(scope='session')
def tiny_video_set(tmp_path_factory):
    """8 train / 4 test real mp4 clips (decord-decodable) of the demo's motion classes."""
    from dna_mm.synthetic.motion_clips import MotionDatasetSpec, ensure_motion_dataset

    root = tmp_path_factory.mktemp('videos')
    return ensure_motion_dataset(root, MotionDatasetSpec(train_per_class=2, test_per_class=1))


@pytest.fixture(scope='session')
def tiny_checkpoint(tiny_video_set, tmp_path_factory) -> Path:
    """The tiny demo model as initialised, saved as tools/test.py reads it."""
    import argparse

    from mmaction.registry import MODELS
    from mmengine.config import Config, DictAction
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options(tiny_video_set)]).o)
    torch.manual_seed(1)
    model = MODELS.build(cfg.model)
    path = tmp_path_factory.mktemp('ckpt') / 'tiny.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    return path


#: ``--cfg-options`` that make the demo a multi-label model: each class scored on its own (a sigmoid
#: head, its clips' logits averaged), its lists of several labels, the mAP metrics
MULTI_LABEL_OPTIONS = [
    'model.cls_head.multi_class=True',
    'model.cls_head.loss_cls.type=BCELossWithLogits',
    'model.cls_head.average_clips=score',
    *[
        f'{split}_dataloader.dataset.{k}'
        for split in ('train', 'val', 'test')
        for k in ('multi_class=True', 'num_classes=4')
    ],
    'val_evaluator.metric_list=mean_average_precision',
    'test_evaluator.metric_list=mean_average_precision',
]


#: the demo config made tiny: one block, 32 channels (the demo's clip: 8 frames every 2, 32x32)
TINY_DEMO_CFG = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 1,
    'model.cls_head.in_channels': 32,
    'label_map': None,
}


def tiny_demo_recognizer(root: Path, seed: int = 0) -> tuple[Path, Any]:
    """``(checkpoint, model)``: the demo recognizer made tiny (:data:`TINY_DEMO_CFG`) with random
    weights (``seed``), as MMAction2's ``init_recognizer`` builds it, saved as ``root/random.pth``."""
    from mmaction.apis import init_recognizer
    from mmengine.config import Config

    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(TINY_DEMO_CFG)
    torch.manual_seed(seed)
    model = init_recognizer(cfg, None, device='cpu')
    ckpt = root / 'random.pth'
    torch.save({'state_dict': model.state_dict()}, ckpt)
    return ckpt, model


def lists_of_another_label_set(root: Path, dest: Path) -> Path:
    """``root``'s ``train.txt`` / ``test.txt`` copied to ``dest`` without the ``classes.txt``
    beside them: lists whose labels index a config's own classes (an NTU or Kinetics-400 list, as
    MMAction2's are), which a model of that many classes may train and test on. Beside their
    ``classes.txt`` (4 classes) the datasets refuse a config of another number of classes."""
    dest.mkdir(parents=True, exist_ok=True)
    for split in ('train', 'test'):
        (dest / f'{split}.txt').write_text((root / f'{split}.txt').read_text())
    return dest


def tiny_run_options(root, attn: str = 'dna', epochs: int = 1) -> list[str]:
    """``--cfg-options`` turning the demo config into a seconds-long run on ``root``."""
    opts = [
        f'model.backbone.attn_cfg={attn}',
        'model.backbone.embed_dims=32',
        'model.backbone.num_heads=2',
        'model.backbone.num_transformer_layers=1',
        'model.cls_head.in_channels=32',
        f'train_cfg.max_epochs={epochs}',
        f'train_cfg.val_interval={epochs}',
        'default_hooks.logger.interval=1',
        'param_scheduler=[]',
    ]
    for split, ann in (('train', 'train'), ('val', 'test'), ('test', 'test')):
        opts += [
            f'{split}_dataloader.dataset.ann_file={root}/{ann}.txt',
            f'{split}_dataloader.dataset.data_prefix.video={root}/videos',
            f'{split}_dataloader.num_workers=0',
            f'{split}_dataloader.batch_size=2',
        ]
    return opts


def drawing_demo_config(tmp_path: Path) -> Path:
    """The demo config (written under ``tmp_path``) with a training pipeline whose draws change
    the clip: frame offsets (9 places for 8 frames of 16) and flips (the demo's own pipeline draws
    nothing that changes one)."""
    config = tmp_path / 'demo_drawing.py'
    config.write_text(
        f'_base_ = [{DEMO_CONFIG!r}]\n'
        'train_dataloader = dict(dataset=dict(pipeline=[\n'
        "    dict(type='DecordInit', io_backend='disk'),\n"
        "    dict(type='SampleFrames', clip_len=8, frame_interval=1, num_clips=1),\n"
        "    dict(type='DecordDecode'),\n"
        "    dict(type='Resize', scale=(32, 32), keep_ratio=False),\n"
        "    dict(type='Flip', flip_ratio=0.5),\n"
        "    dict(type='FormatShape', input_format='NCTHW'),\n"
        "    dict(type='PackActionInputs'),\n"
        ']))\n'
    )
    return config


def free_port() -> int:
    """A TCP port of 127.0.0.1 that no process listens on now (a process group's store, torchrun's)."""
    import socket

    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run_cmd(cmd: list[str], timeout: int = 600, **kwargs):
    """Run a command in the repo root; fail the test with its output on error."""
    import subprocess

    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, **kwargs)
    if proc.returncode != 0:
        pytest.fail(f'{cmd[:2]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}')
    return proc


def run_tool(args: list[str], timeout: int = 600, **kwargs):
    """Run a repo Python tool with this interpreter (see :func:`run_cmd`)."""
    import sys

    return run_cmd([sys.executable, *args], timeout=timeout, **kwargs)


def run_main(args: list[str], check: bool = True):
    """``python TOOL ARGS`` without a new interpreter: the tool's ``__main__`` block run in this
    process (``runpy``) with ``sys.argv`` set, in the repo root, stdout / stderr captured. The
    exit status is what the interpreter would give: ``SystemExit``'s code, 1 (and the
    traceback on stderr) for an exception. ``check``: fail the test on a non-zero status."""
    import contextlib
    import io
    import logging
    import runpy
    import subprocess
    import sys
    import traceback

    out, err, argv, cwd = io.StringIO(), io.StringIO(), sys.argv, os.getcwd()
    # the console handlers of loggers made before the run (mmengine's) print to the streams
    # of that time: they print to the captured ones for the run, as in a new process
    from mmengine.logging import MMLogger

    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    consoles = {
        handler: handler.stream
        for logger in [*loggers, *MMLogger._instance_dict.values()]
        for handler in getattr(logger, 'handlers', [])
        if type(handler) is logging.StreamHandler
    }
    code = 0
    try:
        os.chdir(REPO)
        sys.argv = [str(REPO / args[0]), *args[1:]]
        for handler, stream in consoles.items():  # not setStream: it flushes the old stream,
            handler.stream = err if stream in (sys.stderr, sys.__stderr__) else out  # maybe closed
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(sys.argv[0], run_name='__main__')
            except SystemExit as done:
                if isinstance(done.code, str):  # sys.exit('message')
                    print(done.code, file=sys.stderr)
                code = 1 if isinstance(done.code, str) else done.code or 0
            except Exception:  # what the interpreter does with an uncaught one
                traceback.print_exc()
                code = 1
    finally:
        for handler, stream in consoles.items():
            handler.stream = stream
        sys.argv = argv
        os.chdir(cwd)
    proc = subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    if check and proc.returncode != 0:
        pytest.fail(f'{args[:1]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}')
    return proc


def load_tool(path: str):
    """A repo tool (``tools/….py``, or a script of ``scripts/``) as a module, for calling its
    ``main(argv)``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(path).stem + '_tool', REPO / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def refused_line(tool: str, argv: list[str], capsys) -> str:
    """The error line of ``tool``'s ``main(argv)`` (a repo tool, :func:`load_tool`), which must
    exit with status 2 and print its line and the ``--debug`` hint only (``cli_main``'s form):
    no traceback, nothing on stdout (nothing measured)."""
    with pytest.raises(SystemExit) as exit_info:
        load_tool(tool).main(argv)
    out, err = capsys.readouterr()
    prog = tool.rpartition('/')[2]
    lines = err.splitlines()
    assert exit_info.value.code == 2 and len(lines) == 2, err
    assert lines[1] == f'{prog}: (--debug prints the traceback)' and out == '', (out, err)
    return lines[0].removeprefix(f'{prog}: error: ')


def tiny_runner(work_dir, root, max_epochs: int, resume: bool = False, deterministic: bool = False):
    """An in-process mmengine ``Runner`` for the tiny demo run (no validation, a checkpoint
    per epoch). ``deterministic``: fixed frame sampling and seed, for comparing runs."""
    import argparse

    from mmengine.config import Config, DictAction
    from mmengine.runner import Runner

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options(root, epochs=max_epochs)]).o)
    cfg.work_dir, cfg.resume, cfg.val_cfg = str(work_dir), resume, None
    cfg.val_dataloader = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=1)
    if deterministic:
        cfg.train_dataloader.dataset.pipeline[1]['test_mode'] = True  # SampleFrames
        cfg.randomness = dict(seed=0)
    return Runner.from_cfg(cfg)


#: ``--cfg-options`` making any configs/vitdet_*.py a tiny Mask R-CNN: backbone 32 wide, 2 blocks
#: (block 0 windowed when the config has windows), narrow neck and heads
TINY_MASK_RCNN = {
    'model.backbone.embed_dim': 32,
    'model.backbone.depth': 2,
    'model.backbone.num_heads': 2,
    'model.backbone.window_block_indexes': [0],
    'model.backbone.init_cfg': None,
    'model.neck.backbone_channel': 32,
    'model.neck.in_channels': [8, 16, 32, 32],
    'model.neck.out_channels': 16,
    'model.rpn_head.in_channels': 16,
    'model.rpn_head.feat_channels': 16,
    'model.roi_head.bbox_roi_extractor.out_channels': 16,
    'model.roi_head.mask_roi_extractor.out_channels': 16,
    'model.roi_head.bbox_head.in_channels': 16,
    'model.roi_head.bbox_head.fc_out_channels': 32,
    'model.roi_head.mask_head.in_channels': 16,
    'model.roi_head.mask_head.conv_out_channels': 16,
}


def coco_run_options(root: Path) -> dict:
    """``--cfg-options`` pointing a ViTDet config's loaders and evaluators at a generated COCO set
    ``root`` (``dna_mm.synthetic.coco_shapes``) of 64-pixel images, batch 2."""
    opts = {'model.backbone.img_size': 64, 'model.backbone.pretrain_img_size': 64}
    for split, files in (('train', 'train'), ('val', 'test'), ('test', 'test')):  # val: built, not run
        opts.update(
            {
                f'{split}_dataloader.dataset.data_root': str(root),
                f'{split}_dataloader.dataset.ann_file': f'annotations/instances_{files}.json',
                f'{split}_dataloader.dataset.data_prefix.img': f'images/{files}/',
                f'{split}_dataloader.batch_size': 2,
            }
        )
    ann = str(root / 'annotations/instances_test.json')
    opts['val_evaluator.ann_file'] = opts['test_evaluator.ann_file'] = ann
    return opts
