"""How many operators the attention family runs: one attention's forward + backward per member,
and a tiny TimeSformer's train step. The work of ``tools/benchmarks/benchmark_operators.py``, whose
docstring says what is run; the figures: ``docs/benchmarks.md``.

Why count them: on a GPU every operator is a dispatch from Python or from the autograd engine
and, unless it is a view, at least one kernel launch; a step of many small kernels is bound by
launching them, not by its FLOPs. The count is the same on the CPU, so it is measured here
without a GPU. Two counts of one call (:func:`count`):

* ``operators``: the **top-level** ``aten::`` operators, those whose parent in
  ``torch.profiler``'s tree is not an ``aten::`` operator: what the forward's Python and the
  autograd engine call, views included (a ``reshape`` is one, whatever it calls inside);
* ``kernels``: the operators below autograd that compute, i.e. are not views (``view``,
  ``transpose``, ``t``, ``detach``, ``_unsafe_view``, ...: metadata only), seen by a
  ``TorchDispatchMode``: about what a GPU launches.

The train step is split into the model (forward, loss, backward) and the optimizer: an operator
under ``Optimizer.step`` / ``zero_grad`` (the optimizers' own profiler ranges) is the optimizer's.
Its optimizer runs as on a GPU, where PyTorch's optimizers default to their multi-tensor
(``foreach``) updates (:data:`AS_ON_CUDA`): once as ``DnARunner`` builds it, one call per set of
options (``dna_mm.engine.step_by_options``), and once as mmengine's runner would, one call per
param group (of which the recipes' ``paramwise_cfg`` makes one a parameter).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import ConfigError
from ..family import method_attention
from ..models.attention import DNA_VARIANTS, DnAAttention, attention_cfg, attention_types
from ..models.attention import functional as AF
from ..models.attention.builder import accepted_arguments, is_cross_form, self_attention_class
from ..utils.tool_runs import at_least, shipped_config

#: one attention module's call: ``[B, N, C]`` tokens, ``H`` heads (the issue's measurement)
MODULE_SHAPE, MODULE_HEADS = (4, 197, 192), 3
#: the train step's configs (shipped ones, found from any folder: :func:`config_source`) and the
#: sizes that make them tiny (the demo's backbone, ``configs/timesformer_dna_demo.py``: 3 blocks
#: of width 96, 4 heads, 8 frames of 32²)
TRAIN_CONFIGS = ('configs/timesformer_softmax_k400.py', 'configs/timesformer_dna_k400.py')
TINY_TIMESFORMER = {
    'model.backbone.img_size': 32,
    'model.backbone.patch_size': 8,
    'model.backbone.embed_dims': 96,
    'model.backbone.num_heads': 4,
    'model.backbone.num_transformer_layers': 3,
    'model.backbone.drop_path_rate': 0.0,
    'model.cls_head.in_channels': 96,
}
#: the train step's optimizer as a GPU runs it: PyTorch's optimizers default to ``foreach`` there
AS_ON_CUDA = {'optim_wrapper.optimizer.foreach': True}
#: the members every count has: the tables compare to them (:func:`module_cases`)
REFERENCES = ('SoftmaxAttention', 'DnAAttention')
#: the two forms of DnA's default besides its own (:func:`module_cases`)
MODULES_ROUTE = 'DnAAttention qpm_vpm, projections called as modules'
FOLDED = 'DnAAttention qpm_vpm, sign and α folded into the weights'
#: ops a ``TorchDispatchMode`` sees as computing that only reshape metadata
_VIEW_LIKE = {'aten::_unsafe_view'}
Counts = dict[str, collections.Counter]


def top_level_operators(fn: Callable[[], object]) -> tuple[collections.Counter, collections.Counter]:
    """The top-level ``aten::`` operators of ``fn()`` by name: ``(all, those under an optimizer's
    step or zero_grad)``."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    every, optimizer = collections.Counter(), collections.Counter()
    for event in prof.events():
        parent = event.cpu_parent
        if not event.name.startswith('aten::') or (parent is not None and parent.name.startswith('aten::')):
            continue
        every[event.name] += 1
        while parent is not None and not parent.name.startswith('Optimizer.'):
            parent = parent.cpu_parent
        if parent is not None:
            optimizer[event.name] += 1
    return every, optimizer


class _Kernels(TorchDispatchMode):
    """Counts the computing (non-view) operators below autograd, the optimizer's apart."""

    def __init__(self) -> None:
        super().__init__()
        self.every, self.optimizer = collections.Counter(), collections.Counter()
        self.in_optimizer = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        name = f'aten::{func.overloadpacket.__name__}'  # as the profiler names it
        if not func.is_view and name not in _VIEW_LIKE:
            self.every[name] += 1
            if self.in_optimizer:
                self.optimizer[name] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _optimizer_phase(mode: _Kernels) -> Iterator[None]:
    """``mode.in_optimizer`` set while any optimizer steps (PyTorch's global step hooks)."""
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    handles = (
        register_optimizer_step_pre_hook(lambda *_: setattr(mode, 'in_optimizer', True)),
        register_optimizer_step_post_hook(lambda *_: setattr(mode, 'in_optimizer', False)),
    )
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def kernels(fn: Callable[[], object]) -> tuple[collections.Counter, collections.Counter]:
    """The computing operators ``fn()`` dispatches below autograd by name: ``(all, the
    optimizer's)``."""
    mode = _Kernels()
    with _optimizer_phase(mode), mode:
        fn()
    return mode.every, mode.optimizer


def count(fn: Callable[[], object]) -> Counts:
    """``{'operators', 'kernels'}`` of one ``fn()`` (called twice, once per count), each with its
    ``optimizer`` share (``'operators optimizer'``, ``'kernels optimizer'``)."""
    ops, ops_optim = top_level_operators(fn)
    ks, ks_optim = kernels(fn)
    return {'operators': ops, 'operators optimizer': ops_optim, 'kernels': ks, 'kernels optimizer': ks_optim}


# -- one attention module --------------------------------------------------------------------------
def folded_forward(module: DnAAttention, x: Tensor) -> Tensor:
    """DnA Q±V± with the softmin sign and ``α`` folded into the weights of one projection, the
    alternative to the module's own route that the counts decide against: one GEMM over
    ``[-W_q-; W_qkv; α W_v-]`` (and the biases alike; ``α_h`` repeated over its head's rows),
    then ``SDPA(Q+, K, V+) + SDPA(-Q-, K, α V-)``: no sign or ``α`` on the activations."""
    m = module
    a = m.alpha.repeat_interleave(m.head_dim)  # [C]
    weights = [-m.q_neg.weight, m.qkv.weight, m.v_neg.weight * a[:, None]]
    biases = [-m.q_neg.bias, m.qkv.bias, m.v_neg.bias * a]
    q_min, q, k, v, v_alpha = AF.linear_heads(x, weights, biases, m.num_heads, m.head_dim)
    sdpa = functools.partial(F.scaled_dot_product_attention, scale=m.scale)
    out = sdpa(q, k, v) + sdpa(q_min, k, v_alpha)  # [B, H, N, d]
    return m.project_out(m.merge_heads(out), x)


def module_cases(
    embed_dims: int, num_heads: int, members: Optional[Sequence[str]] = None
) -> dict[str, tuple[nn.Module, Callable[[Tensor], Tensor]]]:
    """Label → ``(module, its call on x)``: the self-attention members ``members`` (short or
    registered names; default every registered one, a member of your own included once its module
    is imported) and :data:`REFERENCES`, in the registry's order, each with its defaults (a member
    that takes ``variant``, DnA's, once per variant), a name of ``members`` with the gate
    (``dna+gated``, ``dna:apm+gated``: :func:`~dna_mm.family.method_attention`) by that name,
    then two forms of DnA's default: its projections called as modules (a no-op forward pre-hook
    on ``qkv``: the route a hook or a LoRA layer takes, and every call's before the lean
    projection) and with the sign and ``α`` folded into the weights (:func:`folded_forward`).

    Raises:
        ValueError: a name that is no registered member, or a cross form's
            (:func:`~dna_mm.models.attention.self_attention_class`).
    """
    from mmengine.registry import MODELS

    torch.manual_seed(0)
    for name in members or ():
        self_attention_class(method_attention(name)[0])  # a cross form: refused, not left out
    chosen = None if members is None else {*REFERENCES, *(attention_cfg(m)['type'] for m in members)}
    cases: dict[str, tuple[nn.Module, Callable[[Tensor], Tensor]]] = {}
    dims = dict(embed_dims=embed_dims, num_heads=num_heads)
    for name, cls in attention_types().items():
        if is_cross_form(cls) or (chosen is not None and name not in chosen):
            continue
        variants = DNA_VARIANTS if 'variant' in accepted_arguments(cls) else [None]
        for variant in variants:
            extra = {} if variant is None else dict(variant=variant)
            module = MODELS.build(dict(type=name, **dims, **extra))
            cases[name if variant is None else f'{name} {variant}'] = (module, module)
    for method in members or ():  # a member with the output gate: 'dna+gated', 'dna:apm+gated'
        if method_attention(method)[1].get('gated'):
            module = MODELS.build(dict(attention_cfg(method), **dims))
            cases[method] = (module, module)
    hooked = DnAAttention(**dims)
    hooked.qkv.register_forward_pre_hook(lambda *_: None)
    cases[MODULES_ROUTE] = (hooked, hooked)
    folded = DnAAttention(**dims)
    folded.alpha.data.uniform_(-1.0, 1.0)  # any α: the check below must see it
    x = torch.randn(2, 5, embed_dims)
    torch.testing.assert_close(folded_forward(folded, x), folded(x))  # the same function
    cases[FOLDED] = (folded, functools.partial(folded_forward, folded))
    return cases


def module_counts(
    shape: tuple[int, int, int] = MODULE_SHAPE,
    num_heads: int = MODULE_HEADS,
    members: Optional[Sequence[str]] = None,
) -> dict[str, Counts]:
    """:func:`count` of ``call(x).sum().backward()`` for each of :func:`module_cases` (of
    ``members``): ``x [B, N, C]`` requiring its gradient (as inside a model), training mode, the
    gradients cleared (``None``) before each call, after one warm-up call."""
    torch.manual_seed(0)
    x = torch.randn(*shape, requires_grad=True)
    figures = {}
    for label, (module, call) in module_cases(shape[-1], num_heads, members).items():

        def step(module: nn.Module = module, call: Callable[[Tensor], Tensor] = call) -> None:
            module.zero_grad(set_to_none=True)
            x.grad = None
            call(x).sum().backward()

        step()
        figures[label] = count(step)
    return figures


@contextlib.contextmanager
def projections_called_as_modules() -> Iterator[None]:
    """Every DnA attention calls its projections as modules while in this context (a no-op
    global forward pre-hook: :meth:`~dna_mm.models.attention.DnAAttention.projects_lean` sees
    it); other modules run as they do without it."""
    handle = nn.modules.module.register_module_forward_pre_hook(lambda *_: None)
    try:
        yield
    finally:
        handle.remove()


# -- a tiny train step -----------------------------------------------------------------------------
def config_source(config: str) -> str:
    """Where the train step reads ``config``: the file as named from the current folder, else the
    shipped config of that name (``'configs/NAME'`` → ``dna_mm::NAME``): the demos' route
    (:func:`~dna_mm.utils.tool_runs.shipped_config`), so :data:`TRAIN_CONFIGS` are found from any
    folder, an installed dna_mm's too."""
    return shipped_config(config, Path.cwd())


def train_step_counts(
    configs: tuple[str, ...] = TRAIN_CONFIGS, options: dict = TINY_TIMESFORMER, batch: int = 1
) -> dict[str, Counts]:
    """:func:`count` of one train step of each config, labelled as given and read where
    :func:`config_source` finds it (:func:`.train_step.prepare`: the recognizer and optimizer
    the config builds, a random clip; ``options`` and :data:`AS_ON_CUDA` applied),
    after a warm-up step; also counted: the step with a call per param group and, for a config
    whose counts change with every projection called as modules
    (:func:`projections_called_as_modules`: DnA's), the step so."""
    from mmaction.utils import register_all_modules

    from .train_step import prepare

    register_all_modules()
    figures = {}
    for config in configs:
        steps = {}
        source = config_source(config)
        for label, by_options in ((config, True), (f'{config}, a call per param group', False)):
            torch.manual_seed(0)
            steps[label], *_ = prepare(source, batch, 'cpu', {**options, **AS_ON_CUDA}, by_options=by_options)
            steps[label]()
            figures[label] = count(steps[label])
        with projections_called_as_modules():
            modules_route = count(steps[config])
        if modules_route != figures[config]:  # a config whose attention has a lean route
            figures[f'{config}, projections called as modules'] = modules_route
    return figures


# -- tables ----------------------------------------------------------------------------------------
def _total(counts: Counts, key: str) -> int:
    return sum(counts[key].values())


def module_table(figures: dict[str, Counts], shape: tuple[int, int, int], num_heads: int) -> str:
    """One row an attention: its operators and kernels, and their ratios to softmax's."""
    ref = figures['SoftmaxAttention']
    lines = [
        f'**One attention, forward + backward** (`x {list(shape)}`, {num_heads} heads, '
        f'`attn(x).sum().backward()`; torch {torch.__version__})',
        '',
        '| attention | operators | × softmax | kernels | × softmax |',
        '|---|---|---|---|---|',
    ]
    ref_ops, ref_ks = _total(ref, 'operators'), _total(ref, 'kernels')
    for label, c in figures.items():
        ops, ks = _total(c, 'operators'), _total(c, 'kernels')
        lines.append(f'| {label} | {ops} | {ops / ref_ops:.2f}× | {ks} | {ks / ref_ks:.2f}× |')
    return '\n'.join(lines)


def by_operator_table(figures: dict[str, Counts], labels: list[str], key: str = 'operators') -> str:
    """The count of each operator (``key``) in the calls ``labels``, operators where they differ."""
    names = sorted({n for label in labels for n in figures[label][key]})
    rows = [(n, [figures[label][key][n] for label in labels]) for n in names]
    rows = sorted((r for r in rows if len(set(r[1])) > 1), key=lambda r: (-max(r[1]), r[0]))
    lines = [
        f'**{key.capitalize()} where they differ**',
        '',
        '| operator | ' + ' | '.join(labels) + ' |',
        '|---|' + '---|' * len(labels),
    ]
    lines += [f'| `{n.removeprefix("aten::")}` | ' + ' | '.join(map(str, cells)) + ' |' for n, cells in rows]
    return '\n'.join(lines)


def train_step_table(figures: dict[str, Counts], batch: int) -> str:
    """One row a config: the step's operators (the model's and the optimizer's) and kernels, and
    their ratios to the first config's."""
    ref = next(iter(figures.values()))
    sizes = ', '.join(f'{key.rsplit(".", 1)[1]}={v}' for key, v in TINY_TIMESFORMER.items())
    lines = [
        f'**A tiny TimeSformer train step** (batch {batch}; {sizes}; the optimizer as on a GPU: `foreach`)',
        '',
        '| config | operators: model | optimizer | step | × first | kernels: step | × first |',
        '|---|---|---|---|---|---|---|',
    ]
    for label, c in figures.items():
        ops, optim, ks = _total(c, 'operators'), _total(c, 'operators optimizer'), _total(c, 'kernels')
        lines.append(
            f'| {label} | {ops - optim} | {optim} | {ops} | {ops / _total(ref, "operators"):.2f}× | {ks} | '
            f'{ks / _total(ref, "kernels"):.2f}× |'
        )
    return '\n'.join(lines)


def check_request(shape: Sequence[int], num_heads: int) -> None:
    """Refuse a module shape the counts cannot be taken at, before any work: a size below 1
    (``--shape B N C``: an empty batch or sequence), fewer than one head (``--heads``), or
    ``C`` that the heads do not divide.

    Raises:
        ConfigError: the flag, its value and what it takes, in one line.
    """
    at_least({'--shape B N C': shape, '--heads': num_heads})
    channels = shape[-1]
    if channels % num_heads:
        raise ConfigError(
            f'--heads {num_heads} must divide --shape\'s C ({channels}): each head takes C / heads channels'
        )


def benchmark(
    shape: tuple[int, int, int] = MODULE_SHAPE,
    num_heads: int = MODULE_HEADS,
    train_step: bool = True,
    batch: int = 1,
    echo: Callable[..., None] = print,
    members: Optional[Sequence[str]] = None,
) -> tuple[list[str], dict]:
    """The module counts of ``members`` (default: every registered one; :func:`module_cases`) and
    the train step's: the tables, said through ``echo`` as they come, and the figures
    (``{'module': {label: {count: {operator: n}}}, 'train_step': ...}``).

    Raises:
        ConfigError: a ``shape`` or ``num_heads`` the counts cannot be taken at
            (:func:`check_request`), before any work.
    """
    check_request(shape, num_heads)
    modules = module_counts(shape, num_heads, members)
    dna = ['SoftmaxAttention', MODULES_ROUTE, 'DnAAttention qpm_vpm', FOLDED]
    tables = [module_table(modules, shape, num_heads), by_operator_table(modules, dna)]
    for t in tables:
        echo(t + '\n', flush=True)
    figures = {'module': {k: {n: dict(c) for n, c in v.items()} for k, v in modules.items()}}
    if train_step:
        steps = train_step_counts(batch=batch)
        tables.append(train_step_table(steps, batch))
        echo(tables[-1] + '\n', flush=True)
        figures['train_step'] = {k: {n: dict(c) for n, c in v.items()} for k, v in steps.items()}
    return tables, figures
