"""Parameters, train-step time and memory of configs' models: the work of
``tools/benchmarks/benchmark_train_step.py``, whose docstring says what is measured and how.

:func:`prepare` builds a config's model (:func:`dna_mm.config.build.read_config`, pretrained weights
cleared), its optimizer and random inputs into one train step; :func:`measure` times the steps of
several configs in turns (:mod:`.timing`); :func:`step_work` profiles one step (where its device
time goes, operator by operator: :func:`operator_table`); :func:`peak_rss` measures one config's CPU
memory in a fresh process; :func:`step_table` and :func:`peak_rss_table` say the tables row by row.
"""

from __future__ import annotations

import os
import resource
import statistics
from typing import Any, Callable, NamedTuple, Optional

import torch
from mmengine.config import Config
from torch import nn

from ..config.build import build_part, part_scope, read_config
from ..errors import ConfigError
from ..models.scopes import home_scope
from ..utils.tool_runs import at_least
from .timing import in_fresh_process, in_order, time_in_turns

#: a run: (config, its --cfg-options, torch.compile the backbone)
Run = tuple[str, dict, bool]
#: the operators :func:`step_table`'s ``kernels`` lists
OPERATOR_ROWS = 15
#: the devices a step runs on (``--device``; ``cuda:N`` too)
DEVICES = ('cpu', 'cuda')


def check_request(runs: list[Run], batch: int, reps: int, device: str) -> list[Config]:
    """Refuse what cannot be measured, before any model is built: ``batch`` or ``reps`` below 1
    (:func:`~dna_mm.utils.tool_runs.at_least`), a device that is not one of :data:`DEVICES`
    (``cuda:N`` too) or that torch does not have here, a config that cannot be read or has no
    model, and a model whose values :func:`~dna_mm.config.check.model_problems` finds wrong (an
    ``img_size`` that is not a multiple of ``patch_size``, ``num_frames=abc``). Returns each run's
    config (:func:`run_config`).

    Raises:
        ConfigError: the flag (or the config and its key), its value and what it takes, in one line.
    """
    at_least({'--batch': batch, '--reps': reps})
    kind, _, index = device.partition(':')
    if kind not in DEVICES or (index and (kind != 'cuda' or not index.isdigit())):
        raise ConfigError(f'--device {device}: expected cpu, cuda or cuda:N')
    if kind == 'cuda' and not torch.cuda.is_available():
        raise ConfigError(f'--device {device}: torch finds no CUDA device here; measure with --device cpu')
    if index and int(index) >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise ConfigError(
            f'--device {device}: torch finds {count} CUDA device(s) here (cuda:0 to cuda:{count - 1})'
        )
    return [run_config(c, o) for c, o, _ in runs]


def run_config(path: str, options: Optional[dict] = None) -> Config:
    """The config of ``path`` with ``options`` (:func:`~dna_mm.config.build.read_config`,
    pretrained weights cleared), checked for what a train step on random inputs needs (a model
    with a backbone, :func:`~dna_mm.config.check.model_problems`).

    Raises:
        ConfigError: a config with no model (a ``_base_`` file), a wrong model value:
            ``--configs``, the config and the key; a zoo name mmengine cannot read
            (``mmaction::nope.py``: :func:`~dna_mm.config.build.read_config`).
    """
    from ..config.check import model_problems

    cfg = read_config(path, options, clear_pretrained=True)  # a zoo name it cannot read: one line
    model = cfg.get('model')
    if not isinstance(model, dict) or not isinstance(model.get('backbone'), dict):
        what = 'no model in it' if not isinstance(model, dict) else 'its model has no backbone key'
        raise ConfigError(
            f'--configs {path}: {what} (the benchmark steps the config of a recognizer, a detector or an '
            'image classifier, with a model.backbone; a _base_ file alone has no model)'
        )
    problems = model_problems(cfg)
    if problems:
        raise ConfigError(f'--configs {path}: {"; ".join(problems)}')
    return cfg


def image_size(backbone: dict) -> int:
    """The input size a backbone config names: its ``img_size``, or that of the model it wraps
    (``with_attention``'s ``model``); else 224 (a timm model's default)."""
    node: Any = backbone
    while isinstance(node, dict):
        if 'img_size' in node:
            return node['img_size']
        node = node.get('model')
    return 224


def step_inputs(cfg: Config) -> str:
    """What one sample of the config's train step is (:func:`prepare`'s random inputs, the
    backbone alone's too): ``'clips of 8x224x224'`` (a recognizer: ``num_frames`` × ``img_size²``)
    or ``'images of 224x224'`` (an MMDetection or MMPretrain config)."""
    backbone = cfg.model.backbone
    size = image_size(backbone)
    if cfg.get('default_scope') in ('mmdet', 'mmpretrain'):
        return f'images of {size}x{size}'
    return f'clips of {backbone.get("num_frames", 8)}x{size}x{size}'


def classification_inputs(model: nn.Module, cfg: Config, batch: int) -> tuple:
    """Random ``img_size²`` images, labels ``0…batch-1`` modulo the head's classes, through the
    classifier's data preprocessor in training mode (normalise; its batch augments, Mixup /
    CutMix, mix the images and give soft labels), on the model's device."""
    from mmpretrain.structures import DataSample

    size, classes = image_size(cfg.model.backbone), cfg.model.head.num_classes
    images = [torch.randint(0, 256, (3, size, size), dtype=torch.uint8) for _ in range(batch)]
    samples = [DataSample().set_gt_label(i % classes) for i in range(batch)]
    data = model.data_preprocessor(dict(inputs=images, data_samples=samples), True)
    return data['inputs'], data['data_samples']


def detection_inputs(model: nn.Module, cfg: Config, batch: int, device: str) -> tuple:
    """Random ``img_size²`` images with 4 boxes / masks each (labels 0-3, modulo the detector's
    classes), through the detector's data preprocessor (normalise, pad)."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    size = cfg.model.backbone.img_size
    heads = (cfg.model.get('roi_head') or {}).get('bbox_head') or {}
    head = heads[0] if isinstance(heads, (list, tuple)) else heads  # a cascade's: the first stage's
    labels = torch.arange(4) % head.get('num_classes', 80)
    corners = [[0.1, 0.1, 0.4, 0.5], [0.5, 0.2, 0.9, 0.6], [0.2, 0.6, 0.5, 0.9], [0.6, 0.65, 0.8, 0.95]]
    images, samples = [], []
    for _ in range(batch):
        boxes = torch.tensor(corners) * size
        masks = torch.zeros(4, size, size, dtype=torch.uint8)
        for m, (x0, y0, x1, y1) in zip(masks, boxes.long().tolist(), strict=True):
            m[y0:y1, x0:x1] = 1
        gt = InstanceData(bboxes=boxes, labels=labels, masks=BitmapMasks(masks.numpy(), size, size))
        samples.append(
            DetDataSample(
                gt_instances=gt,
                metainfo=dict(img_shape=(size, size), ori_shape=(size, size), scale_factor=(1.0, 1.0)),
            )
        )
        images.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8))
    data = model.data_preprocessor(dict(inputs=images, data_samples=samples), True)
    return data['inputs'].to(device), data['data_samples']


class BackboneAndNeck(nn.Module):
    """A model's backbone and (optional) neck as one module (``--part backbone``), under the
    detector's own attribute names, so a layer-decay optimizer constructor parses them; the
    output is the mean of every output, a scalar that reaches all of them."""

    def __init__(self, backbone: nn.Module, neck: Optional[nn.Module]) -> None:
        super().__init__()
        self.backbone, self.neck = backbone, neck

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.backbone(x)
        feats = self.neck(feats) if self.neck is not None else feats
        feats = feats if isinstance(feats, (list, tuple)) else [feats]
        return sum(f.float().mean() for f in feats)


def prepare_backbone(cfg: Config, batch: int, device: str) -> tuple[nn.Module, torch.Tensor]:
    """``--part backbone``: the config's backbone (+ neck) and a random input batch: images for
    a detector or an image classifier, clips for a recognizer."""
    neck = build_part(cfg, 'neck') if cfg.model.get('neck') else None
    model = BackboneAndNeck(build_part(cfg, 'backbone'), neck).to(device).train()
    backbone = cfg.model.backbone
    size = image_size(backbone)
    if cfg.get('default_scope') in ('mmdet', 'mmpretrain'):
        return model, torch.randn(batch, 3, size, size, device=device)
    return model, torch.randn(batch, 3, backbone.get('num_frames', 8), size, size, device=device)


def prepare(
    path: str,
    batch: int,
    device: str,
    options: Optional[dict] = None,
    amp_dtype: Optional[str] = None,
    compile_backbone: bool = False,
    part: str = 'model',
    by_options: bool = True,
) -> tuple[Callable[[], None], int, int]:
    """The config's model, optimizer and inputs → ``(one train step, params, backbone params)``;
    ``part='backbone'``: its backbone (+ neck) alone; ``by_options``: the optimizer steps once per
    set of options, as ``DnARunner`` builds it (else once per param group, as mmengine's)."""
    from mmaction.structures import ActionDataSample
    from mmengine.optim import build_optim_wrapper

    from ..engine.step_by_options import wrapper_steps_by_options

    def build(model: nn.Module) -> Any:
        wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
        return wrapper_steps_by_options(wrapper) if by_options else wrapper

    cfg = read_config(path, options, clear_pretrained=True)
    if amp_dtype is not None:  # the same recipe for every config
        wrapper = cfg.optim_wrapper
        cfg.optim_wrapper = dict(
            type='AutoAmpOptimWrapper',  # loss scaling by the dtype (docs/mixed_precision.md)
            dtype=amp_dtype,
            optimizer=wrapper.optimizer,
            **{k: wrapper[k] for k in ('clip_grad', 'paramwise_cfg', 'constructor') if k in wrapper},
        )
    detector = cfg.get('default_scope') == 'mmdet'
    classifier = cfg.get('default_scope') == 'mmpretrain'
    torch.manual_seed(0)
    if part == 'backbone':
        model, inputs = prepare_backbone(cfg, batch, device)
        with home_scope(part_scope(cfg, 'backbone')):  # as the parts: no MMDetection without mmcv's ops
            optim = build(model)
        if compile_backbone:
            model.backbone = torch.compile(model.backbone)

        def backbone_step() -> None:
            with optim.optim_context(model):
                loss = model(inputs)
            optim.update_params(loss)

        n = sum(p.numel() for p in model.parameters())
        return backbone_step, n, sum(p.numel() for p in model.backbone.parameters())
    model = build_part(cfg).to(device).train()
    if detector:
        inputs, samples = detection_inputs(model, cfg, batch, device)
    elif classifier:
        inputs, samples = classification_inputs(model, cfg, batch)
    else:
        backbone = cfg.model.backbone
        frames, size = backbone.get('num_frames', 8), image_size(backbone)
        inputs = torch.randn(batch, 1, 3, frames, size, size, device=device)
        samples = [
            ActionDataSample().set_gt_labels([i % cfg.model.cls_head.num_classes]) for i in range(batch)
        ]
    optim = build(model)
    if compile_backbone:
        model.backbone = torch.compile(model.backbone)

    def step() -> None:
        with optim.optim_context(model):
            losses = model(inputs, samples, mode='loss')
        optim.update_params(model.parse_losses(losses)[0] if detector or classifier else sum(losses.values()))

    return (
        step,
        sum(p.numel() for p in model.parameters()),
        sum(p.numel() for p in model.backbone.parameters()),
    )


#: the profiler's names of what an operator runs under: a backward node's evaluation, an
#: optimizer's ``step`` / ``zero_grad`` (``'Optimizer.step#SGD.step'``)
_BACKWARD_NODE, _OPTIMIZER = 'autograd::engine::evaluate_function: ', 'Optimizer.'
#: ``{operator: (kernels, seconds)}``, an operator named with where it ran (:func:`operator_key`)
OperatorWork = dict[str, tuple[int, float]]


class StepWork(NamedTuple):
    """One profiled step: the seconds of device work (CUDA: its kernels' time, the GPU busy; CPU:
    the ``aten::`` operators' own time), how many kernels it launched (CPU: operators it ran),
    and both by operator."""

    busy_s: float
    kernels: int
    by_operator: OperatorWork


def operator_key(event: Any) -> str:
    """``event``'s operator (``aten::`` dropped) with the backward node or optimizer call it ran
    under: ``'mm'``, ``'mm (MmBackward0)'``, ``'_foreach_add_ (SGD.step)'``."""
    name, parent = event.name.removeprefix('aten::'), event.cpu_parent
    while parent is not None:
        if parent.name.startswith(_BACKWARD_NODE):
            return f'{name} ({parent.name[len(_BACKWARD_NODE) :]})'
        if parent.name.startswith(_OPTIMIZER):
            return f'{name} ({parent.name.split("#", 1)[-1]})'
        parent = parent.cpu_parent
    return name


def kernel_times(event: Any) -> list[float]:
    """The durations (µs) of the CUDA kernels that the CPU operator ``event`` launched itself."""
    if event.device_type != torch.autograd.DeviceType.CPU:
        return []
    return [kernel.duration for kernel in event.kernels]


def self_times(event: Any) -> list[float]:
    """CPU: an ``aten::`` operator's own time (µs; its callees' apart), as one entry."""
    return [event.self_cpu_time_total] if event.name.startswith('aten::') else []


def operator_work(events: list, work: Callable[[Any], list[float]]) -> OperatorWork:
    """``{operator_key: (kernels, seconds)}`` over ``events``: ``work(event)``, the durations (µs)
    of the kernels each one ran (:func:`kernel_times`, :func:`self_times`)."""
    table: OperatorWork = {}
    for event in events:
        durations = work(event)
        if durations:
            key = operator_key(event)
            n, seconds = table.get(key, (0, 0.0))
            table[key] = (n + len(durations), seconds + sum(durations) / 1e6)
    return table


def step_work(step: Callable[[], None], device: str) -> StepWork:
    """One ``step`` under ``torch.profiler``: on CUDA its kernels (their time summed: the GPU
    busy), each counted under the operator that launched it (``'(no operator)'``: launched
    outside one, e.g. a compiled graph's Triton kernels); on the CPU its ``aten::`` operators'
    own time."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith('cuda')
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        step()
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    by_operator = operator_work(events, kernel_times if cuda else self_times)
    if not cuda:
        return StepWork(
            sum(t for _, t in by_operator.values()), sum(n for n, _ in by_operator.values()), by_operator
        )
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.device_time for e in kernels) / 1e6
    n_left = len(kernels) - sum(n for n, _ in by_operator.values())
    if n_left > 0:
        by_operator['(no operator)'] = (n_left, max(busy - sum(t for _, t in by_operator.values()), 0.0))
    return StepWork(busy, len(kernels), by_operator)


def operator_table(labels: list[str], works: list[OperatorWork], top: int = 15) -> str:
    """The ``top`` operators whose time differs most from the first run's (with one run: the
    longest): each run's kernels and milliseconds, the differences to the first, and the sums."""
    ref = works[0]

    def spread(key: str) -> float:
        if len(works) == 1:
            return ref[key][1]
        return max(abs(w.get(key, (0, 0.0))[1] - ref.get(key, (0, 0.0))[1]) for w in works[1:])

    def cells(key: Optional[str]) -> list[tuple[int, float]]:  # per run; None: the sums
        if key is None:
            return [(sum(n for n, _ in w.values()), sum(t for _, t in w.values())) for w in works]
        return [w.get(key, (0, 0.0)) for w in works]

    lines = [
        '| operator (backward node / optimizer) | '
        + ' | '.join(labels)
        + ' |'
        + ''.join(f' Δ {label} |' for label in labels[1:]),
        '|---|' + '---|' * (2 * len(labels) - 1),
    ]
    keys = sorted(set().union(*works), key=lambda k: (-spread(k), k))[:top]
    for key in [*keys, None]:
        runs = cells(key)
        row = [f'{n} / {t * 1e3:.2f} ms' for n, t in runs]
        row += [f'{n - runs[0][0]:+d} / {(t - runs[0][1]) * 1e3:+.2f} ms' for n, t in runs[1:]]
        lines.append(f'| {"all" if key is None else f"`{key}`"} | ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


def measure(
    steps: list[Callable[[], None]], reps: int, device: str
) -> tuple[list[float], list[Optional[int]], list[float]]:
    """Median step time of each model, on CUDA the peak memory of its steps, and the time of
    its first (warm-up) step; the models take turns step by step (one warm-up round), so load
    drifting on a shared machine hits all of them alike."""
    cuda = device.startswith('cuda')
    samples = time_in_turns(dict(enumerate(steps)), reps + 1, order=in_order, cuda=cuda)
    times = [statistics.median(s.wall for s in samples[i][1:]) for i in range(len(steps))]
    peaks = [max(s.peak_bytes for s in samples[i]) if cuda else None for i in range(len(steps))]
    return times, peaks, [samples[i][0].wall for i in range(len(steps))]


def _rss_bytes() -> int:
    """This process's resident memory now (Linux ``/proc/self/statm``)."""
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _peak_rss_here(path: str, batch: int, options: dict, reps: int) -> tuple[int, int, float]:
    """Build, then ``reps + 1`` train steps: ``(rss after build, peak rss, median step time)``
    of this process (:func:`peak_rss` runs it in a fresh one)."""
    from mmaction.utils import register_all_modules

    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', torch.get_num_threads())))
    register_all_modules()
    step, *_ = prepare(path, batch, 'cpu', options)
    built = _rss_bytes()
    times = [s.wall for s in time_in_turns({'step': step}, reps + 1, order=in_order)['step']]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return built, peak, statistics.median(times[1:] or times)


def peak_rss(path: str, batch: int, options: dict, reps: int) -> tuple[int, int, float]:
    """One config's ``(rss after build, peak rss in the train steps, median step time)``, in a
    fresh process (its ``ru_maxrss`` is this config's alone)."""
    return in_fresh_process(_peak_rss_here, path, batch, options, reps)


def peak_rss_table(
    runs: list[Run], batch: int, reps: int, cfg_options: dict, echo: Callable[..., None] = print
) -> None:
    """``--peak-rss``: each run's CPU memory (:func:`peak_rss`), the table said row by row (the
    request checked first: :func:`check_request`)."""
    check_request(runs, batch, reps, 'cpu')
    echo(f'torch {torch.__version__}, cpu ({torch.get_num_threads()} threads), batch {batch}')
    if cfg_options:
        echo(f'--cfg-options {cfg_options}')
    echo('| config | with_cp | after build | peak in train steps | steps need | train step |')
    echo('|---|---|---|---|---|---|')
    for c, options, _ in runs:
        built, peak, t = peak_rss(c, batch, options, reps)
        cp = options.get('model.backbone.with_cp', False)
        echo(
            f'| {c} | {cp} | {built / 2**30:.2f} GiB | {peak / 2**30:.2f} GiB | '
            f'{(peak - built) / 2**30:.2f} GiB | {t:.2f} s |',
            flush=True,
        )


def step_table(
    runs: list[Run],
    batch: int,
    reps: int,
    device: str,
    amp_dtype: Optional[str] = None,
    part: str = 'model',
    cfg_options: Optional[dict] = None,
    compile_backbone: bool = False,
    compare_compile: bool = False,
    kernels: bool = False,
    echo: Callable[..., None] = print,
) -> dict[str, Any]:
    """The request checked (:func:`check_request`: one line before any model is built), every
    run's model built (:func:`prepare`), their steps timed in turns (:func:`measure`,
    ``kernels``: one more profiled step each, :func:`step_work`, and the operators that differ
    most, :func:`operator_table`), the tables said row by row through ``echo``, ratios to the
    first run. Returns the figures (``--json``)."""
    from mmaction.utils import register_all_modules

    register_all_modules()
    cfgs = check_request(runs, batch, reps, device)
    name = (
        torch.cuda.get_device_name(device)
        if device.startswith('cuda')
        else f'{torch.get_num_threads()} CPU threads'
    )
    inputs = dict.fromkeys(step_inputs(cfg) for cfg in cfgs)
    echo(
        f'torch {torch.__version__}, {device} ({name}), batch {batch} ({" / ".join(inputs)}), '
        f'amp {amp_dtype or "config"}'
        f'{", torch.compile" if compile_backbone else ""}'
        f'{", backbone (+ neck) only" if part == "backbone" else ""}'
    )
    if cfg_options:
        echo(f'--cfg-options {cfg_options}')
    prepared = [prepare(c, batch, device, o, amp_dtype, k, part) for c, o, k in runs]
    step_times, peaks, firsts = measure([p[0] for p in prepared], reps, device)
    profiled = [step_work(p[0], device) for p in prepared] if kernels else None
    ref_params, ref_time, ref_peak = prepared[0][1], step_times[0], peaks[0]
    gpu = ref_peak is not None
    echo(
        '| config | params | Δ params vs first | backbone | train step | ratio |'
        + (' peak memory | ratio | clips (images)/s |' if gpu else '')
        + (' first step |' if compare_compile else '')
        + ((' GPU busy | kernels |' if gpu else ' operators\' time | operators |') if profiled else '')
        + '\n'
        + '|---|---|---|---|---|---|'
        + ('---|---|---|' if gpu else '')
        + ('---|' if compare_compile else '')
        + ('---|---|' if profiled else '')
    )
    names = [
        c + (' with_cp' if o.get('model.backbone.with_cp') else '') + (' compiled' if k else '')
        for c, o, k in runs
    ]
    # the operator table's columns: the config's file name (a package's dna_mm::NAME.py too) and how it ran
    labels = [
        os.path.basename(c.rpartition('::')[2]).removesuffix('.py') + name[len(c) :]
        for (c, _, _), name in zip(runs, names, strict=True)
    ]
    rows = []
    for i, (c, (_, n, nb), t, peak, first) in enumerate(
        zip(names, prepared, step_times, peaks, firsts, strict=True)
    ):
        row = (
            f'| {c} | {n / 1e6:.2f}M | {(n - ref_params) / 1e6:+.2f}M | {nb / 1e6:.2f}M | '
            f'{t:.3f} s | {t / ref_time:.2f}× |'
        )
        if gpu:
            row += f' {peak / 2**30:.2f} GiB | {peak / ref_peak:.2f}× | {batch / t:.1f} |'
        if compare_compile:
            row += f' {first:.1f} s |'
        if profiled:
            busy, launched, _ = profiled[i]
            row += f' {busy * 1e3:.1f} ms ({busy / t:.0%}) | {launched} |'
        echo(row, flush=True)
        rows.append(
            dict(
                config=c,
                label=labels[i],
                params=n,
                backbone_params=nb,
                step_s=t,
                first_step_s=first,
                peak_bytes=peak,
                per_s=batch / t,
                **(profiled[i]._asdict() if profiled else {}),
            )
        )
    if profiled:
        what = 'GPU time by the operator that launched each kernel' if gpu else "the operators' own CPU time"
        unit = 'kernels' if gpu else 'calls'
        echo(f'\n{what} ({unit} / time; the {OPERATOR_ROWS} that differ most from the first config):\n')
        echo(operator_table(labels, [w.by_operator for w in profiled], OPERATOR_ROWS), flush=True)
    meta = dict(torch=torch.__version__, device=name, batch=batch, part=part)
    return dict(meta, amp_dtype=amp_dtype, cfg_options=cfg_options, rows=rows)
