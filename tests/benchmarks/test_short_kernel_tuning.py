"""The packed short-sequence kernels' tuning benchmark (``tools/benchmarks/tune_short_kernel.py``):
the candidates' launch configurations reach the kernels, forward and backward; every candidate is
checked against the first; the tool runs as a user runs it.

Marked ``cuda(interpreter=True)``: on a GPU the kernels run on it, elsewhere in Triton's
interpreter (``TRITON_INTERPRET=1``, set by ``conftest.py``) at the ``--tiny`` sizes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip('triton')

from dna_mm.benchmarks import short_kernel  # noqa: E402
from dna_mm.ops import triton_short  # noqa: E402
from dna_mm.ops.kernel_config import LaunchConfig, short_configs_as, short_launch_configs  # noqa: E402

pytestmark = pytest.mark.cuda(interpreter=True)
DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
DTYPE = torch.bfloat16 if DEVICE == 'cuda' else torch.float32  # the interpreter's tl.dot: no bf16


def _rows_launched(grad: bool) -> list[int]:
    """The tile rows of one packed forward (+ backward) at 8 tokens, as launched."""
    rows: list[int] = []

    def launch(one):
        rows.append(one.kwargs['ROWS'])
        triton_short.run(one)

    (q, k, v, q_neg, v_neg), alpha = short_kernel._heads(1, DTYPE, DEVICE, tiny=True)
    out = triton_short.forward(q, k, v, q_neg, v_neg, alpha, 0.125, launch=launch)
    if grad:
        triton_short.backward(out.transpose(1, 2), q, k, v, q_neg, v_neg, alpha, 0.125, launch=launch)
    return rows


def test_a_candidate_reaches_both_kernels_and_only_inside_its_block() -> None:
    table = short_launch_configs((8, 0), DTYPE, 32, 8)
    with short_configs_as(DTYPE, 32, LaunchConfig(16, 16, 4, 1), LaunchConfig(128, 128, 4, 1)):
        assert _rows_launched(grad=True) == [16, 128]
    assert _rows_launched(grad=True) == [table['short_forward'].block_m, table['short_backward'].block_m]
    with pytest.raises(ValueError, match='a tile of 24 rows'):
        with short_configs_as(DTYPE, 32, LaunchConfig(24, 24, 4, 1), LaunchConfig(32, 32, 4, 1)):
            pass


def test_tune_times_every_candidate_beside_the_sdpa_references() -> None:
    candidates = [(64, 4, 32, 4), (16, 4, 16, 4)]
    rows = short_kernel.tune(DEVICE, DTYPE, clips=1, reps=1, candidates=candidates, tiny=True)
    steps = [(r['step'], r['config'].removesuffix(' (table)')) for r in rows]
    assert steps[:2] == [('softmax, one SDPA call', ''), ('DnA, two SDPA calls', '')]
    for c in ('64x4/32x4', '16x4/16x4'):
        assert ('DnA, packed kernel', c) in steps and ('softmax, packed kernel', c) in steps
    assert rows[0]['ratio'] == 1.0 and all(r['ms'] > 0 for r in rows)
    table = '\n'.join(short_kernel.markdown(rows, DEVICE, str(DTYPE), 1, tiny=True).splitlines()[4:])
    assert table.count('| DnA, packed kernel |') == 2


def test_a_candidate_that_computes_something_else_is_an_error() -> None:
    t = torch.ones(3)
    same = {('DnA, packed kernel', 'a'): lambda: [t], ('DnA, packed kernel', 'b'): lambda: [t.clone()]}
    short_kernel._check_candidates(same, torch.float32)
    off = {('DnA, packed kernel', 'a'): lambda: [t], ('DnA, packed kernel', 'b'): lambda: [t * 1.001]}
    with pytest.raises(RuntimeError, match='DnA, packed kernel under b: 1.00e-03 from the first candidate'):
        short_kernel._check_candidates(off, torch.float32)


def test_candidates_are_read_as_forward_and_backward_tiles() -> None:
    assert short_kernel.parse_candidate('64x4/32x8') == (64, 4, 32, 8)
    assert short_kernel.label((64, 4, 32, 8)) == '64x4/32x8'
    with pytest.raises(ValueError, match="'ROWSxWARPS/ROWSxWARPS'"):
        short_kernel.parse_candidate('64x4')


@pytest.mark.integration
def test_the_tool_runs_as_a_user_runs_it(tmp_path) -> None:
    tool = os.path.join(os.path.dirname(__file__), '..', '..', 'tools', 'benchmarks', 'tune_short_kernel.py')
    cmd = [sys.executable, tool, '--device', DEVICE, '--dtype', str(DTYPE).removeprefix('torch.'), '--tiny']
    cmd += ['--reps', '1', '--clips', '1', '--candidates', '64x4/32x4']
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '| DnA, packed kernel | 64x4/32x4' in done.stdout and '[3, 8, 64], 2 heads' in done.stdout
    bad = subprocess.run(cmd[:-1] + ['64x4'], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith(
        "--candidates: a candidate is 'ROWSxWARPS/ROWSxWARPS' (forward / backward), got '64x4'"
    )
    if DEVICE == 'cpu':  # the CPU without the interpreter: one line, before anything runs
        env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
        off = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
        assert off.returncode == 2 and off.stderr.strip().splitlines()[-1].endswith(
            '--device cpu: the Triton kernels cannot run here (CUDA of compute capability 8.0+, or the '
            'CPU with TRITON_INTERPRET=1 set)'
        )
