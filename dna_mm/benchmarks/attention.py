"""The attention family's fwd+bwd time and peak memory at TimeSformer-B shapes (and ViTDet-B's
global blocks): the work of ``tools/benchmarks/benchmark_attention.py``, whose docstring says what
is measured and how (scopes, methods, the ratios to softmax).

A method is any registered self-attention member, by short name or registered type, with its
defaults (a member of your own too: its module named in ``imports``, which every fresh process
imports), or one of the :data:`ROUTES` beside them (DnA's other routes, softmax's eager one):
:func:`method_config`. :func:`build_step` makes one method's step at one shape; :func:`measure`
times the methods of a (device, scope, shape) in turns (:mod:`.timing`) and takes each one's peak
memory, on the CPU in fresh processes (:func:`~.timing.in_fresh_process`); :func:`table` is the
markdown table. :func:`check_request` refuses what cannot be measured (a device torch does not
have, no timed step) in one line before any work, and :func:`left_out` says which requested
routes a device leaves out.
"""

from __future__ import annotations

import contextlib
import math
import platform
import resource
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from mmengine.registry import MODELS
from mmengine.utils import import_modules_from_strings

from ..errors import ConfigError, SettingError
from ..family import method_attention
from ..models.attention import AttentionBase, attention_cfg, attention_types, short_names
from ..models.attention.builder import check_settings, member_names, self_attention_class
from ..ops import kernel_available, kernel_unusable_reason
from ..utils.tool_runs import at_least
from .timing import in_fresh_process, median_ms, time_in_turns

SHAPES = {
    'spatial': (8, 197),
    'temporal': (196, 8),
    'joint': (1, 1569),
    'vitdet_global': (1, 4096),
}  # ViTDet-B's global blocks at 1024² (opt-in: --shapes)
DEFAULT_SHAPES = ['spatial', 'temporal', 'joint']
BIASED_SHAPES = {'vitdet_global'}  # attend with a float logit bias (ViTDet's decomposed rel-pos)
#: ``--tiny``: a few tokens per shape, C = 64 in 2 heads of 32 (checks the paths; no benchmark)
TINY_SHAPES = {'spatial': (2, 17), 'temporal': (16, 2), 'joint': (1, 33), 'vitdet_global': (1, 64)}
#: the routes measured beside the members (``--methods``), name → the config it builds: DnA's
#: fused routes, its eager one and the fold (:func:`folded_heads`), and softmax's eager route
ROUTES = {
    'dna_fast': dict(type='DnAAttention'),
    'dna_folded': dict(type='DnAAttention'),
    'dna_eager': dict(type='DnAAttention', fused_attn=False),
    'softmax_eager': dict(type='SoftmaxAttention', fused_attn=False),
    'dna_2h': dict(type='DnAAttention', kernel='sdpa_2h'),  # both branches in one SDPA call over 2H heads
    'dna_stacked': dict(type='DnAAttention', kernel='sdpa_stacked'),  # one SDPA call, the queries stacked
    'dna_triton': dict(type='DnAAttention', kernel='triton'),  # the fused kernel
    # softmax in the same kernel's packed short-sequence form (SDPA where that does not apply)
    'softmax_triton': dict(type='SoftmaxAttention', kernel='triton'),
}
#: the routes the tables put after the members (DnA's other kernels, softmax's); the others come
#: before them
LAST_ROUTES = ('dna_2h', 'dna_stacked', 'dna_triton', 'softmax_triton')
#: run where the kernel runs: CUDA, or the CPU under TRITON_INTERPRET=1
KERNEL_METHODS = {'dna_triton', 'softmax_triton'}
#: what a table compares to (measured whatever ``--methods`` says)
REFERENCES = ['softmax', 'dna_fast']
DEFAULT_METHODS = ['softmax', 'dna_fast', 'dna_eager', 'diff', 'cog']
C, H = 768, 12
TINY_C, TINY_H = 64, 2
#: the devices a benchmark runs on (``--device``)
DEVICES = ('cpu', 'cuda')


def dims(tiny: bool = False) -> tuple[int, int, dict[str, tuple[int, int]]]:
    """``(C, H, shapes)``: the real sizes, or the ``--tiny`` ones."""
    return (TINY_C, TINY_H, TINY_SHAPES) if tiny else (C, H, SHAPES)


def method_config(method: str) -> dict:
    """The config ``method`` builds: a route's (:data:`ROUTES`), or a registered self-attention
    member's (a short name or a registered type; its defaults), with the settings a method adds
    as the demos and the study take them (:func:`~dna_mm.family.method_attention`: ``dna:apm``,
    a DnA variant; ``dna+gated``, the output gate).

    Raises:
        ValueError: neither (the message names the self-attention members and the routes), an
            unknown variant, or a member's cross form
            (:func:`~dna_mm.models.attention.self_attention_class`).
    """
    if method in ROUTES:
        return dict(ROUTES[method])
    member, settings = method_attention(method)
    if member in ROUTES:
        raise SettingError(f"a route ({member}) takes no settings; a member's name does (dna:apm, dna+gated)")

    if member not in short_names() and member not in attention_types():
        shorts, types = member_names(cross_forms=False)
        members = ', '.join([*shorts, *types])
        raise ValueError(
            f'{member!r} is no registered attention member ({members}) nor a route ({", ".join(ROUTES)})'
        )
    self_attention_class(member)  # a cross form: refused
    check_settings(member, settings)
    return {**attention_cfg(member), **settings}


def ordered(methods: list[str]) -> list[str]:
    """``methods`` and the :data:`REFERENCES`, once each, in the tables' order: softmax, DnA's
    fast, folded and eager routes and softmax's eager one, the other members in the registry's
    order, then :data:`LAST_ROUTES`.

    Raises:
        ValueError: a method that is neither a member nor a route (:func:`method_config`).
    """
    first = [m for m in ROUTES if m not in LAST_ROUTES]
    registered = list(attention_types())
    chosen = list(dict.fromkeys([*REFERENCES, *methods]))

    def place(m: str) -> tuple[int, int]:
        if m == REFERENCES[0]:
            return (0, 0)
        if m in ROUTES:
            return (1, first.index(m)) if m in first else (3, LAST_ROUTES.index(m))
        return (2, registered.index(method_config(m)['type']))

    return sorted(chosen, key=place)


def methods_on(device: str, methods: list[str]) -> list[str]:
    """``methods`` less the Triton kernel where it cannot run (a CPU without the interpreter)."""
    if not KERNEL_METHODS & set(methods):
        return methods
    return [m for m in methods if m not in KERNEL_METHODS or kernel_available(torch.device(device))]


def left_out(device: str, methods: list[str], tiny: bool = False) -> Optional[str]:
    """The line saying which of ``methods`` :func:`methods_on` leaves out on ``device`` and
    why (``'dna_triton, softmax_triton: left out on cpu (...)'``), or ``None`` for none."""
    kept = methods_on(device, methods)
    dropped = [m for m in methods if m not in kept]
    if not dropped:
        return None
    if device == 'cuda':
        c, h, _ = dims(tiny)
        why = kernel_unusable_reason(c // h) or 'the Triton kernel cannot run on this GPU'
    else:
        why = 'the Triton kernel needs a CUDA device; on the CPU it runs only under TRITON_INTERPRET=1'
    return f'{", ".join(dropped)}: left out on {device} ({why})'


def check_request(devices: Sequence[str], reps: int, clips: int) -> None:
    """Refuse what cannot be measured, before any work: a device that is not one of
    :data:`DEVICES` or that torch does not have here (``cuda`` without a GPU), fewer than one
    timed step (``--reps``) or clip (``--clips``).

    Raises:
        ConfigError: the flag, its value and what it takes, in one line.
    """
    at_least({'--reps': reps, '--clips': clips})
    for device in devices:
        if device not in DEVICES:
            raise ConfigError(f'--device {device}: expected {" or ".join(DEVICES)}')
        if device == 'cuda' and not torch.cuda.is_available():
            raise ConfigError('--device cuda: torch finds no CUDA device here; measure with --device cpu')


def _sync(device: str) -> None:
    if device == 'cuda':
        torch.cuda.synchronize()


def _given(out: torch.Tensor) -> torch.nn.Module:
    """A module standing in for a projection in the core scope: returns ``out``, a fixed leaf of
    its output."""

    class Given(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.out = out

        def forward(self, _x: torch.Tensor) -> torch.Tensor:
            return self.out

    return Given()


def folded_heads(module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``-Q-`` and ``α V-`` ``[B, N, C]`` of a Q±V± module with the sign and α folded into the
    projection weights (``α`` repeated over each head's channels)."""
    a = module.alpha.repeat_interleave(module.head_dim)  # [C]
    q_min = F.linear(x, -module.q_neg.weight, -module.q_neg.bias)
    return q_min, F.linear(x, module.v_neg.weight * a[:, None], module.v_neg.bias * a)


def build_step(
    device: str, shape: str, method: str, dtype: str, scope: str, clips: int = 1, tiny: bool = False
) -> Callable[[], None]:
    """A fwd+bwd step of one method at one shape (gradients cleared first).

    ``scope='module'``: the whole module (projections included) on tokens ``[B, N, C]``;
    ``scope='core'``: everything between the projections and the output projection. The
    input projections are replaced by fixed leaves of their outputs (``[B, N, k·C]``), so the
    module's own code splits the heads and each method meets the memory layouts, and pays
    the gradient handling, that it has in a model. The leaves are in ``dtype`` (what the
    projections give under autocast), so every method, SDPA or not (the Triton kernel is a
    custom operator that autocast does not cast), computes in the benchmark dtype. A shape in
    ``BIASED_SHAPES`` attends with a fixed float bias ``[1, H, N, N]`` in ``dtype`` (DnA: one
    per branch). The core scope's first step calls the member's formula as the host forms do
    (:meth:`~dna_mm.models.attention.AttentionBase.run_attend`: its output's shape checked, a
    one-line ``MemberError`` where it is wrong), the later ones ``attend`` itself (the check
    is made once). ``step.clear()`` releases the gradients a step leaves.
    """
    torch.manual_seed(0)
    torch_dtype = getattr(torch, dtype)
    c, h, shapes = dims(tiny)
    b, n = shapes[shape]
    b *= clips
    module = MODELS.build(dict(method_config(method), embed_dims=c, num_heads=h)).to(device)
    x = torch.randn(b, n, c, device=device, requires_grad=True)
    bias = None
    if shape in BIASED_SHAPES:  # rel-pos logits of the magnitude ViTDet's reach
        make = lambda: torch.randn(1, h, n, n, device=device).mul_(2).to(torch_dtype)  # noqa: E731
        # one bias per branch where the branches read their own queries (DnA's Q+ and Q-), as
        # the member's position_bias gives them
        queries = [branch.q for branch in module.branch_heads().values()]
        bias = make() if len(set(queries)) == 1 else tuple(make() for _ in queries)
    leaves: list[torch.Tensor] = []
    if scope == 'core':
        with torch.no_grad():
            outs = {
                name: layer(x)
                for name, layer in module.named_children()
                if isinstance(layer, torch.nn.Linear) and name != 'proj'
            }
            if method == 'dna_folded':  # after the fold: -Q- and α V- come out of the projections
                outs['q_neg'], outs['v_neg'] = folded_heads(module, x)
        for name, out in outs.items():
            leaves.append(out.to(torch_dtype).clone().requires_grad_())
            setattr(module, name, _given(leaves[-1]))

    def folded() -> torch.Tensor:  # [B, H, N, d]
        q_min, v_min = (module.q_neg(x), module.v_neg(x)) if scope == 'core' else folded_heads(module, x)
        q, k, v = AttentionBase.project(module, x).values()
        b_pos, b_neg = bias if bias is not None else (None, None)
        sdpa = F.scaled_dot_product_attention
        pos = sdpa(q, k, v, attn_mask=b_pos, scale=module.scale)
        neg_bias = None if b_neg is None else -b_neg
        return pos + sdpa(
            module.split_heads(q_min), k, module.split_heads(v_min), attn_mask=neg_bias, scale=module.scale
        )

    amp = torch.autocast(device, dtype=getattr(torch, dtype)) if dtype != 'float32' else None

    def forward() -> torch.Tensor:
        with amp or contextlib.nullcontext():
            if method == 'dna_folded':
                out = folded()
                return module.project_out(module.merge_heads(out), x) if scope == 'module' else out
            if scope == 'module':
                return module(x, attn_bias=bias)
            # the first call as every host form makes it (its output's shape checked), the timed
            # ones after it without the check's per-call test (whether the call is being traced)
            attend = module.attend if module._output_checked else module.run_attend
            return attend(module.project(x), None, bias, not module.fused_attn)[0]

    # the output gradient a model sends back: dense [B, N, C] (through merge_heads in the core
    # scope), made here so it is an input, not part of a step's peak memory.
    # (``y.sum().backward()`` would send a stride-0 one, which some backward kernels copy
    # matrix by matrix.)
    grad_out = torch.randn(b, n, c, device=device, dtype=torch_dtype)
    if scope == 'core':
        grad_out = grad_out.view(b, n, h, c // h).transpose(1, 2)  # [B, H, N, d]

    def clear() -> None:
        module.zero_grad(set_to_none=True)
        for t in (x, *leaves):
            t.grad = None

    def step() -> None:
        clear()
        forward().backward(grad_out)

    step.inputs, step.module, step.bias = [x, *leaves], module, bias  # type: ignore[attr-defined]  (inspection)
    step.clear = clear  # type: ignore[attr-defined]
    return step


def _step_peak_mb(step: Callable[[], None], device: str) -> float:
    """CUDA: the peak allocated during one ``step`` above what was allocated before it (MB)."""
    step.clear()  # type: ignore[attr-defined]
    _sync(device)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    step()
    _sync(device)
    return max(torch.cuda.max_memory_allocated() - base, 0) / 2**20


def time_worker(
    device: str,
    shape: str,
    methods: list[str],
    reps: int,
    dtype: str,
    scope: str,
    clips: int = 1,
    tiny: bool = False,
    imports: tuple[str, ...] = (),
) -> dict[str, float] | dict[str, dict[str, float]]:
    """Median fwd+bwd ms of each method; the methods take turns step by step (rotating the
    order every round), so drifting load on a shared machine hits them alike. On CUDA also each
    step's peak memory: ``{method: {'ms', 'peak_mb'}}``. ``imports``: the modules to import
    first (a member of your own registers itself there)."""
    import_modules_from_strings(list(imports))
    steps = {m: build_step(device, shape, m, dtype, scope, clips, tiny) for m in methods}
    samples = time_in_turns(steps, reps, warmup=2, cuda=device == 'cuda')
    ms = {m: median_ms(s) for m, s in samples.items()}
    if device != 'cuda':
        return ms
    return {m: dict(ms=ms[m], peak_mb=_step_peak_mb(steps[m], device)) for m in methods}


def memory_worker(
    device: str,
    shape: str,
    method: str,
    dtype: str,
    scope: str,
    clips: int = 1,
    tiny: bool = False,
    imports: tuple[str, ...] = (),
) -> float:
    """Peak memory (MB) of one step above what the module and its inputs hold (own process;
    ``imports`` first, as :func:`time_worker`)."""
    import_modules_from_strings(list(imports))
    step = build_step(device, shape, method, dtype, scope, clips, tiny)
    if device == 'cuda':
        return _step_peak_mb(step, device)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the first step reaches the peak
    step()
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base, 0) / 2**20


def measure(
    device: str,
    shape: str,
    methods: list[str],
    reps: int,
    dtype: str,
    scope: str,
    clips: int,
    tiny: bool = False,
    imports: tuple[str, ...] = (),
) -> dict[str, dict[str, float]]:
    """``{method: {'ms', 'peak_mb'}}``. CUDA: in this process (``max_memory_allocated`` is
    each step's own). CPU: times from one fresh process, each peak RSS from its own
    (:func:`~.timing.in_fresh_process`, each importing ``imports`` first); with ``tiny`` in this
    process and no memory figure (NaN)."""
    if device == 'cuda' or tiny:
        result = time_worker(device, shape, methods, reps, dtype, scope, clips, tiny, imports)
        if device == 'cuda':
            torch.cuda.empty_cache()
            return result
        return {m: dict(ms=ms, peak_mb=float('nan')) for m, ms in result.items()}
    timed = in_fresh_process(time_worker, device, shape, methods, reps, dtype, scope, clips, False, imports)
    return {
        m: dict(
            ms=timed[m],
            peak_mb=in_fresh_process(memory_worker, device, shape, m, dtype, scope, clips, False, imports),
        )
        for m in methods
    }


def table(
    device: str, rows: dict, methods: list[str], dtype: str, scope: str, clips: int = 1, tiny: bool = False
) -> str:
    """The markdown table of one (device, scope): a row per shape of ``rows`` (:func:`measure`'s
    figures by shape), each method's time and memory as ratios to softmax, DnA's other routes'
    times as ratios to its fast one, and DnA's Triton route's to softmax's where both ran (the
    same kernel, one branch against two)."""
    c, _, shapes = dims(tiny)
    what = 'whole module' if scope == 'module' else 'attention core (after the projections)'
    # time ratios to dna_fast
    versus = [m for m in ('dna_eager', 'dna_folded', 'dna_2h', 'dna_stacked', 'dna_triton') if m in methods]
    both = {'dna_triton', 'softmax_triton'} <= set(methods)
    same_kernel = (' | DnA triton / softmax triton', True) if both else ('', False)
    lines = [
        f'**{device}, {what}** ({dtype}; {device_name(device)}): fwd+bwd time / peak '
        'memory as ratios to softmax (absolute softmax figures in brackets)',
        '',
        '| shape | ' + ' | '.join(methods + [f'DnA {m[4:]} / fast' for m in versus]) + same_kernel[0] + ' |',
        '|---|' + '---|' * (len(methods) + len(versus) + bool(same_kernel[0])),
    ]
    for shape, res in rows.items():
        ref = res['softmax']
        cells = []
        for m in methods:
            if m == 'softmax':
                cells.append(f"1.00× [{ref['ms']:.1f} ms, {_mb(ref['peak_mb'])}]")
            else:
                mem = res[m]['peak_mb'] / ref['peak_mb'] if ref['peak_mb'] > 0 else float('nan')
                cells.append(
                    f"{res[m]['ms'] / ref['ms']:.2f}× / {'n/a' if math.isnan(mem) else f'{mem:.2f}×'} mem"
                )
        cells += [f"{res[m]['ms'] / res['dna_fast']['ms']:.2f}×" for m in versus]
        if same_kernel[1]:
            cells.append(f"{res['dna_triton']['ms'] / res['softmax_triton']['ms']:.2f}×")
        b, n = shapes[shape]
        label = f'{shape} {[b * clips, n, c]}' + (' + rel-pos bias' if shape in BIASED_SHAPES else '')
        lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def _mb(peak_mb: float, width: int = 0) -> str:
    """``'12 MB'``, or ``'n/a'`` where no memory was measured (``--tiny`` on the CPU: NaN)."""
    return f'{"n/a":>{width}}' if math.isnan(peak_mb) else f'{peak_mb:{width}.{1 if width else 0}f} MB'


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's and the threads torch uses."""
    if device == 'cuda':
        return torch.cuda.get_device_name()
    return f'{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads'


def benchmark(
    devices: list[str],
    scopes: list[str],
    shapes: list[str],
    methods: list[str],
    reps: int,
    dtype: str,
    clips: int = 1,
    tiny: bool = False,
    echo: Callable[..., None] = print,
    imports: tuple[str, ...] = (),
) -> tuple[list[str], list[dict]]:
    """Every (device, scope) over ``shapes``: the methods of ``methods`` (members and routes,
    softmax and dna_fast always, in :func:`ordered`'s order; the Triton kernel only where it
    runs) measured shape by shape (:func:`measure`; ``imports``: the modules of members of your
    own, imported by each fresh process), a line per figure and each table said through ``echo``
    as they come, and a line for the requested routes a device leaves out (:func:`left_out`).
    Returns the tables (markdown) and the figures (``{device, device_name, scope, rows}`` each).

    Raises:
        ConfigError: a device, ``reps`` or ``clips`` that cannot be measured
            (:func:`check_request`), before any work.
    """
    check_request(devices, reps, clips)
    c, h, _ = dims(tiny)
    echo(
        f'torch {torch.__version__}; fwd+bwd median of {reps}; C={c}, H={h}; {clips} clip(s)'
        + ('; --tiny: a check of the paths, not a benchmark' if tiny else ''),
        flush=True,
    )
    methods = ordered(methods)
    tables, figures = [], []
    for device in devices:
        note = left_out(device, methods, tiny)
        if note is not None:
            echo(note, flush=True)
        for scope in scopes:
            rows = {}
            scope_methods = methods_on(device, methods)
            for shape in shapes:
                rows[shape] = measure(device, shape, scope_methods, reps, dtype, scope, clips, tiny, imports)
                for method, r in rows[shape].items():
                    echo(
                        f'  {device:4s} {scope:6s} {shape:8s} {method:16s} {r["ms"]:9.2f} ms  '
                        f'{_mb(r["peak_mb"], 8)}',
                        flush=True,
                    )
            tables.append(table(device, rows, scope_methods, dtype, scope, clips, tiny))
            figures.append(dict(device=device, device_name=device_name(device), scope=scope, rows=rows))
            echo('\n' + tables[-1] + '\n', flush=True)
    return tables, figures
