"""The train-step benchmark, ``get_flops.py``, the Triton kernel table and the short-kernel tuner
refuse an argument they cannot work with in one line naming it and what it takes, exit status 2,
before any model is built or kernel compiled where the argument alone tells (not a
``ZeroDivisionError``, a ``StatisticsError`` after both models are built, torch's driver error, an
``AssertionError`` from a patch embedding or an ``EinopsError``)."""

from __future__ import annotations

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, load_tool, refused_line

from dna_mm.benchmarks import kernels, train_step

TRAIN_STEP = 'tools/benchmarks/benchmark_train_step.py'
GET_FLOPS = 'tools/analysis/get_flops.py'
KERNEL_TABLE = 'tools/benchmarks/triton_kernel_table.py'
TUNE = 'tools/benchmarks/tune_short_kernel.py'
SOFTMAX = str(REPO / 'configs' / 'timesformer_softmax_k400.py')
RUNTIME = str(REPO / 'configs' / '_base_' / 'default_runtime.py')


@pytest.fixture
def nothing_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without a GPU, where building a model or compiling a kernel fails the test."""

    def built(*args, **kwargs):
        raise AssertionError('built before the arguments were checked')

    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    monkeypatch.setattr(train_step, 'prepare', built)
    monkeypatch.setattr(train_step, 'peak_rss', built)
    monkeypatch.setattr(kernels, 'compile_kernels', built)


@pytest.mark.parametrize(
    'argv, line',
    [
        (['--batch', '0'], '--batch must be at least 1, got 0'),
        (['--batch', '-2'], '--batch must be at least 1, got -2'),
        (['--reps', '0'], '--reps must be at least 1, got 0'),
        (['--reps', '0', '--peak-rss'], '--reps must be at least 1, got 0'),
        (['--device', 'tpu'], '--device tpu: expected cpu, cuda or cuda:N'),
        (['--device', 'cuda'], '--device cuda: torch finds no CUDA device here; measure with --device cpu'),
        (
            ['--configs', 'mmaction::nope.py'],
            'config mmaction::nope.py: not a zoo config mmengine reads (PACKAGE::FOLDER/NAME.py, e.g. ',
        ),
        (
            ['--configs', RUNTIME],
            f'--configs {RUNTIME}: no model in it (the benchmark steps the config of a recognizer, a '
            'detector or an image classifier',
        ),
        (
            ['--configs', SOFTMAX, '--cfg-options', 'model.backbone.img_size=100'],
            f'--configs {SOFTMAX}: model.backbone.img_size (100) must be a multiple of '
            'model.backbone.patch_size (16)',
        ),
        (
            ['--configs', SOFTMAX, '--cfg-options', 'model.backbone.num_frames=abc'],
            f"--configs {SOFTMAX}: model.backbone.num_frames must be an int > 0, got 'abc'",
        ),
        (  # the preprocessor's blending: torch's Beta(0, 0) would stop the build on a traceback
            [
                '--configs',
                SOFTMAX,
                '--cfg-options',
                'model.data_preprocessor.blending.type=MixupBlending',
                'model.data_preprocessor.blending.alpha=0',
                'model.data_preprocessor.blending.num_classes=400',
            ],
            f'--configs {SOFTMAX}: model.data_preprocessor.blending.alpha must be',
        ),
        (  # the head's loss: one weight per class, else a RuntimeError in the step
            ['--configs', SOFTMAX, '--cfg-options', 'model.cls_head.loss_cls.class_weight=[1.0,2.0]'],
            f'--configs {SOFTMAX}: model.cls_head.loss_cls.class_weight has 2 weights and '
            'model.cls_head.num_classes is 400',
        ),
    ],
    ids=lambda v: ' '.join(v).replace(str(REPO) + '/', '') if isinstance(v, list) else '',
)
def test_the_train_step_benchmark_refuses_before_any_model_is_built(
    argv: list[str], line: str, nothing_built: None, capsys: pytest.CaptureFixture
) -> None:
    device = [] if '--device' in argv else ['--device', 'cpu']
    assert refused_line(TRAIN_STEP, [*device, *argv], capsys).startswith(line)


@pytest.mark.parametrize(
    'argv, line',
    [
        (
            ['dna_vit_tiny_patch16_224', '--input-shape', '0', '224', '224'],
            '--input-shape must be at least 1 each, got 0 224 224',
        ),
        (
            ['dna_vit_tiny_patch16_224', '--input-shape', '3', '-1', '224'],
            '--input-shape must be at least 1 each, got 3 -1 224',
        ),
        (
            ['vit_tiny_patch16_224', '--input-shape', '3', '225', '225'],
            '--input-shape 3 225 225: this model takes C H W = 3 224 224 (AssertionError: ',
        ),
        (
            ['vit_tiny_patch16_224', '--input-shape', '1', '224', '224'],
            '--input-shape 1 224 224: this model takes C H W = 3 224 224',
        ),
        (
            [DEMO_CONFIG, '--input-shape', '3', '32', '32'],
            '--input-shape 3 32 32: this model takes C T H W = 3 8 32 32',
        ),
        (
            [DEMO_CONFIG, '--input-shape', '3', '8', '48', '48'],
            '--input-shape 3 8 48 48: this model takes C T H W = 3 8 32 32 (RuntimeError: ',
        ),
    ],
    ids=lambda v: ' '.join(v[1:]) if isinstance(v, list) else '',
)
def test_get_flops_names_the_shape_the_model_takes(
    argv: list[str], line: str, capsys: pytest.CaptureFixture
) -> None:
    assert refused_line(GET_FLOPS, argv, capsys).startswith(line)


def test_get_flops_takes_the_models_own_shape(capsys: pytest.CaptureFixture) -> None:
    load_tool(GET_FLOPS).main([DEMO_CONFIG, '--input-shape', '3', '8', '32', '32'])
    assert capsys.readouterr().out.startswith('input shape: [3, 8, 32, 32] (batch 1)')


@pytest.mark.parametrize(
    'argv, line',
    [
        (['--capabilities', '9.x'], '--capabilities 9.x: expected a compute capability as 90 or 9.0 (sm90)'),
        (
            ['--capabilities', '70'],
            '--capabilities 70: the kernels run on compute capability 8.0 or more (sm80+), not sm70',
        ),
        (
            ['--capabilities', '7.5'],
            '--capabilities 7.5: the kernels run on compute capability 8.0 or more (sm80+), not sm75',
        ),
        (
            ['--capabilities', '90', '--head-dims', '48'],
            '--head-dims 48: the kernels take head dims 32, 64, 128',
        ),
    ],
    ids=lambda v: ' '.join(v).replace(str(REPO) + '/', '') if isinstance(v, list) else '',
)
def test_the_kernel_table_refuses_before_compiling(
    argv: list[str], line: str, nothing_built: None, capsys: pytest.CaptureFixture
) -> None:
    assert refused_line(KERNEL_TABLE, [*argv, '--dtypes', 'bfloat16'], capsys) == line


def test_a_capability_is_read_either_way() -> None:
    assert [kernels.capability(c) for c in ('90', '9.0', 'sm90', '86', '8.6', '100')] == [
        (9, 0), (9, 0), (9, 0), (8, 6), (8, 6), (10, 0),
    ]  # fmt: skip


@pytest.mark.parametrize(
    'argv, line',
    [
        (
            ['--candidates', '48x4/32x4'],
            '--candidates 48x4/32x4: short kernels: a tile of 48 rows (a power of two, 16 or more)',
        ),
        (
            ['--candidates', '64x4/8x4'],
            '--candidates 64x4/8x4: short kernels: a tile of 8 rows (a power of two, 16 or more)',
        ),
        (['--reps', '0'], '--reps must be at least 1, got 0'),
    ],
    ids=lambda v: ' '.join(v).replace(str(REPO) + '/', '') if isinstance(v, list) else '',
)
def test_the_short_kernel_tuner_refuses_a_tile_in_one_line(
    argv: list[str], line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """argparse's one line (after its usage), before any kernel runs; under TRITON_INTERPRET=1 or not."""
    monkeypatch.setenv('TRITON_INTERPRET', '1')
    with pytest.raises(SystemExit) as exit_info:
        load_tool(TUNE).main(['--device', 'cpu', '--tiny', *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and 'Traceback' not in err, err
    assert err.splitlines()[-1].endswith(f': error: {line}'), err  # after argparse's prog (sys.argv[0])
