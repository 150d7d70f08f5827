"""The attention and operator benchmarks refuse what they cannot measure in one line naming the
flag, exit status 2, before any work (not a traceback from torch or ``statistics``): a device
torch does not have, no timed step, no clip, a size or head count below 1, heads that do not
divide C. And a requested route a device leaves out (the Triton kernel on a CPU) is said, in one
line, not dropped from every table without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import load_tool, refused_line

from dna_mm.benchmarks import attention as bench

ATTENTION = 'tools/benchmarks/benchmark_attention.py'
OPERATORS = 'tools/benchmarks/benchmark_operators.py'
ONNX = 'tools/benchmarks/benchmark_onnx.py'
TRAIN_STEP = 'tools/benchmarks/benchmark_train_step.py'
#: the cheapest attention benchmark: tiny shapes, one step, one scope and shape
TINY = ['--tiny', '--reps', '1', '--scope', 'core', '--shapes', 'spatial']


@pytest.mark.parametrize(
    'argv, line',
    [
        (['--device', 'cuda'], '--device cuda: torch finds no CUDA device here; measure with --device cpu'),
        (['--device', 'cpu', 'tpu'], '--device tpu: expected cpu or cuda'),
        (['--device', 'cpu', '--reps', '0'], '--reps must be at least 1, got 0'),
        (['--device', 'cpu', '--clips', '0'], '--clips must be at least 1, got 0'),
        (['--device', 'cpu', '--clips', '-2'], '--clips must be at least 1, got -2'),
    ],
)
def test_attention_benchmark_refuses_what_it_cannot_measure(
    argv: list[str], line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)  # a machine without a GPU
    # --reps and --clips after TINY: argparse keeps the last
    assert refused_line(ATTENTION, [*TINY, '--methods', 'softmax', *argv], capsys) == line


@pytest.mark.parametrize(
    'argv, line',
    [
        (['--shape', '1', '0', '192'], '--shape B N C must be at least 1 each, got 1 0 192'),
        (['--shape', '0', '5', '64', '--heads', '2'], '--shape B N C must be at least 1 each, got 0 5 64'),
        (['--shape', '1', '5', '-64', '--heads', '2'], '--shape B N C must be at least 1 each, got 1 5 -64'),
        (['--heads', '0'], '--heads must be at least 1, got 0'),
        (['--heads', '5'], "--heads 5 must divide --shape's C (192): each head takes C / heads channels"),
    ],
)
def test_operator_benchmark_refuses_a_shape_it_cannot_count_at(
    argv: list[str], line: str, capsys: pytest.CaptureFixture
) -> None:
    assert refused_line(OPERATORS, ['--no-train-step', '--attn', 'softmax', *argv], capsys) == line


def test_a_requested_route_a_device_leaves_out_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The Triton routes on a CPU without Triton's interpreter: one line names them and why,
    before the figures; the tables have the others."""
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)  # the tests' CPU runs set it
    methods = ['softmax', 'dna_triton', 'softmax_triton']
    tables = load_tool(ATTENTION).main([*TINY, '--device', 'cpu', '--methods', *methods])
    lines = capsys.readouterr().out.splitlines()
    note = (
        'dna_triton, softmax_triton: left out on cpu (the Triton kernel needs a CUDA device; on the '
        'CPU it runs only under TRITON_INTERPRET=1)'
    )
    assert lines.count(note) == 1 and lines.index(note) == 1, lines  # after the heading line
    assert len(tables) == 1 and 'triton' not in tables[0] and '| softmax | dna_fast |' in tables[0]


def test_nothing_left_out_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    assert bench.left_out('cpu', ['softmax', 'dna_fast', 'dna_eager']) is None
    assert bench.left_out('cpu', ['softmax', 'dna_triton']).startswith('dna_triton: left out on cpu (')


def test_the_onnx_benchmark_names_an_unknown_attention_before_any_work(capsys: pytest.CaptureFixture) -> None:
    line = refused_line(ONNX, ['--attn', 'softmax', 'dnaa', '--reps', '1'], capsys)
    assert line.startswith("--attn dnaa: attention type 'dnaa' is not registered; did you mean"), line
    assert line.endswith('a member of your own: --import its module'), line


@pytest.mark.parametrize(
    'tool, argv',
    [
        (OPERATORS, ['--no-train-step', '--attn', 'softmax', '--shape', '1', '4', '64', '--heads', '2']),
        (ATTENTION, [*TINY, '--device', 'cpu', '--methods', 'softmax']),
        (ONNX, ['--reps', '1']),
        (TRAIN_STEP, ['--reps', '1']),
    ],
    ids=['operators', 'attention', 'onnx', 'train-step'],
)
@pytest.mark.parametrize('where', ['a-folder', 'under-a-file'])
def test_an_output_file_that_cannot_be_written_is_refused_before_any_work(
    tool: str, argv: list[str], where: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--out`` / ``--json`` a folder, or under a file: one line before the measurement (it
    could take minutes), not an ``OSError`` after it."""
    (tmp_path / 'notes.txt').write_text('')
    out = tmp_path if where == 'a-folder' else tmp_path / 'notes.txt' / 'table.md'
    flag = '--json' if tool == TRAIN_STEP else '--out'
    line = refused_line(tool, [*argv, flag, str(out)], capsys)
    why = (
        'is a folder: give the path of the file to write'
        if where == 'a-folder'
        else 'is a file, not a folder'
    )
    assert line.startswith(f'{flag} {out}') and line.endswith(why), line


def test_an_output_in_a_folder_not_made_yet_is_written(tmp_path: Path) -> None:
    out = tmp_path / 'new' / 'ops.md'
    load_tool(OPERATORS).main(
        ['--no-train-step', '--attn', 'softmax', '--shape', '1', '4', '64', '--heads', '2', '--out', str(out)]
    )
    assert out.read_text().startswith('**One attention, forward + backward**')
