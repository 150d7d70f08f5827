#!/usr/bin/env python
"""The GPU check's steps: correctness, the attention benchmark, train steps and the real tools,
each under its own time cap, each result written to ``OUT`` as soon as the step ends.

    bash scripts/device/gpu_check.sh [--only STEP ...]   # on the GPU machine: installs the kit, runs this
    python scripts/device/gpu_check.py --out DIR [--profile gpu|rehearsal] [--only STEP ...]

Steps (``STEPS``; a step that fails or runs out of time is recorded, and the next one runs):

- ``environment``: Python, torch, triton, numpy, the OpenMMLab packages, where ``dna_mm`` is
  imported from, the GPU and its compute capability.
- ``tests``: the CUDA tests (marked ``cuda``, as ``make test-gpu`` runs them): the family
  against float64 in fp32 / bf16 / fp16, the SDPA kernels each branch takes, the Triton kernel
  at real shapes, AMP.
- ``attention``: ``tools/benchmarks/benchmark_attention.py`` in bf16, core and module scopes:
  softmax, DnA over SDPA (two calls; one over the queries stacked; the sign and α folded), DnA
  and softmax through the Triton kernel (at 8 tokens its packed short-sequence form), Diff,
  Cog, at TimeSformer-B's divided shapes for a batch of 8 clips, joint space-time (1 × 1569)
  and the ViTDet-B global block (1 × 4096 with its rel-pos bias).
- ``train_steps``: ``tools/benchmarks/benchmark_train_step.py``: TimeSformer-B/16 8×224², batch 8,
  the configs' AMP rule (bf16 from sm80): softmax, DnA, DnA with its temporal step over the
  stacked queries, and through the Triton kernel's packed short-sequence form, and softmax
  through that form, with ``--kernels`` (the GPU time by operator); with mmcv's compiled ops, the
  whole ViTDet-B Mask R-CNN at 1024², batch 1: softmax vs DnA, with ``--kernels`` (without
  them, the ViTDet-B backbone + neck alone).
- ``tools``: ``tools/train.py`` (``--amp``, one epoch) and ``tools/test.py`` on the demo config
  and data, then a resume from that checkpoint to a second epoch and its test.
- ``detector`` (mmcv's compiled ops): ``tools/train.py configs/vitdet_dna_demo.py --amp`` on the
  generated COCO-format set, then ``tools/test.py`` of its last checkpoint (bbox and segm mAP).
- ``compiled``: TimeSformer-B train steps with ``torch.compile`` (inductor), softmax vs DnA,
  last, so that the compiler's time cannot cut the other steps short.

Profiles: ``gpu`` (CUDA present: the real shapes) and ``rehearsal`` (no CUDA: the same steps on
the CPU at tiny shapes, the Triton kernel in its interpreter), which ``make device-rehearsal``
runs before a GPU is ever used. ``OUT`` receives ``results.json`` and ``report.md`` (rewritten
after every step), ``log.txt`` (every command's output) and ``tests.xml`` (JUnit). The last
lines printed are the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable

#: the test modules that hold CUDA tests: those that mark a test ``cuda`` (tests/conftest.py), so
#: that pytest collects only modules whose imports the device kit provides
CUDA_TEST_PATHS = tuple(
    str(path.relative_to(REPO))
    for path in sorted((REPO / 'tests').rglob('test_*.py'))
    if 'pytest.mark.cuda' in path.read_text(encoding='utf-8')
)
#: left to ``make test``: compiling every kernel for every GPU target is CPU work (minutes)
CPU_ONLY_TESTS = 'not every_kernel_fits_every_target'

#: ``rehearsal``: the tiny TimeSformer / ViTDet of the test suite, through ``--cfg-options``
TINY_TIMESFORMER = (
    'model.backbone.embed_dims=64 model.backbone.num_heads=2 model.backbone.num_transformer_layers=2 '
    'model.backbone.img_size=32 model.backbone.patch_size=8 model.backbone.num_frames=4 '
    'model.cls_head.in_channels=64'
).split()
TINY_VITDET = (
    'model.backbone.img_size=64 model.backbone.patch_size=8 model.backbone.embed_dim=64 '
    'model.backbone.depth=3 model.backbone.num_heads=2 model.backbone.window_size=4 '
    'model.backbone.window_block_indexes=[0,1] model.backbone.pretrain_img_size=32 '
    'model.neck.backbone_channel=64 model.neck.in_channels=[16,32,64,64] model.neck.out_channels=32 '
    'optim_wrapper.paramwise_cfg.num_layers=3'
).split()

#: ``rehearsal``: the tiny ViTDet as a whole Mask R-CNN (neck and heads 32 wide, the 64² images
#: not padded to the recipe's 1024²)
TINY_MASK_RCNN = (
    TINY_VITDET
    + (
        'model.data_preprocessor.batch_augments=None '
        'model.rpn_head.in_channels=32 model.rpn_head.feat_channels=32 '
        'model.roi_head.bbox_roi_extractor.out_channels=32 model.roi_head.mask_roi_extractor.out_channels=32 '
        'model.roi_head.bbox_head.in_channels=32 model.roi_head.bbox_head.fc_out_channels=64 '
        'model.roi_head.mask_head.in_channels=32 model.roi_head.mask_head.conv_out_channels=32'
    ).split()
)


def has_mmcv_ops() -> bool:
    """Whether mmcv's compiled ops are installed (mmcv, not mmcv-lite): Mask R-CNN needs them."""
    import importlib.util

    return importlib.util.find_spec('mmcv._ext') is not None


@dataclass
class Context:
    """What a step needs: the profile, where results go, a scratch folder, and when the step
    that runs started (``time.time()``)."""

    profile: str
    out: Path
    scratch: Path
    workers: int
    started: float = 0.0

    @property
    def gpu(self) -> bool:
        return self.profile == 'gpu'


@dataclass
class Step:
    """One step: the commands it runs (in order, stopping at the first failure), its cap in
    seconds per profile (on a GPU they add up to ``GPU_CAPS_S`` at most), what it reads back from
    the files its commands wrote, and its section of ``report.md``."""

    name: str
    caps: dict[str, int]
    commands: Callable[[Context], list[list[str]]]
    collect: Callable[[Context], dict] = lambda ctx: {}
    markdown: Callable[[Context, dict], str] = lambda ctx, data: ''


# -- environment --------------------------------------------------------------------------------
def environment() -> dict:
    """Versions and the device, as this Python sees them (``--environment``)."""
    import importlib.metadata as md
    import platform

    info: dict = dict(python=platform.python_version(), executable=sys.executable)
    stack = ('torch', 'triton', 'numpy', 'mmengine', 'mmcv-lite', 'mmcv', 'mmaction2', 'mmdet', 'timm')
    for dist in stack + ('decord', 'av', 'opencv-python-headless', 'dna_mm'):
        try:
            info[dist] = md.version(dist)
        except md.PackageNotFoundError:
            info[dist] = None  # not installed
    import torch

    import dna_mm

    info['dna_mm_imported_from'] = str(Path(dna_mm.__file__).parent)
    info['cuda'] = torch.version.cuda
    info['cuda_available'] = torch.cuda.is_available()
    if has_mmcv_ops():  # the CUDA version mmcv's ops were compiled with ('not available': CPU only)
        from mmcv.ops import get_compiling_cuda_version

        info['mmcv_ops_cuda'] = get_compiling_cuda_version()
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info['gpu'] = dict(
            name=p.name,
            capability=list(torch.cuda.get_device_capability(0)),
            memory_gib=round(p.total_memory / 2**30, 1),
            multiprocessors=p.multi_processor_count,
            count=torch.cuda.device_count(),
        )
    info['triton_interpret'] = os.environ.get('TRITON_INTERPRET')
    return info


def _env_commands(ctx: Context) -> list[list[str]]:
    cmds = [[PY, __file__, '--environment', str(ctx.scratch / 'environment.json')]]
    if ctx.gpu:
        cmds.insert(0, ['nvidia-smi'])
    return cmds


def _env_markdown(ctx: Context, data: dict) -> str:
    lines = ['| | |', '|---|---|'] + [f'| {k} | {v} |' for k, v in data.items()]
    return '\n'.join(lines)


# -- tests ------------------------------------------------------------------------------------
def _test_commands(ctx: Context) -> list[list[str]]:
    return [
        [
            PY,
            '-m',
            'pytest',
            *CUDA_TEST_PATHS,
            '-m',
            'cuda',
            '-k',
            CPU_ONLY_TESTS,
            '-q',
            '-rfE',
            '--failures-now',
        ]
        + ['-p', 'no:cacheprovider']
        + ['-n', str(ctx.workers), '--durations', '10', '--junitxml', str(ctx.out / 'tests.xml')]
    ]


def read_junit(path: Path) -> dict:
    """Counts and failures of a JUnit file (pytest's ``--junitxml``)."""
    if not path.exists():
        return {}
    counts = dict(passed=0, failed=0, errors=0, skipped=0)
    failures = []
    for case in ET.parse(path).getroot().iter('testcase'):
        kinds = {child.tag for child in case}
        name = f"{case.get('classname')}::{case.get('name')}"
        if 'failure' in kinds or 'error' in kinds:
            counts['failed' if 'failure' in kinds else 'errors'] += 1
            child = case.find('failure') if 'failure' in kinds else case.find('error')
            failures.append(dict(test=name, message=(child.get('message') or '')[:300]))
        elif 'skipped' in kinds:
            counts['skipped'] += 1
        else:
            counts['passed'] += 1
    return dict(counts, failures=failures)


def _test_markdown(ctx: Context, data: dict) -> str:
    if not data:
        return 'no JUnit file was written'
    text = ', '.join(f'{data[k]} {k}' for k in ('passed', 'failed', 'errors', 'skipped'))
    return '\n'.join([text] + [f'- `{f["test"]}`: {f["message"]}' for f in data['failures']])


# -- attention benchmark ------------------------------------------------------------------------
#: DnA's default route, its candidates and the baselines (the one-call-over-2H route and the eager
#: one, measured on an H100 and an H200, were slower at every shape: docs/benchmarks.md)
ATTENTION_METHODS = [
    'softmax',
    'dna_fast',
    'dna_stacked',
    'dna_folded',
    'dna_triton',
    'softmax_triton',
    'diff',
    'cog',
]
#: (name, shapes, clips): the divided shapes at the paper's 8 clips, the long ones at one
ATTENTION_RUNS = (('divided', ['spatial', 'temporal'], 8), ('long', ['joint', 'vitdet_global'], 1))


def _attention_commands(ctx: Context) -> list[list[str]]:
    cmds = []
    for name, shapes, clips in ATTENTION_RUNS:
        cmd = [
            PY,
            'tools/benchmarks/benchmark_attention.py',
            '--shapes',
            *shapes,
            '--methods',
            *ATTENTION_METHODS,
        ]
        cmd += ['--json', str(ctx.scratch / f'attention_{name}.json')]
        cmd += ['--out', str(ctx.scratch / f'attention_{name}.md')]
        if ctx.gpu:
            cmd += ['--device', 'cuda', '--dtype', 'bfloat16', '--clips', str(clips), '--reps', '15']
        else:  # the interpreter's tl.dot mishandles bf16: the rehearsal runs fp32
            cmd += ['--device', 'cpu', '--dtype', 'float32', '--clips', '1', '--reps', '1', '--tiny']
        cmds.append(cmd)
    return cmds


def _attention_collect(ctx: Context) -> dict:
    return {
        name: json.loads(path.read_text())
        for name, _, _ in ATTENTION_RUNS
        if (path := ctx.scratch / f'attention_{name}.json').exists()
    }


def _attention_markdown(ctx: Context, data: dict) -> str:
    """The tables the benchmark wrote (``--out``) for the runs it finished."""
    return '\n\n'.join((ctx.scratch / f'attention_{name}.md').read_text().rstrip('\n') for name in data)


# -- train steps ------------------------------------------------------------------------------
#: softmax, DnA's default route and its two candidates for the temporal step's 8 tokens: one SDPA
#: call over the stacked queries, the Triton kernel's packed short-sequence form, and softmax in
#: that kernel's one-branch form, its baseline (the one-call over 2H route's and the tiled Triton
#: kernel's steps were slower wherever measured: docs/benchmarks.md)
TIMESFORMER_CONFIGS = [
    'configs/timesformer_softmax_k400.py',
    'configs/timesformer_dna_k400.py',
    'configs/timesformer_dna_stacked_k400.py',
    'configs/timesformer_dna_triton_temporal_k400.py',
    'configs/timesformer_softmax_triton_temporal_k400.py',
]
VITDET_CONFIGS = ['configs/vitdet_softmax_coco_lsj.py', 'configs/vitdet_dna_coco_lsj.py']


def _train_step_commands(ctx: Context) -> list[list[str]]:
    tool = [PY, 'tools/benchmarks/benchmark_train_step.py']
    timesformer = tool + [
        '--configs',
        *TIMESFORMER_CONFIGS,
        '--json',
        str(ctx.scratch / 'step_timesformer.json'),
    ]
    # the whole Mask R-CNN at 1024² (its RoI ops need mmcv's), else the backbone and neck alone
    part, name, tiny = (
        ('model', 'mask_rcnn', TINY_MASK_RCNN) if has_mmcv_ops() else ('backbone', 'vitdet', TINY_VITDET)
    )
    vitdet = tool + [
        '--configs',
        *VITDET_CONFIGS,
        '--part',
        part,
        '--json',
        str(ctx.scratch / f'step_{name}.json'),
    ]
    if ctx.gpu:
        return [
            timesformer + ['--device', 'cuda', '--batch', '8', '--reps', '10', '--kernels'],
            vitdet + ['--device', 'cuda', '--batch', '1', '--reps', '5', '--kernels'],
        ]
    cpu = ['--device', 'cpu', '--reps', '1', '--kernels']
    return [
        timesformer + cpu + ['--batch', '2', '--cfg-options', *TINY_TIMESFORMER],
        vitdet + cpu + ['--batch', '1', '--cfg-options', *tiny],
    ]


def _step_tables(*names: str) -> Callable[[Context], dict]:
    """A step's ``collect``: the tables ``benchmark_train_step.py --json`` wrote (``step_{name}.json``)."""

    def collect(ctx: Context) -> dict:
        return {
            name: json.loads(path.read_text())
            for name in names
            if (path := ctx.scratch / f'step_{name}.json').exists()
        }

    return collect


_train_step_collect = _step_tables('timesformer', 'mask_rcnn', 'vitdet')


def _train_step_markdown(ctx: Context, data: dict) -> str:
    parts = []
    for name, run in data.items():
        ref = run['rows'][0]
        amp = run['amp_dtype'] or "the configs' rule"
        kernels = 'kernels' in ref  # benchmark_train_step.py --kernels
        lines = [
            f'**{name}** ({run["device"]}, batch {run["batch"]}, {run["part"]}, AMP: {amp})',
            '',
            '| config | params | step | ratio | peak memory | ratio | per second |'
            + (' GPU busy | kernels |' if kernels else ''),
            '|---|---|---|---|---|---|---|' + ('---|---|' if kernels else ''),
        ]
        for r in run['rows']:
            peak = r['peak_bytes']
            mem = f'{peak / 2**30:.2f} GiB | {peak / ref["peak_bytes"]:.2f}×' if peak else 'n/a | n/a'
            busy = f' {1e3 * r["busy_s"]:.1f} ms | {r["kernels"]} |' if kernels else ''
            lines.append(
                f'| `{r["config"]}` | {r["params"] / 1e6:.2f}M | {1e3 * r["step_s"]:.1f} ms | '
                f'{r["step_s"] / ref["step_s"]:.2f}× | {mem} | {r["per_s"]:.1f} |{busy}'
            )
        if kernels:  # where the GPU time goes, operator by operator
            from dna_mm.benchmarks.train_step import operator_table

            works = [{k: tuple(v) for k, v in r['by_operator'].items()} for r in run['rows']]
            lines += ['', operator_table([r['label'] for r in run['rows']], works)]
        parts.append('\n'.join(lines))
    return '\n\n'.join(parts)


# -- the real tools ---------------------------------------------------------------------------
DEMO = 'configs/timesformer_dna_demo.py'


def _tools_commands(ctx: Context) -> list[list[str]]:
    work = str(ctx.scratch / 'demo')
    make_data = [
        PY,
        '-c',
        'from dna_mm.synthetic.motion_clips import ensure_motion_dataset as m; print(m("data/demo"))',
    ]
    train = [PY, 'tools/train.py', DEMO, '--amp', '--work-dir', work, '--seed', '0']
    return [
        make_data,
        train + ['--cfg-options', 'train_cfg.max_epochs=1'],
        [
            PY,
            'tools/test.py',
            DEMO,
            f'{work}/epoch_1.pth',
            '--work-dir',
            work,
            '--dump',
            f'{work}/scores.pkl',
        ],
        train + ['--resume', '--cfg-options', 'train_cfg.max_epochs=2'],
        [PY, 'tools/test.py', DEMO, f'{work}/epoch_2.pth', '--work-dir', work],
    ]


def _tools_collect(ctx: Context) -> dict:
    """The tests' results (the metrics each wrote in the work dir during this step, as the line
    ``tools/test.py`` prints), whether the training resumed, the AMP lines of the log."""
    from dna_mm.config import format_metrics
    from dna_mm.utils.tool_runs import read_test_runs

    log = (ctx.scratch / 'tools.log').read_text() if (ctx.scratch / 'tools.log').exists() else ''
    tests = [format_metrics(metrics) for metrics in read_test_runs(ctx.scratch / 'demo', since=ctx.started)]
    return dict(
        test_results=tests,
        resumed='resumed' in log.lower() and (ctx.scratch / 'demo' / 'epoch_2.pth').exists(),
        amp=sorted({line.split(' - ')[-1].strip() for line in log.splitlines() if 'INFO - AMP: ' in line}),
    )


def _tools_markdown(ctx: Context, data: dict) -> str:
    lines = [f'- {t}' for t in data.get('test_results', [])]
    lines.append(f'- resumed from epoch 1 to 2: {data.get("resumed")}')
    return '\n'.join(lines + [f'- {a}' for a in data.get('amp', [])])


def _compiled_commands(ctx: Context) -> list[list[str]]:
    """TimeSformer softmax / DnA with ``torch.compile`` (inductor): its own step, last, so that
    the compiler's time cannot cut the others short."""
    tool = [
        PY,
        'tools/benchmarks/benchmark_train_step.py',
        '--configs',
        *TIMESFORMER_CONFIGS[:2],
        '--compile',
    ]
    tool += ['--json', str(ctx.scratch / 'step_timesformer_compiled.json')]
    if ctx.gpu:
        return [tool + ['--device', 'cuda', '--batch', '8', '--reps', '5']]
    return [tool + ['--device', 'cpu', '--reps', '1', '--batch', '2', '--cfg-options', *TINY_TIMESFORMER]]


# -- the detector: ViTDet-DnA Mask R-CNN trained and tested by the tools (mmcv's ops) ---------
DEMO_DET = 'configs/vitdet_dna_demo.py'


def _detector_commands(ctx: Context) -> list[list[str]]:
    if not has_mmcv_ops():
        return []  # mmcv-lite: no RoIAlign / nms (the markdown says so)
    work = str(ctx.scratch / 'detector')
    make_data = [
        PY,
        '-c',
        'from dna_mm.synthetic.coco_shapes import ensure_coco_dataset as m; print(m("data/demo_coco"))',
    ]
    iters = 100 if ctx.gpu else 4  # the checkpoint and cosine follow the end (the schedule rule)
    opts = ['--cfg-options', f'train_cfg.max_iters={iters}']
    train = [PY, 'tools/train.py', DEMO_DET, '--amp', '--work-dir', work, '--seed', '0', *opts]
    test = [PY, 'tools/test.py', DEMO_DET, f'{work}/iter_{iters}.pth', '--work-dir', work]
    return [make_data, train, test]


def _detector_collect(ctx: Context) -> dict:
    from dna_mm.config import format_metrics
    from dna_mm.utils.tool_runs import read_test_runs

    if not has_mmcv_ops():
        return dict(skipped="mmcv's compiled ops are not installed (mmcv-lite): no Mask R-CNN")
    tests = read_test_runs(ctx.scratch / 'detector', since=ctx.started)
    return dict(test_results=[format_metrics(metrics) for metrics in tests])


def _detector_markdown(ctx: Context, data: dict) -> str:
    if 'skipped' in data:
        return f'skipped: {data["skipped"]}'
    return '\n'.join(f'- {t}' for t in data.get('test_results', []))


#: what the steps' caps on a GPU may add up to: with the kit's install the check fits one call
#: (600 s at most). Set from the runs: on a cold H100 the environment's imports took over 20 s; on
#: a cold H200 (third call) the environment 19 s, the CUDA tests 77 s, the attention 40 s (with the
#: 2H and eager routes), the train steps 84 s (with two more TimeSformer configs and the
#: activation-checkpointing run), the tools about 90 s (each tool's start about 15 s), the
#: detector 76 s, and the compiled step over 100 s (inductor's first DnA step alone 57 s, softmax's
#: about as long). Since then the attention step also compiles the packed short-sequence Triton
#: kernels, DnA's and softmax's (four more kernels), hence 10 s more for it and 10 s less for the
#: compiled step
GPU_CAPS_S = 560

STEPS = [
    Step(
        'environment',
        dict(gpu=25, rehearsal=60),
        _env_commands,
        lambda ctx: json.loads((ctx.scratch / 'environment.json').read_text()),
        _env_markdown,
    ),
    Step(
        'tests',
        dict(gpu=85, rehearsal=600),
        _test_commands,
        lambda ctx: read_junit(ctx.out / 'tests.xml'),
        _test_markdown,
    ),
    Step(
        'attention', dict(gpu=50, rehearsal=300), _attention_commands, _attention_collect, _attention_markdown
    ),
    Step(
        'train_steps',
        dict(gpu=85, rehearsal=300),
        _train_step_commands,
        _train_step_collect,
        _train_step_markdown,
    ),
    Step('tools', dict(gpu=100, rehearsal=600), _tools_commands, _tools_collect, _tools_markdown),
    Step('detector', dict(gpu=85, rehearsal=600), _detector_commands, _detector_collect, _detector_markdown),
    Step(
        'compiled',
        dict(gpu=130, rehearsal=600),
        _compiled_commands,
        _step_tables('timesformer_compiled'),
        _train_step_markdown,
    ),
]


# -- running ------------------------------------------------------------------------------------
def run_step(step: Step, ctx: Context, log) -> dict:
    """Run ``step``'s commands under its cap; ``{'status', 'seconds', 'cap', 'commands', 'data'}``."""
    cap = step.caps[ctx.profile]
    start = ctx.started = time.time()
    status, commands = 'passed', step.commands(ctx)
    step_log = ctx.scratch / f'{step.name}.log'
    with open(step_log, 'w') as own:
        for cmd in commands:
            left = cap - (time.time() - start)
            header = f'\n$ {shlex.join(cmd)}   # {step.name}, {left:.0f} s left of {cap}\n'
            log.write(header), own.write(header)
            log.flush(), own.flush()
            if left <= 0:
                status = 'timeout'
                break
            proc = subprocess.Popen(
                cmd,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            try:
                out, _ = proc.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
                status = 'timeout'
            log.write(out), own.write(out)
            log.flush(), own.flush()
            if status == 'timeout':
                break
            if proc.returncode != 0:
                status = f'failed (exit {proc.returncode})'
                break
    try:
        data = step.collect(ctx)
    except Exception as err:  # a step that wrote nothing (or half) still reports
        data = dict(collect_error=f'{type(err).__name__}: {err}')
    if step.name == 'tests' and status == 'passed' and data.get('failed'):
        status = 'failed'
    return dict(
        status=status,
        seconds=round(time.time() - start, 1),
        cap=cap,
        commands=[shlex.join(c) for c in commands],
        data=data,
    )


#: the performance targets: (what, measured ratio → limit)
TARGETS = (
    ('TimeSformer-B train step, DnA / softmax time', 1.3),
    ('TimeSformer-B train step, DnA / softmax peak memory', 1.3),
    ('TimeSformer-B train step compiled, DnA / softmax time (the FLOP ratio 246.5 / 196.1)', 1.26),
    ('TimeSformer-B train step compiled, DnA / softmax peak memory', 1.3),
    ('Triton DnA core / one softmax SDPA, 197 tokens', 1.5),
    ('Triton DnA core / one softmax SDPA, 4096 tokens with the rel-pos bias', 2.0),
)


def _core(results: dict, run: str, shape: str, method: str) -> float:
    tables = results['attention']['data'][run]['tables']
    rows = next(t['rows'][shape] for t in tables if t['scope'] == 'core')
    return rows[method]['ms'] / rows['softmax']['ms']


def targets(results: dict) -> list[dict]:
    """Each target with its measured ratio (``None`` where its step did not measure it)."""

    def step_ratio(key: str, step: str = 'train_steps', table: str = 'timesformer') -> float:
        softmax, dna = results[step]['data'][table]['rows'][:2]
        return dna[key] / softmax[key]

    measures = (
        lambda: step_ratio('step_s'),
        lambda: step_ratio('peak_bytes'),
        lambda: step_ratio('step_s', 'compiled', 'timesformer_compiled'),
        lambda: step_ratio('peak_bytes', 'compiled', 'timesformer_compiled'),
        lambda: _core(results, 'divided', 'spatial', 'dna_triton'),
        lambda: _core(results, 'long', 'vitdet_global', 'dna_triton'),
    )
    found = []
    for (what, limit), measure in zip(TARGETS, measures, strict=True):
        try:
            ratio = measure()
        except (KeyError, TypeError, StopIteration, ZeroDivisionError):
            ratio = None
        found.append(
            dict(target=what, limit=limit, ratio=ratio, met=None if ratio is None else ratio <= limit)
        )
    return found


def report(results: dict, ctx: Context) -> str:
    lines = [f'# GPU check ({ctx.profile})', '']
    env = results.get('environment', {}).get('data', {})
    if env:
        gpu = env.get('gpu', {}).get('name', 'no GPU')
        lines += [
            f'{gpu}; Python {env.get("python")}, torch {env.get("torch")}, triton {env.get("triton")}, '
            f'numpy {env.get("numpy")}',
            '',
        ]
    for step in STEPS:
        if step.name not in results:
            continue
        r = results[step.name]
        lines += [f'## {step.name}: {r["status"]} ({r["seconds"]} s of {r["cap"]})', '']
        try:
            body = step.markdown(ctx, r['data'])
        except Exception as err:
            body = f'(no table: {type(err).__name__}: {err})'
        lines += [body, '']
    lines += ['## targets', '']
    if not ctx.gpu:
        lines += [
            "(rehearsal: CPU figures at tiny shapes, the Triton kernel interpreted: not the targets' shapes)",
            '',
        ]
    lines += ['| target | limit | measured | met |', '|---|---|---|---|']
    for t in targets(results):
        ratio = 'not measured' if t['ratio'] is None else f'{t["ratio"]:.2f}×'
        lines.append(f'| {t["target"]} | ≤ {t["limit"]}× | {ratio} | {t["met"]} |')
    return '\n'.join(lines)


def summary(results: dict) -> str:
    return '\n'.join(f'{name:12s} {r["status"]:24s} {r["seconds"]:7.1f} s' for name, r in results.items())


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--out', default=os.environ.get('OUT', 'work_dirs/gpu_check'), help='results folder ($OUT)'
    )
    p.add_argument('--profile', choices=['gpu', 'rehearsal'], help='default: gpu when CUDA is present')
    p.add_argument('--only', nargs='+', choices=[s.name for s in STEPS], help='run these steps only')
    p.add_argument('--workers', type=int, help='pytest-xdist workers (default: 12 on a GPU, 2 otherwise)')
    p.add_argument('--install-seconds', type=float, help=argparse.SUPPRESS)
    p.add_argument('--environment', metavar='FILE', help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.environment:
        info = environment()
        Path(args.environment).write_text(json.dumps(info, indent=1))
        print(json.dumps(info, indent=1))
        return 0
    import torch  # the profile only

    profile = args.profile or ('gpu' if torch.cuda.is_available() else 'rehearsal')
    if profile == 'rehearsal':  # the Triton kernel in its interpreter, in every step's processes
        os.environ['TRITON_INTERPRET'] = '1'
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(os.environ.get('DNA_MM_GPU_CHECK_SCRATCH', REPO / 'work_dirs' / 'gpu_check')).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    ctx = Context(profile, out, scratch, args.workers or (12 if profile == 'gpu' else 2))
    results: dict = {}
    if args.install_seconds is not None:
        results['install'] = dict(
            status='passed', seconds=args.install_seconds, cap=None, commands=[], data={}
        )
    print(f'gpu_check: profile {profile}, results in {out}', flush=True)
    with open(out / 'log.txt', 'a') as log:
        for step in STEPS:
            if args.only and step.name not in args.only:
                continue
            print(f'gpu_check: {step.name} (cap {step.caps[profile]} s) ...', flush=True)
            results[step.name] = run_step(step, ctx, log)
            record = dict(profile=profile, steps=results, targets=targets(results))
            (out / 'results.json').write_text(json.dumps(record, indent=1))
            (out / 'report.md').write_text(report(results, ctx))
            done = results[step.name]
            print(f'gpu_check: {step.name}: {done["status"]} in {done["seconds"]} s', flush=True)
    print('\n' + report(results, ctx).split('\n## ')[0].strip())
    print(summary(results))
    return 0 if all(r['status'] == 'passed' for r in results.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
