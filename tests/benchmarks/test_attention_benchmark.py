"""dna_mm.benchmarks.attention (tools/benchmarks/benchmark_attention.py's work) stays runnable: one
step per method (every registered member and every route), no timing claims; the tables keep
their order; the tool's copies of its shapes, routes and default methods equal its own. The core
scope calls a member's formula as the host forms do on its first step (a wrong output shape is
the member's one line) and alone after it; a cross form is no method (one line)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import load_tool
from mmengine.registry import MODELS

from dna_mm.benchmarks import attention as bench
from dna_mm.errors import MemberError
from dna_mm.models.attention import AttentionBase, short_names

#: every method: the registered members by short name and the routes, in the tables' order
METHODS = bench.ordered([*short_names(), *bench.ROUTES])


def test_the_tools_choices_are_the_benchmarks() -> None:
    tool = load_tool('tools/benchmarks/benchmark_attention.py')
    assert tool.SHAPES == tuple(bench.SHAPES) and tool.DEFAULT_SHAPES == bench.DEFAULT_SHAPES
    assert tool.ROUTES == tuple(bench.ROUTES) and tool.DEFAULT_METHODS == bench.DEFAULT_METHODS


def test_the_tables_keep_their_order() -> None:
    """softmax, DnA's routes but its kernels, softmax's eager route, the other members (the
    registry's order), DnA's kernels; softmax and dna_fast whatever is asked; a member by short
    name or registered type."""
    shipped = ['softmax', 'dna_fast', 'dna_folded', 'dna_eager', 'softmax_eager', 'diff', 'cog']
    assert bench.ordered([*reversed(shipped), 'dna_triton', 'dna_2h']) == [*shipped, 'dna_2h', 'dna_triton']
    assert bench.ordered(bench.DEFAULT_METHODS) == bench.DEFAULT_METHODS
    assert bench.ordered(['cog', 'DiffAttention']) == ['softmax', 'dna_fast', 'DiffAttention', 'cog']
    assert bench.method_config('DiffAttention') == bench.method_config('diff') == dict(type='DiffAttention')
    with pytest.raises(ValueError, match=r"'dnaa' is no registered attention member \(softmax, dna, "):
        bench.ordered(['dnaa'])


def test_a_method_takes_a_variant_and_the_gate_as_the_demos_do() -> None:
    """``dna:A±+gated`` measures DnA's A± variant with the output gate (module scope: the gate's
    projection runs in the step), in its registry place; an unknown variant or member in such a
    name is the one-line refusal."""
    assert bench.method_config('dna:A±+gated') == dict(type='DnAAttention', variant='apm', gated=True)
    assert bench.method_config('softmax+gated') == dict(type='SoftmaxAttention', gated=True)
    assert bench.ordered(['cog', 'dna+gated']) == ['softmax', 'dna_fast', 'dna+gated', 'cog']
    step = bench.build_step('cpu', 'spatial', 'dna:apm+gated', 'float32', 'module', tiny=True)
    assert step.module.variant == 'apm' and step.module.gated
    step()
    assert step.module.gate.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=r"unknown DnA variant 'xx'"):
        bench.method_config('dna:xx')
    with pytest.raises(ValueError, match=r"^'nope' is no registered attention member"):
        bench.method_config('nope+gated')
    with pytest.raises(ValueError, match=r"^a route \(dna_fast\) takes no settings; a member's name does"):
        bench.method_config('dna_fast+gated')
    with pytest.raises(ValueError, match=r"^softmax has no variants; a variant is a DnA attention's"):
        bench.method_config('softmax:apm')  # before any work, not at the build


def test_the_tool_measures_each_model_once_and_says_a_settings_mistake_in_one_line(capsys) -> None:
    """``A±`` and ``dna:apm`` are one model: one column, the first name; a variant's typo or a
    member without variants: one line, without the hint meant for an unknown member's name."""
    tool = load_tool('tools/benchmarks/benchmark_attention.py')
    common = ['--tiny', '--device', 'cpu', '--reps', '1', '--shapes', 'spatial', '--scope', 'core']
    (table,) = tool.main([*common, '--methods', 'A±', 'dna:apm', 'dna+gated'])
    assert '| shape | softmax | dna_fast | A± | dna+gated |' in table, table
    assert '[0.' in table and 'n/a' in table and 'nan' not in table  # --tiny: no memory figure
    assert 'note: --methods dna:apm is A± (the same model): run once' in capsys.readouterr().err
    for method, line in [
        ('dna:apn', "--methods dna:apn: unknown DnA variant 'apn'; did you mean 'apm'?"),
        ('softmax:apm', "--methods softmax:apm: softmax has no variants; a variant is a DnA attention's"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            tool.main([*common, '--methods', method])
        err = capsys.readouterr().err.splitlines()
        assert exit_info.value.code == 2 and err[0].startswith(f'benchmark_attention.py: error: {line}'), err
        assert 'a member of your own' not in err[0]


def test_a_cross_form_is_no_method_and_the_choices_name_none() -> None:
    """Its module needs a context, which the benchmark's step does not give: refused by name,
    its self-attention named; the members an unknown name lists are self-attentions only."""
    with pytest.raises(ValueError, match=r'^DnACrossAttention is a cross form \(query and context\) of '):
        bench.method_config('DnACrossAttention')
    with pytest.raises(ValueError) as err:
        bench.ordered(['dnaa'])
    assert 'DnAAttention' in str(err.value) and 'Cross' not in str(err.value)


def test_the_cpu_peaks_come_from_fresh_processes() -> None:
    """CPU, real shapes: the times from one fresh process, each method's peak memory from its own."""
    rows = bench.measure('cpu', 'temporal', ['softmax', 'dna_fast'], 1, 'float32', 'core', 1)
    assert set(rows) == {'softmax', 'dna_fast'}
    assert all(r['ms'] > 0 and r['peak_mb'] >= 0 for r in rows.values())


@pytest.mark.parametrize('scope', ['core', 'module'])
def test_every_method_steps_and_tabulates(scope: str) -> None:
    # the Triton kernel at this real shape would run minutes in the interpreter: the tiny shapes below
    methods = [m for m in METHODS if m not in bench.KERNEL_METHODS]
    ms = bench.time_worker('cpu', 'temporal', methods, reps=1, dtype='float32', scope=scope)
    assert set(ms) == set(methods) and all(math.isfinite(t) and t > 0 for t in ms.values())
    rows = {'temporal': {m: dict(ms=t, peak_mb=1.0) for m, t in ms.items()}}
    text = bench.table('cpu', rows, methods, 'float32', scope)
    assert text.count('\n') == 4 and '| temporal [196, 8, 768] | 1.00×' in text


@pytest.mark.parametrize('scope', ['core', 'module'])
def test_the_vitdet_global_shape_attends_with_its_bias_at_tiny_sizes(scope: str) -> None:
    """--tiny: every method runs the biased shape (DnA with one bias per branch), and the bias
    changes the output (it reaches the logits)."""
    methods = bench.methods_on('cpu', METHODS)
    ms = bench.time_worker('cpu', 'vitdet_global', methods, reps=1, dtype='float32', scope=scope, tiny=True)
    assert set(ms) == set(methods)
    rows = {'vitdet_global': {m: dict(ms=t, peak_mb=1.0) for m, t in ms.items()}}
    assert '| vitdet_global [1, 64, 64] + rel-pos bias | 1.00×' in bench.table(
        'cpu', rows, methods, 'float32', scope, tiny=True
    )
    step = bench.build_step('cpu', 'vitdet_global', 'dna_fast', 'float32', 'module', tiny=True)
    b_pos, b_neg = step.bias
    assert b_pos.shape == b_neg.shape == (1, 2, 64, 64) and not torch.equal(b_pos, b_neg)
    x = step.inputs[0]
    assert not torch.allclose(step.module(x), step.module(x, attn_bias=step.bias))


@pytest.mark.parametrize('method', ['softmax', 'dna_fast', 'dna_eager'])
def test_core_scope_replaces_the_input_projections(method: str) -> None:
    """Core scope: gradients reach the projection stand-ins, the token input is not used."""
    step = bench.build_step('cpu', 'temporal', method, 'float32', 'core')
    step()
    x, *leaves = step.inputs
    assert x.grad is None and len(leaves) == (3 if method.startswith('dna') else 1)
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in leaves)


def test_core_scope_inputs_are_in_the_benchmark_dtype() -> None:
    """bf16 benchmark, core scope: every method (the Triton kernel included, which autocast
    does not cast) gets bf16 leaves; the SDPA ones step."""
    for method in METHODS:
        if method == 'dna_triton' and not _triton_constructible():
            continue
        step = bench.build_step('cpu', 'temporal', method, 'bfloat16', 'core')
        _, *leaves = step.inputs
        assert leaves and all(t.dtype == torch.bfloat16 for t in leaves), method
        if method in ('softmax', 'dna_fast'):
            step()
            assert all(t.grad is not None and t.grad.dtype == torch.bfloat16 for t in leaves)


def _triton_constructible() -> bool:
    try:
        from dna_mm.ops import kernel_unusable_reason
    except ImportError:
        return False
    return kernel_unusable_reason(64) is None


@pytest.mark.cuda
def test_a_cuda_table_names_the_gpu() -> None:
    rows = {'temporal': {m: dict(ms=1.0, peak_mb=1.0) for m in ('softmax', 'dna_fast')}}
    text = bench.table('cuda', rows, ['softmax', 'dna_fast'], 'bfloat16', 'core')
    assert f'(bfloat16; {torch.cuda.get_device_name()})' in text.splitlines()[0]


class SlicedAttention(AttentionBase):
    """A mistake: the first query's row only, ``[B, H, 1, d]`` (registered by the tests below)."""

    short_name = 'sliced_bench'

    def attend(self, heads, attn_mask, attn_bias, eager):
        return heads['v'][:, :, :1], {}


@pytest.fixture
def sliced():
    """:class:`SlicedAttention` registered for one test."""
    MODELS.register_module(module=SlicedAttention)
    yield SlicedAttention.short_name
    MODELS.module_dict.pop(SlicedAttention.__name__, None)


@pytest.mark.parametrize('scope', ['core', 'module'])
def test_a_wrong_output_shape_is_the_members_one_line_in_either_scope(sliced, scope: str) -> None:
    """Not autograd's shape mismatch in the core scope: the first-call check of every host form."""
    step = bench.build_step('cpu', 'spatial', sliced, 'float32', scope, tiny=True)
    with pytest.raises(MemberError, match=r'SlicedAttention\.attend returned \[2, 2, 1, 32\]; expected '):
        step()


def test_the_core_scope_checks_the_first_step_only(monkeypatch) -> None:
    """The check is made once (``run_attend`` on the first step); the timed steps after it call
    ``attend`` alone, without the check's per-call test."""
    step = bench.build_step('cpu', 'spatial', 'softmax', 'float32', 'core', tiny=True)
    module, checked = step.module, []
    run_attend = module.run_attend
    monkeypatch.setattr(module, 'run_attend', lambda *a: checked.append(1) or run_attend(*a))
    for _ in range(3):
        step()
    assert checked == [1] and module._output_checked
