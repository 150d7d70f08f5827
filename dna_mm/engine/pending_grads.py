"""The gradients of an accumulation step not yet taken: kept in a training checkpoint, given back
on resume.

With gradient accumulation (``optim_wrapper.accumulative_counts = K``, which a recipe's
``global_batch_size`` sets on fewer GPUs) the optimizer steps after every ``K``-th backward pass;
the ones between add into the parameters' ``.grad``. A checkpoint written between two steps (on
preemption, or at the end of an epoch whose length is not a multiple of ``K``, which the
accumulation runs across) holds the parameters and the optimizer but not those gradients, so
a run resumed from it steps on the gradients of fewer batches (mmengine's resume warns that
they are lost). Here the checkpoint also holds them (``checkpoint['pending_grads']``:
parameter name → gradient, on the CPU), and the resumed run starts with them:

    ∇ after resume = ∇ pending + Σ (the batches after it) = ∇ of the uninterrupted run

In a distributed run each rank holds its own share until the step's all-reduce (DDP skips it on
the ``K - 1`` passes between). A checkpoint between two steps first averages the shares over the
ranks (:func:`share_pending`, on every rank); the step's all-reduce then averages
``shared + rest_r`` to ``shared + mean_r(rest_r)``, the same gradient. The uninterrupted run
does the same at each such checkpoint, so the two runs still take the same arithmetic.

After the share, the pending gradient is ``(1/G) Σ ∇ℓ_i`` over the ``p · s`` samples of the ``p``
passes pending (``G = W · b · K`` samples a step, ``s = W · b`` an iteration), whatever ``W``
and ``K``. So a run resumed in another layout (:mod:`dna_mm.engine.global_batch`, whose layout
each checkpoint records) gets them back when its step is as many samples and the same samples
are pending (``G2 = G1``, ``p2 · s2 = p1 · s1``, none trained again); otherwise they would weigh
another share than the samples they hold, and one warning says they are dropped.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapper, OptimWrapperDict
from mmengine.registry import HOOKS
from torch import nn

from .global_batch import BatchLayout

#: the checkpoint key of the pending gradients
PENDING_KEY = 'pending_grads'


def passes_pending(wrapper: OptimWrapper) -> int:
    """The backward passes whose gradients wait for the optimizer's next step (0 at a step, and
    with no accumulation); the most of a multi-optimizer wrapper's."""
    wrappers = wrapper.values() if isinstance(wrapper, OptimWrapperDict) else [wrapper]
    # mmengine 0.10 keeps K and the run's total as private counts (the resume tests read them)
    counts = [
        w.inner_count % w._accumulative_counts
        for w in wrappers
        if w._accumulative_counts > 1 and w.inner_count != getattr(w, '_max_counts', -1)
    ]
    return max(counts, default=0)


def _named(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    module = model.module if is_model_wrapper(model) else model
    return list(module.named_parameters())


def share_pending(model: nn.Module) -> None:
    """Average each pending gradient over the ranks (every rank calls it; a no-op in one
    process)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    world = dist.get_world_size()
    for _, param in _named(model):
        if param.grad is not None:
            dist.all_reduce(param.grad)
            param.grad.div_(world)


def pending_grads(model: nn.Module) -> dict[str, torch.Tensor]:
    """Parameter name → its gradient (a CPU copy), for the parameters that have one."""
    return {name: p.grad.detach().cpu().clone() for name, p in _named(model) if p.grad is not None}


def give_back(model: nn.Module, grads: dict[str, torch.Tensor]) -> int:
    """Set the parameters' gradients to ``grads`` (on each parameter's device and in its dtype);
    the number set. A name the model does not have, or a shape that differs, is left out."""
    given = 0
    for name, param in _named(model):
        grad: Optional[torch.Tensor] = grads.get(name)
        if grad is not None and grad.shape == param.shape:
            param.grad = grad.to(device=param.device, dtype=param.dtype)
            given += 1
    return given


#: the start of mmengine's warning at a resume between two steps, which no longer applies
LOST_WARNING = 'Resumed iteration number is not divisible by'


class _DropLostWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(LOST_WARNING)


@HOOKS.register_module()
class PendingGradsHook(Hook):
    """Keep the pending gradients in each training checkpoint written between two optimizer
    steps, and give them back to a run resumed from it (module docstring); one log line says
    so. A checkpoint loaded as weights (``load_from``) starts a run without them; one saved in
    another layout (``meta['batch_layout']``, which ``DnARunner`` records:
    :class:`~dna_mm.engine.global_batch.BatchLayout`) gets them only where they fit."""

    priority = 'VERY_LOW'
    _shared_at: Optional[int] = None
    _saved: Optional[tuple[int, dict, dict]] = None
    _quiet: Optional[logging.Filter] = None

    def before_save_on_every_rank(self, runner) -> None:
        if passes_pending(runner.optim_wrapper) and self._shared_at != runner.iter:
            share_pending(runner.model)  # once per iteration: a save_best run writes twice
            self._shared_at = runner.iter

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if 'optimizer' in checkpoint and passes_pending(runner.optim_wrapper):
            checkpoint[PENDING_KEY] = pending_grads(runner.model)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        grads = checkpoint.get(PENDING_KEY)
        if grads:
            meta = checkpoint.get('meta', {})
            self._saved = (meta.get('iter', -1), grads, meta)
            self._quiet = _DropLostWarning()
            runner.logger.addFilter(self._quiet)  # mmengine's warning at the count's start

    def before_train(self, runner) -> None:
        saved, self._saved = self._saved, None
        if self._quiet is not None:
            runner.logger.removeFilter(self._quiet)
            self._quiet = None
        if saved is None:
            return
        saved_iter, grads, meta = saved
        moved = getattr(runner, 'resumed_layout', None)  # the runner's conversion: its iteration here
        if (saved_iter if moved is None else moved.iter) != runner.iter:  # weights only (load_from)
            return
        steps = passes_pending(runner.optim_wrapper)
        old, now = BatchLayout.saved(meta), BatchLayout.of(runner)
        if old is not None:  # p1 · s1 samples at 1/G1: the p2 · s2 pending here, at 1/G2?
            held = saved_iter % old.accumulative_counts * old.per_iter
            again = 0 if moved is None else min(moved.again, held)  # the last ones, trained again
            if again or old.per_step != now.per_step or held != steps * now.per_iter:
                self._drop(runner, old, now, held, again, steps)
                return
        given = give_back(runner.model, grads)
        print_log(
            f'resume: iteration {runner.iter} is {steps} backward pass{"es" if steps != 1 else ""} into an '
            f'accumulation step: their gradients are given back ({given} parameters)',
            logger='current',
        )

    @staticmethod
    def _drop(runner, old: BatchLayout, now: BatchLayout, held: int, again: int, steps: int) -> None:
        """The warning for pending gradients of ``held`` samples that do not fit this run's steps
        (``again`` of them trained again; ``steps`` passes into this run's step)."""
        lost, k = held - again, now.accumulative_counts
        what = [
            f'{lost} sample{"s count" if lost != 1 else " counts"} in no optimizer step' if lost else '',
            f'{again} {"is" if again == 1 else "are"} trained again' if again else '',
            f'the next step is taken on {k - steps} of its {k} backward passes alone' if steps else '',
        ]
        print_log(
            f'resume: the gradients pending in the checkpoint ({held} sample{"s" if held != 1 else ""} '
            f'into a step of {old.describe()}) do not fit a step of {now.describe()} (iteration '
            f'{runner.iter} is {steps} pass{"es" if steps != 1 else ""} into one): they are dropped; '
            + '; '.join(w for w in what if w),
            logger='current',
            level=logging.WARNING,
        )
