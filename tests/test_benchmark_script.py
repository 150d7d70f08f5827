"""tools/analysis/benchmark_attention.py stays runnable (one step per method, no timing claims)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / 'tools' / 'analysis' / 'benchmark_attention.py'


@pytest.fixture(scope='module')
def bench():
    spec = importlib.util.spec_from_file_location('benchmark_attention', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('scope', ['core', 'module'])
def test_every_method_steps_and_tabulates(bench, scope: str) -> None:
    methods = [m for m in bench.METHODS if m not in bench.CUDA_ONLY_METHODS]
    ms = bench.time_worker('cpu', 'temporal', methods, reps=1, dtype='float32', scope=scope)
    assert set(ms) == set(methods) and all(math.isfinite(t) and t > 0 for t in ms.values())
    rows = {'temporal': {m: dict(ms=t, peak_mb=1.0) for m, t in ms.items()}}
    text = bench.table('cpu', rows, methods, 'float32', scope)
    assert text.count('\n') == 4 and '| temporal [196, 8, 768] | 1.00×' in text


@pytest.mark.parametrize('method', ['softmax', 'dna_fast', 'dna_eager'])
def test_core_scope_replaces_the_input_projections(bench, method: str) -> None:
    """Core scope: gradients reach the projection stand-ins, the token input is not used."""
    step = bench.build_step('cpu', 'temporal', method, 'float32', 'core')
    step()
    x, *leaves = step.inputs
    assert x.grad is None and len(leaves) == (3 if method.startswith('dna') else 1)
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in leaves)
