"""The recipe's global batch on any number of processes, by gradient accumulation.

A recipe states the batch its learning rate and schedule were made for
(``global_batch_size``: the DnA video recipes, 8 clips × 8 GPUs = 64). With ``W`` processes of
``b`` clips each, :func:`apply_global_batch` sets mmengine's
``optim_wrapper.accumulative_counts`` to

    K = max(1, round(G / (W · b)))

so that each optimizer step sees ``W · b · K = G`` clips. mmengine's ``OptimWrapper`` divides
each loss by ``K`` and steps after every ``K``-th backward pass (under DDP the ``K - 1`` others
skip the gradient all-reduce, ``no_sync``), so for a loss that is a mean over the batch and a
model without batch statistics (LayerNorm, as TimeSformer and ViTDet) the step is the one a
single batch of ``G`` takes::

    (1/K) Σ_k (1/(W·b)) Σ_{i ∈ batch k} ∇ℓ_i  =  (1/G) Σ_i ∇ℓ_i

A schedule counts *data* iterations, ``K`` of them per optimizer step; so that every
iteration-based part keeps its length in optimizer steps, :func:`scale_iteration_schedule`
multiplies by ``K``: an ``IterBasedTrainLoop``'s ``max_iters``, ``val_begin`` /
``val_interval``, every ``by_epoch=False`` scheduler's counts (``begin`` / ``end`` /
``milestones`` / ``T_max`` / ``step_size`` / ``total_steps`` / ``periods``; an exponential
one's ``gamma`` becomes ``gamma ** (1 / K)``), and an iteration-based checkpoint interval.
Epoch-based parts need nothing: an epoch is the same data, and ``convert_to_iter_based``
schedulers count the iterations of an epoch. Each optimizer step then takes the schedule's
value at its window's first data iteration, that of the run on the global batch
(:mod:`dna_mm.engine.accumulated_schedule`).

Accumulation leaves the learning rate as the config sets it: the lr of a recipe is the one made
for its ``global_batch_size``. A ``--global-batch`` other than the config's is logged with the lr
the linear rule would give (the value to set with ``--cfg-options optim_wrapper.optimizer.lr=``).

A run resumed on another number of processes (or per-process batch) goes on where it stopped in
samples seen. Each checkpoint records the layout it was saved in (``meta['batch_layout']``:
:class:`BatchLayout`, written by ``PendingGradsHook``); an iteration there is ``s1 = W1 · b1``
samples, here ``s2 = W2 · b2``, and :func:`layout_iteration` converts the saved iteration ``i1``
(an epoch of ``L1`` iterations there, ``L2`` here)::

    e, d1 = divmod(i1, L1)            (completed epochs, batches done in the next)
    d2, again = divmod(d1 · s1, s2)   (an epoch whole: d2 = L2)
    i2 = e · L2 + d2

An epoch is a pass over the data that ``DefaultSampler`` pads to ``W · ceil(N / W)`` samples of
``N`` (it repeats the first ones so that each rank gets as many), ``L = ceil(N / s)`` iterations:
its padding differs from layout to layout, so epochs convert whole, and only the samples done
in the current one by samples (``d1 · s1 < N``: a pass's padding is in its last iteration). The
first ``d2`` batches of each rank hold the epoch's first ``d2 · s2`` samples (``DefaultSampler``
deals rank ``r`` the samples ``r, r + W, ...`` of the epoch's order, which the seed and the
epoch fix), so ``again = 0`` skips exactly the samples trained; else the last ``again`` of them
are trained again. An iteration-based loop on ``DefaultSampler`` makes the same passes (``L``
iterations each, ``len(train_dataloader)``) and converts the same way; on a sampler without
passes (``InfiniteSampler``: one endless stream, unpadded), or with a layout that records no
pass length, by all the samples seen: ``i2, again = divmod(i1 · s1, s2)``. The runner's resume
sets the loop to ``i2`` and replays the iteration-based schedule to it
(:mod:`dna_mm.engine.resume_settings`); a checkpoint without ``batch_layout`` resumes as saved.

``DefaultSampler(round_up=False)`` pads nothing: rank ``r`` gets ``ceil((N - r) / W)`` samples,
so where ``N`` is not a multiple of ``W`` the ranks' passes can differ by a batch
(:func:`uneven_passes`: 11 samples on 2 ranks of 1 make passes of 6 and 5 iterations). An
iteration-based run goes on with each rank in passes of its own length, a sample further apart
at each pass (an epoch-based one cannot run: its ranks' collectives fall out of step,
:mod:`dna_mm.engine.loops`), so the samples it has seen are no iteration of another layout: a
resume in the same processes and batch goes on as saved, one in another layout with such passes
on either side is refused in one line (:func:`uneven_refusal`). Where every rank's pass is as
long (a last batch shorter on some ranks), the passes convert as padded ones do.

The other choice, ``--auto-scale-lr`` (mmengine's ``auto_scale_lr``), keeps one optimizer step
per batch and multiplies the learning rate by ``W · b / base_batch_size`` (Goyal et al., 2017):
more steps of a smaller batch, which is not the recipe's trajectory. The two are exclusive.
:class:`GlobalBatchHook` logs what was chosen from the built runner (processes, batch,
accumulation steps) when training starts.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional, Sequence

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop

from ..errors import CheckpointMismatchError, ConfigError
from .optim_wrappers import optim_wrappers

#: environment variable holding the number of processes, per mmengine launcher
WORLD_SIZE_ENV = {'pytorch': 'WORLD_SIZE', 'slurm': 'SLURM_NTASKS', 'mpi': 'OMPI_COMM_WORLD_SIZE'}


def launcher_world_size(launcher: str) -> int:
    """The number of training processes the launcher starts (1 for ``'none'``): the initialised
    process group's size, else the launcher's environment variable (``WORLD_SIZE`` for torchrun,
    ``SLURM_NTASKS``, ``OMPI_COMM_WORLD_SIZE``)."""
    import torch.distributed as dist

    if launcher == 'none':
        return 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    value = os.environ.get(WORLD_SIZE_ENV.get(launcher, 'WORLD_SIZE'), '1')
    try:
        return max(1, int(value))
    except ValueError:
        raise ConfigError(f'--launcher {launcher}: the process count {value!r} is not an integer') from None


#: environment variable holding this process's rank, per mmengine launcher
RANK_ENV = {'pytorch': 'RANK', 'slurm': 'SLURM_PROCID', 'mpi': 'OMPI_COMM_WORLD_RANK'}


def launcher_rank(launcher: str) -> int:
    """This process's rank among the launcher's (0 for ``'none'``): the initialised process
    group's, else the launcher's environment variable (``RANK`` for torchrun, ``SLURM_PROCID``,
    ``OMPI_COMM_WORLD_RANK``); 0 where it is not an integer."""
    import torch.distributed as dist

    if launcher == 'none':
        return 0
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    try:
        return max(0, int(os.environ.get(RANK_ENV.get(launcher, 'RANK'), '0')))
    except ValueError:
        return 0


def accumulation_steps(global_batch: int, world_size: int, batch_size: int) -> int:
    """``K = max(1, round(G / (W · b)))``, the accumulation steps closest to ``G`` clips a step."""
    return max(1, round(global_batch / (world_size * batch_size)))


#: the counts in iterations of a ``by_epoch=False`` scheduler, multiplied by ``K``
SCHEDULER_COUNTS = ('begin', 'end', 'milestones', 'T_max', 'step_size', 'total_steps', 'periods')


def _is_scheduler(sched: dict, *kinds: str) -> bool:
    """Whether the class a scheduler config builds (its ``type``: a registered name or the class)
    is one of mmengine's ``kinds`` (names in ``mmengine.optim.scheduler.param_scheduler``)."""
    from mmengine.optim.scheduler import param_scheduler
    from mmengine.registry import PARAM_SCHEDULERS

    kind = sched.get('type')
    kind = PARAM_SCHEDULERS.get(kind) if isinstance(kind, str) else kind
    return isinstance(kind, type) and issubclass(kind, tuple(getattr(param_scheduler, k) for k in kinds))


def scale_iteration_schedule(cfg: Config, factor: int) -> list[str]:
    """Scale the iteration-based parts of ``cfg`` to ``factor`` data iterations an optimizer step
    (see the module docstring); returns ``'key old -> new'`` for each change.

    A ``by_epoch=False`` scheduler's counts (:data:`SCHEDULER_COUNTS`) are multiplied by ``K``,
    and an exponential one's ``gamma`` (a factor per iteration) becomes ``gamma ** (1 / K)``, so
    that with :mod:`dna_mm.engine.accumulated_schedule` (each step takes its window's first value,
    that of data iteration ``jK``) step ``j`` takes the value the unscaled schedule has at ``j``:
    ``f(jK) = g(j)``."""
    if factor == 1:
        return []
    changes: list[str] = []

    def scale(holder: Any, key: str, name: str, by: Callable[[Any], Any] = lambda v: v * factor) -> None:
        value = holder.get(key)
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, (list, tuple)):
            new: Any = [by(v) for v in value]
        elif isinstance(value, (int, float)) and math.isfinite(value):
            new = by(value)
        else:
            return
        changes.append(f'{name} {value} -> {new}')
        holder[key] = new

    train_cfg = cfg.get('train_cfg') or {}
    iter_loop = train_cfg.get('type') in ('IterBasedTrainLoop', 'ResumableIterBasedTrainLoop') or (
        'max_iters' in train_cfg and 'max_epochs' not in train_cfg
    )
    if iter_loop:
        for key in ('max_iters', 'val_begin', 'val_interval'):
            scale(train_cfg, key, f'train_cfg.{key}')
        dynamic = train_cfg.get('dynamic_intervals')
        if dynamic:
            train_cfg['dynamic_intervals'] = [(m * factor, i * factor) for m, i in dynamic]
            changes.append(f'train_cfg.dynamic_intervals {dynamic} -> {train_cfg["dynamic_intervals"]}')
    schedulers = cfg.get('param_scheduler')
    for i, sched in enumerate([schedulers] if isinstance(schedulers, dict) else schedulers or []):
        if sched.get('by_epoch', True):
            continue
        name = f'param_scheduler[{i}]({getattr(sched.get("type"), "__name__", sched.get("type"))})'
        for key in SCHEDULER_COUNTS:
            scale(sched, key, f'{name}.{key}')
        if _is_scheduler(sched, 'ExponentialParamScheduler'):
            scale(sched, 'gamma', f'{name}.gamma', lambda g: g ** (1 / factor))
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint')
    if checkpoint and checkpoint.get('by_epoch', True) is False:
        scale(checkpoint, 'interval', 'default_hooks.checkpoint.interval')
    return changes


def apply_global_batch(cfg: Config, launcher: str = 'none', global_batch: Optional[int] = None) -> list[str]:
    """Reach ``global_batch`` (default: the config's ``global_batch_size``; ``None`` / 0: off)
    by gradient accumulation: set ``optim_wrapper.accumulative_counts``, scale the iteration-based
    schedule (:func:`scale_iteration_schedule`) and add :class:`GlobalBatchHook`. Returns the
    lines it logged (on rank 0 only: called before the runner, whose logger is rank 0's). A
    ``ConfigError`` for a value <= 0, for ``auto_scale_lr.enable`` at the same time, or for a
    config without one ``optim_wrapper.optimizer``."""
    configured = cfg.get('global_batch_size')
    if global_batch is not None:
        cfg.global_batch_size = global_batch or None
    target = cfg.get('global_batch_size')
    if not target:
        return []
    if isinstance(target, bool) or not isinstance(target, int) or target < 0:
        raise ConfigError(f'global_batch_size must be a positive int (or None: off), got {target!r}')
    if (cfg.get('auto_scale_lr') or {}).get('enable'):
        raise ConfigError(
            f'global_batch_size={target} (gradient accumulation) and auto_scale_lr.enable=True '
            f'(--auto-scale-lr, lr scaled to the batch) are two answers to one question: use one '
            f'(--global-batch none turns the first off)'
        )
    wrapper = cfg.get('optim_wrapper')
    if not isinstance(wrapper, dict) or not isinstance(wrapper.get('optimizer'), dict):
        raise ConfigError('global_batch_size needs a config with one optim_wrapper.optimizer')
    loader = cfg.get('train_dataloader') or {}
    batch = loader.get('batch_size')
    if not isinstance(batch, int) or batch <= 0:
        raise ConfigError(f'global_batch_size needs train_dataloader.batch_size > 0, got {batch!r}')
    world = launcher_world_size(launcher)
    steps = accumulation_steps(target, world, batch)
    reached = world * batch * steps
    given = wrapper.get('accumulative_counts')
    wrapper['accumulative_counts'] = steps
    lines = [
        f'global batch {reached} = {world} process{"es" if world > 1 else ""} x {batch} clips x '
        f'{steps} accumulation step{"s" if steps > 1 else ""} (global_batch_size={target}; '
        f'optim_wrapper.accumulative_counts={steps})'
    ]
    if given not in (None, 1, steps):
        lines.append(
            f'warning: optim_wrapper.accumulative_counts={given} replaced by {steps}, which reaches '
            f'global_batch_size={target} (--global-batch none keeps yours)'
        )
    lr = wrapper['optimizer'].get('lr')
    if global_batch and configured and global_batch != configured and isinstance(lr, (int, float)):
        lines.append(
            f'--global-batch {global_batch}: the lr stays optim_wrapper.optimizer.lr={lr:g}, which the '
            f'config sets for its global batch of {configured}; the linear rule would give '
            f'{lr * global_batch / configured:g} (--cfg-options optim_wrapper.optimizer.lr=...)'
        )
    if reached != target:
        made_for = f'the lr made for {target}' if configured == target else "the config's lr"
        lines.append(
            f'warning: global_batch_size={target} is not a multiple of {world} x {batch}: each '
            f'optimizer step sees {reached} clips, with {made_for} (a '
            f'train_dataloader.batch_size b with {world} x b dividing {target} reaches it exactly)'
        )
    changes = scale_iteration_schedule(cfg, steps)
    if changes:
        lines.append(
            f'iteration-based schedule x{steps} (data iterations per optimizer step): ' + '; '.join(changes)
        )
    if launcher_rank(launcher) == 0:  # the logger before the runner's prints on every rank
        for line in lines:
            print_log(line, logger='current', level=30 if line.startswith('warning') else 20)
    hooks = [
        h
        for h in cfg.get('custom_hooks') or []
        if not (isinstance(h, dict) and h.get('type') == 'GlobalBatchHook')
    ]
    cfg.custom_hooks = [*hooks, dict(type='GlobalBatchHook', global_batch=target, changes=changes)]
    return lines


@HOOKS.register_module()
class GlobalBatchHook(Hook):
    """Log, when training starts, the global batch the run reaches: processes × per-process
    batch × ``optim_wrapper``'s accumulation steps (read from the built runner), and the
    iteration-based schedule values :func:`apply_global_batch` scaled. Added by it.

    Args:
        global_batch: The config's ``global_batch_size``.
        changes: The scaled schedule values (``'key old -> new'``).
    """

    priority = 'VERY_LOW'

    def __init__(self, global_batch: int, changes: Optional[list[str]] = None) -> None:
        self.global_batch = global_batch
        self.changes = list(changes or [])

    def before_train(self, runner) -> None:
        world, batch = runner.world_size, runner.train_dataloader.batch_size
        steps = wrapper_accumulation(runner.optim_wrapper)
        reached = world * batch * steps
        note = '' if reached == self.global_batch else f' (global_batch_size={self.global_batch})'
        runner.logger.info(
            f'global batch {reached} = {world} process{"es" if world > 1 else ""} x {batch} clips x '
            f'{steps} gradient accumulation step{"s" if steps > 1 else ""}{note}'
        )
        if self.changes:
            runner.logger.info(f'iteration-based schedule x{steps}: ' + '; '.join(self.changes))


def wrapper_accumulation(optim_wrapper: Any) -> int:
    """``K``, the backward passes of an optimizer step (``accumulative_counts``): the most of a
    multi-optimizer wrapper's."""
    return max(getattr(w, '_accumulative_counts', 1) for w in optim_wrappers(optim_wrapper).values())


#: the checkpoint ``meta`` key of the layout the run was saved in (:class:`BatchLayout`)
LAYOUT_KEY = 'batch_layout'


@dataclass(frozen=True)
class BatchLayout:
    """How a run's iterations take its samples: ``world_size`` processes of ``batch_size``
    each (``s = W · b`` samples an iteration, ``runner.iter`` counting per-process batches),
    ``accumulative_counts`` backward passes a step (``W · b · K`` samples), ``iters_per_epoch``
    iterations an epoch, or a pass over the data of an iteration-based run on ``DefaultSampler``
    (``len(train_dataloader)``: ``ceil(N / (W · b))`` for ``N`` samples; 0 where the loader has no
    length; rank 0's, the longest, where the ranks' passes differ: :func:`uneven_passes`)."""

    world_size: int
    batch_size: int
    accumulative_counts: int
    iters_per_epoch: int

    @property
    def per_iter(self) -> int:
        """``s = W · b``, the samples of one iteration over the processes."""
        return self.world_size * self.batch_size

    @property
    def per_step(self) -> int:
        """``W · b · K``, the samples of one optimizer step."""
        return self.per_iter * self.accumulative_counts

    def describe(self, by_epoch: bool = False, by_pass: bool = False) -> str:
        """``'2 processes x 4 clips x 2 accumulation steps'``; ``by_epoch``: with ``' (5 iterations
        an epoch)'``, ``by_pass`` (an iteration-based run converted by passes over the data): with
        ``' (5 iterations a pass over the data)'``."""
        w, b, k = self.world_size, self.batch_size, self.accumulative_counts
        per = 'an epoch' if by_epoch else 'a pass over the data' if by_pass else ''
        return (
            f'{w} process{"es" if w > 1 else ""} x {b} clip{"s" if b > 1 else ""} x {k} accumulation '
            f'step{"s" if k > 1 else ""}' + (f' ({self.iters_per_epoch} iterations {per})' if per else '')
        )

    @classmethod
    def of(cls, runner: Any) -> 'BatchLayout':
        """The layout of ``runner`` (built: its train loop and optim wrapper); ``K`` the most of a
        multi-optimizer wrapper's."""
        loader = runner.train_dataloader
        try:
            length = len(loader)
        except TypeError:
            length = 0
        return cls(
            world_size=runner.world_size,
            batch_size=loader_batch_size(loader),
            accumulative_counts=wrapper_accumulation(runner.optim_wrapper),
            iters_per_epoch=length,
        )

    @classmethod
    def saved(cls, meta: Any) -> Optional['BatchLayout']:
        """The layout a checkpoint's ``meta`` records; ``None`` for one saved before it did."""
        layout = meta.get(LAYOUT_KEY) if isinstance(meta, dict) else None
        try:
            return cls(**layout) if isinstance(layout, dict) else None
        except TypeError:
            return None

    def as_meta(self) -> dict[str, int]:
        """The ``meta`` entry (plain ints: a weights-only load reads it)."""
        return asdict(self)


def loader_batch_size(loader: Any) -> int:
    """``loader``'s batch size; its batch sampler's where it has none itself (a loader built with
    a batch sampler: MMDetection's ``AspectRatioBatchSampler``)."""
    return int(loader.batch_size or getattr(loader.batch_sampler, 'batch_size', None) or 1)


def _sampler(loader: Any) -> Any:
    """``loader``'s sampler: its batch sampler's, else (no batch sampler) its own."""
    sampler = getattr(getattr(loader, 'batch_sampler', None), 'sampler', None)
    return sampler if sampler is not None else getattr(loader, 'sampler', None)


def makes_passes(loader: Any) -> bool:
    """Whether ``loader``'s sampler goes over the data in passes of ``len(loader)`` batches, each
    in its own order (``DefaultSampler``: it has an ``epoch``), rather than as one endless stream
    (``InfiniteSampler``). As the iteration-based loop reads it (:mod:`dna_mm.engine.loops`)."""
    return hasattr(_sampler(loader), 'epoch')


def uneven_passes(loader: Any, world_size: int, batch_size: int) -> Optional[tuple[int, int]]:
    """The iterations of a pass over the data on the first and on the last of ``world_size``
    ranks of ``batch_size`` samples, where they differ: ``loader``'s sampler deals the ranks
    unequal shares and pads none (``DefaultSampler(round_up=False)``: ``ceil((N - r) / W)`` of
    ``N`` samples to rank ``r``). ``None`` where every rank's pass is as long (a sampler that pads,
    one process, ``N`` a multiple of ``W``, or shares that make as many batches)."""
    sampler = _sampler(loader)
    if getattr(sampler, 'round_up', True) is not False or world_size < 2 or not hasattr(sampler, 'dataset'):
        return None
    samples = len(sampler.dataset)
    drop_last = bool(getattr(getattr(loader, 'batch_sampler', None), 'drop_last', False))
    first, last = (
        _batches(max(0, -(-(samples - rank) // world_size)), batch_size, drop_last)
        for rank in (0, world_size - 1)
    )
    return (first, last) if first != last else None


def _batches(samples: int, batch_size: int, drop_last: bool) -> int:
    """The batches of ``batch_size`` that ``samples`` make (``drop_last``: whole ones only)."""
    return samples // batch_size if drop_last else -(-samples // batch_size)


@dataclass(frozen=True)
class LayoutConversion:
    """A checkpoint saved at iteration ``saved_iter`` in the layout ``saved``, resumed in ``now``
    (``by_epoch``: by an epoch-based loop; ``passes``: an iteration-based loop's sampler makes
    passes, :func:`makes_passes`); called, an iteration of the saved run -> this run's."""

    saved: BatchLayout
    now: BatchLayout
    by_epoch: bool
    saved_iter: int
    passes: bool = True

    @property
    def by_pass(self) -> bool:
        """Whether an iteration-based run converts by passes over the data (:func:`layout_iteration`)."""
        lengths = self.saved.iters_per_epoch and self.now.iters_per_epoch
        return not self.by_epoch and self.passes and bool(lengths)

    def __call__(self, it: int) -> int:
        return layout_iteration(self.saved, self.now, it, self.by_epoch, self.passes)[0]

    @property
    def iter(self) -> int:
        """The iteration here where the run goes on."""
        return self(self.saved_iter)

    @property
    def again(self) -> int:
        """The samples trained before the stop that are trained again (0: none)."""
        return layout_iteration(self.saved, self.now, self.saved_iter, self.by_epoch, self.passes)[1]


def changed_layout(runner: Any, meta: Any, filename: str = 'the checkpoint') -> Optional[LayoutConversion]:
    """The conversion for ``runner``, which resumes a checkpoint (its ``meta``, read from
    ``filename``) saved in a layout whose iterations hold another number of samples (or whose
    epochs another number of iterations). ``None`` when they do not, when the checkpoint records
    no layout, or when the loop is neither mmengine's epoch- nor iteration-based one (nor a
    subclass). Where the ranks' passes over the data differ in length (:func:`uneven_passes`):
    ``None`` in the same processes and batch (each rank goes on in passes of its own, as saved),
    else a :class:`~dna_mm.errors.CheckpointMismatchError` (:func:`uneven_refusal`)."""
    saved = BatchLayout.saved(meta)
    loop = runner.train_loop
    by_epoch = isinstance(loop, EpochBasedTrainLoop)
    if saved is None or not (by_epoch or isinstance(loop, IterBasedTrainLoop)):
        return None
    now = BatchLayout.of(runner)
    refused = uneven_refusal(runner.train_dataloader, saved, now, filename)
    if refused is not None:
        raise CheckpointMismatchError(refused)
    if uneven_passes(runner.train_dataloader, now.world_size, now.batch_size):
        return None  # the saved processes and batch (else refused): this rank's pass is its own
    passes = makes_passes(runner.train_dataloader)
    by_pass = by_epoch or (passes and saved.iters_per_epoch > 0 and now.iters_per_epoch > 0)
    if saved.per_iter == now.per_iter and (not by_pass or saved.iters_per_epoch == now.iters_per_epoch):
        return None
    if by_epoch and not (saved.iters_per_epoch and now.iters_per_epoch):
        return None
    return LayoutConversion(saved, now, by_epoch, int(meta.get('iter', 0)), passes)


def uneven_refusal(loader: Any, saved: BatchLayout, now: BatchLayout, filename: str) -> Optional[str]:
    """Why ``filename``, saved in ``saved``, cannot go on in ``now`` (other processes or another
    batch) when the ranks' passes over the data differ in length in either layout
    (:func:`uneven_passes`, the module docstring): no iteration of one holds the samples seen in
    the other. ``None``: the same processes and batch, or passes as long on every rank in both."""
    if (saved.world_size, saved.batch_size) == (now.world_size, now.batch_size):
        return None
    for side, layout in (("the saved run's", saved), ("this run's", now)):
        uneven = uneven_passes(loader, layout.world_size, layout.batch_size)
        if uneven is None:
            continue
        to_do = (
            f'start from its weights with load_from={filename}'
            if layout is saved
            else 'set train_dataloader.sampler.round_up=True (the default: every pass padded to one length)'
        )
        return (
            f'cannot resume {filename} on {now.describe()}: it was saved on {saved.describe()} and '
            f'train_dataloader.sampler.round_up=False makes the passes over the '
            f'{len(_sampler(loader).dataset)} samples of unequal length on {side} ranks '
            f'({uneven[0]} iterations on rank 0, {uneven[1]} on rank {layout.world_size - 1}): they '
            f'drift apart, so no iteration of one layout holds the samples seen in the other; resume '
            f'it on {saved.world_size} process{"es" if saved.world_size > 1 else ""} with '
            f'train_dataloader.batch_size={saved.batch_size} (as saved), or {to_do}'
        )
    return None


def layout_iteration(
    saved: BatchLayout, now: BatchLayout, it: int, by_epoch: bool, passes: bool = True
) -> tuple[int, int]:
    """The iteration of ``now`` at which a run stopped at iteration ``it`` of ``saved`` goes on,
    and the samples trained before it stopped that are trained again (0: the same samples);
    the arithmetic in the module docstring. By passes of ``iters_per_epoch`` iterations (each
    padded to a multiple of its ``W``: whole passes are whole passes)::

        e, d1 = divmod(it, L1);  d2, again = divmod(d1 · s1, s2);  it2 = e · L2 + d2

    for an epoch-based loop, and for an iteration-based one whose sampler makes passes
    (``passes``, ``DefaultSampler``) where both layouts record their length; else by samples:
    ``it2, again = divmod(it · s1, s2)``."""
    if not by_epoch and not (passes and saved.iters_per_epoch and now.iters_per_epoch):
        return divmod(it * saved.per_iter, now.per_iter)  # one endless stream: samples only
    epochs, done = divmod(it, saved.iters_per_epoch)  # passes completed, iterations into the next
    batches, again = divmod(done * saved.per_iter, now.per_iter)
    if batches >= now.iters_per_epoch:  # an epoch of more samples there (padding): this one whole
        batches, again = now.iters_per_epoch, 0
    return epochs * now.iters_per_epoch + batches, again


def ema_accumulation_note(hooks: Sequence[Any], optim_wrapper: Any) -> Optional[str]:
    """The warning for mmengine's ``EMAHook`` in a run with gradient accumulation: it averages
    after every iteration, so each optimizer step's weights enter the average ``K`` times, its
    momentum ``m`` acting as ``1 - (1 - m)^K`` a step; ``None`` without accumulation, without the
    hook, or with its ``interval`` a multiple of ``K``."""
    from mmengine.hooks import EMAHook

    k = wrapper_accumulation(optim_wrapper)
    for hook in hooks:
        ema = getattr(hook, 'ema_model', None)
        m = getattr(ema, 'momentum', None)
        if not isinstance(hook, EMAHook) or k < 2 or m is None or getattr(ema, 'interval', 1) % k == 0:
            continue
        return (
            f'EMAHook averages after every iteration and an optimizer step takes {k} '
            f'(optim_wrapper.accumulative_counts={k}): each step\'s weights enter the average {k} times, '
            f'its momentum {m:g} acting as {1 - (1 - m) ** k:.4g} a step; EMAHook momentum='
            f'{1 - (1 - m) ** (1 / k):.4g} gives {m:g} a step'
        )
    return None
