"""The attention and operator benchmarks refuse what they cannot measure in one line naming the
flag, exit status 2, before any work (not a traceback from torch or ``statistics``): a device
torch does not have, no timed step, no clip, a size or head count below 1, heads that do not
divide C. And a requested route a device leaves out (the Triton kernel on a CPU) is said, in one
line, not dropped from every table without a word."""

from __future__ import annotations

import pytest
import torch
from conftest import load_tool

from dna_mm.benchmarks import attention as bench

ATTENTION = 'tools/benchmarks/benchmark_attention.py'
OPERATORS = 'tools/benchmarks/benchmark_operators.py'
#: the cheapest attention benchmark: tiny shapes, one step, one scope and shape
TINY = ['--tiny', '--reps', '1', '--scope', 'core', '--shapes', 'spatial']


def _refused(tool: str, argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """The error line of ``tool``'s ``main(argv)``, which must exit with status 2, print its line
    and the ``--debug`` hint only, and measure nothing."""
    with pytest.raises(SystemExit) as exit_info:
        load_tool(tool).main(argv)
    out, err = capsys.readouterr()
    prog = tool.rpartition('/')[2]
    lines = err.splitlines()
    assert exit_info.value.code == 2 and len(lines) == 2, err
    assert lines[1] == f'{prog}: (--debug prints the traceback)' and out == '', (out, err)
    return lines[0].removeprefix(f'{prog}: error: ')


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
    assert _refused(ATTENTION, [*TINY, '--methods', 'softmax', *argv], capsys) == line


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
    assert _refused(OPERATORS, ['--no-train-step', '--attn', 'softmax', *argv], capsys) == line


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
