"""``NonFiniteLossHook``: a loss or gradient norm that is NaN or inf never reaches the weights.

mmengine applies every step, so a loss gone NaN (a learning rate far too high) makes NaN weights,
and every later checkpoint holds them. This hook checks each step before the optimizer takes it
(it wraps the ``backward`` and ``step`` of this run's optimizer wrapper, and unwraps them after):

    bad = some loss since the last step is not finite
          or (no active loss scaler) not isfinite(||g||),  ||g|| = sqrt(sum_p ||grad_p||^2)
    bad = max over the ranks of bad   (every rank skips or stops at the same step)

``||g||`` is the norm before clipping (mmengine's logged ``grad_norm``); with DDP the gradients
are already averaged over the ranks. A bad step is not applied (its gradients are zeroed).

* ``max_skips_in_a_row=0`` (default): the first bad step stops the run with
  :class:`NonFiniteLossError`, one line naming the iteration and the value. The weights were
  never touched by it, and the checkpoints written before it stay.
* ``max_skips_in_a_row=N``: up to ``N`` bad steps in a row are skipped (each logged with the
  counts); the next bad one in a row stops the run; a good step resets the count.
* **AMP**: with an active ``GradScaler`` (fp16 + dynamic scaling) non-finite gradients are how the
  scaler finds that its scale is too high: it skips that step and lowers the scale itself. Those
  are left to it and not counted (:attr:`NonFiniteLossHook.scaler_skips` counts them); the loss
  is still checked. bf16 runs have no active scaler and are checked in full.
* **Checkpoints**: before a checkpoint is written its weights and buffers are checked; a
  non-finite one (say BatchNorm statistics after a NaN forward) refuses the write with
  :class:`NonFiniteLossError` naming the key, so no checkpoint with non-finite weights is written.

Cost: one read of the gradients for their norm and one host sync per step.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Optional

import torch
from mmengine.hooks import Hook
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.registry import HOOKS

from ..checkpoint.loading import first_non_finite
from ..errors import ConfigError, UserError
from .loops import where_in_run
from .optim_wrappers import optim_wrappers
from .ranks import max_over_ranks


class NonFiniteLossError(UserError, FloatingPointError):
    """Training stopped on a NaN / inf loss or gradient norm (or weights about to be saved)."""


def gradient_norm(optimizer: torch.optim.Optimizer) -> float:
    """``sqrt(sum_p ||grad_p||^2)`` over the optimizer's parameters that have a gradient."""
    grads = [p.grad for group in optimizer.param_groups for p in group['params'] if p.grad is not None]
    if not grads:
        return 0.0
    if hasattr(torch.nn.utils, 'get_total_norm'):  # torch >= 2.6: one fused reduction per device
        return float(torch.nn.utils.get_total_norm(grads))
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])))


def active_loss_scaler(wrapper: OptimWrapper) -> Optional[Any]:
    """The ``GradScaler`` that skips steps itself (AMP with loss scaling on), else ``None``."""
    scaler = getattr(wrapper, 'loss_scaler', None) if isinstance(wrapper, AmpOptimWrapper) else None
    return scaler if scaler is not None and scaler.is_enabled() else None


def non_finite_optimizer_state(wrapper: OptimWrapper, model: torch.nn.Module) -> Optional[str]:
    """``'the optimizer state exp_avg of the weight backbone.cls_token'``: the first state tensor
    of ``wrapper``'s optimizers (an ``OptimWrapperDict``'s too) that holds a NaN or inf, else
    ``None`` (a resumed checkpoint's state is checked with it)."""
    names = {id(p): name for name, p in model.named_parameters()}
    for each in optim_wrappers(wrapper).values():
        for param, state in each.optimizer.state.items():
            key = first_non_finite(state)
            if key is not None:
                return f'the optimizer state {key} of the weight {names.get(id(param), "(unnamed)")}'
    return None


class _StepGuard:
    """The check around one optimizer wrapper: its ``backward`` and ``step`` replaced on the
    instance by functions that check and call them (a parameter scheduler's step counter, an
    attribute of ``step``, is kept); :meth:`remove` puts back what was there."""

    def __init__(self, wrapper: OptimWrapper, hook: NonFiniteLossHook, runner) -> None:
        self.wrapper, self.hook, self.runner = wrapper, hook, runner
        self.losses: list[torch.Tensor] = []
        self._saved = {
            name: wrapper.__dict__[name] for name in ('backward', 'step') if name in wrapper.__dict__
        }
        self._backward, self._step = wrapper.backward, wrapper.step

        def backward(loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            self.backward(loss, *args, **kwargs)

        def step(*args: Any, **kwargs: Any) -> None:
            self.step(*args, **kwargs)

        wrapper.backward = functools.wraps(self._backward)(backward)
        wrapper.step = functools.wraps(self._step)(step)

    def remove(self) -> None:
        for name in ('backward', 'step'):
            self.wrapper.__dict__.pop(name, None)
        self.wrapper.__dict__.update(self._saved)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        self.losses.append(loss.detach())
        self._backward(loss, *args, **kwargs)

    def step(self, *args: Any, **kwargs: Any) -> None:
        losses, self.losses = self.losses, []
        values = [float(loss.float().sum()) for loss in losses]
        bad_loss = next((v for v in values if not math.isfinite(v)), None)
        scaler = active_loss_scaler(self.wrapper)
        norm = None if scaler is not None else gradient_norm(self.wrapper.optimizer)
        bad_norm = norm is not None and not math.isfinite(norm)
        anywhere = max_over_ranks([float(bad_loss is not None), float(bad_norm)])
        if not any(anywhere):
            scale = scaler.get_scale() if scaler is not None else None
            self._step(*args, **kwargs)
            self.hook.applied(scaler is not None and scaler.get_scale() < scale)
            return
        self.wrapper.optimizer.zero_grad()
        if bad_loss is not None:
            what = f'the loss is {bad_loss}'
        elif bad_norm:
            what = f'the gradient norm is {norm} (loss {values[-1] if values else "?"})'
        else:
            what = 'another rank has a non-finite loss or gradient norm'
        self.hook.not_applied(self.runner, what)


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Stop (or skip the step) on a NaN / inf loss or gradient norm; refuse to save non-finite
    weights (module docstring).

    Args:
        max_skips_in_a_row: Bad steps skipped in a row before the next one stops the run;
            0 (default): the first one stops it. In a dna_mm config:
            ``--cfg-options default_hooks.non_finite.max_skips_in_a_row=N``.
    """

    priority = 'VERY_HIGH'

    def __init__(self, max_skips_in_a_row: int = 0) -> None:
        if not isinstance(max_skips_in_a_row, int) or max_skips_in_a_row < 0:
            raise ConfigError(
                f'NonFiniteLossHook: max_skips_in_a_row must be an integer >= 0, got {max_skips_in_a_row!r}'
            )
        self.max_skips_in_a_row = max_skips_in_a_row
        self.in_a_row = 0  # bad steps skipped since the last good one
        self.skipped = 0  # bad steps skipped in this run
        self.scaler_skips = 0  # steps the AMP loss scaler skipped (not failures)
        self._guards: list[_StepGuard] = []

    def before_train(self, runner) -> None:
        wrapper = runner.optim_wrapper
        wrappers = optim_wrappers(wrapper).values()
        self._guards = [_StepGuard(w, self, runner) for w in wrappers if isinstance(w, OptimWrapper)]

    def after_train(self, runner) -> None:
        for guard in self._guards:
            guard.remove()
        self._guards = []

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        key = first_non_finite(checkpoint.get('state_dict', {}))
        if key is not None:
            raise NonFiniteLossError(
                f'checkpoint not written at iteration {runner.iter + 1}: the weight {key} is not finite '
                f'(NaN or inf); the checkpoints written before stay'
            )

    def applied(self, scaler_skipped: bool) -> None:
        """A step without a non-finite value went to the optimizer."""
        self.in_a_row = 0
        self.scaler_skips += int(scaler_skipped)

    def not_applied(self, runner, what: str) -> None:
        """A bad step was dropped: log it and count it, or stop the run."""
        where = where_in_run(runner)
        if self.in_a_row >= self.max_skips_in_a_row:
            before = f' after {self.in_a_row} skipped in a row' if self.in_a_row else ''
            if self.max_skips_in_a_row:  # skipping is on: more skips rarely cure a run that diverged
                advice = (
                    f'lower the learning rate; default_hooks.non_finite.max_skips_in_a_row='
                    f'{self.max_skips_in_a_row} skipped as many as it allows'
                )
            else:
                advice = (
                    'lower the learning rate, or skip such steps: --cfg-options '
                    'default_hooks.non_finite.max_skips_in_a_row=N'
                )
            raise NonFiniteLossError(
                f'training stopped at {where}: {what}{before}; the step was not applied, and the '
                f'checkpoints written before it hold finite weights ({advice})'
            )
        self.in_a_row += 1
        self.skipped += 1
        runner.logger.warning(
            f'{where}: {what}; step skipped ({self.in_a_row} in a row of at most '
            f'{self.max_skips_in_a_row}, {self.skipped} in this run)'
        )
