"""``AlphaLoggerHook``: DnA's per-head α statistics per layer during training.

Off by default; one line in a config turns it on, after the runtime's own hooks (a list of
its own would drop them: ``RNGStateHook`` and ``PendingGradsHook`` make a resume exact)::

    custom_hooks = [*_base_.custom_hooks, dict(type='AlphaLoggerHook', interval=50)]

Every ``interval`` training iterations (and after the last) it logs, per DnA attention, the mean /
max / min / std of ``α`` over heads (:func:`dna_mm.analysis.alpha_stats`) as one logger line per
call and as scalars ``alpha/<group>/layer<i>/<stat>`` to every visualizer backend (MMEngine's
``LocalVisBackend`` writes them to ``vis_data/scalars.json``, ``TensorboardVisBackend`` to the
TensorBoard events), step = the iteration. Groups: ``temporal`` / ``spatial`` for TimeSformer's
divided space-time attentions, ``attn`` for one attention per block (:mod:`dna_mm.analysis.sites`).
"""

from __future__ import annotations

from typing import Any, Optional

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS

from ..errors import ConfigError
from ..models.sites import AttentionSite, alpha_stats, find_attention_sites

STATS = ('mean', 'max', 'min', 'std')


@HOOKS.register_module()
class AlphaLoggerHook(Hook):
    """Log α statistics per layer to the logger and the visualizer backends.

    Args:
        interval: Training iterations between logs (and after the last one), >= 1 (else a
            :class:`~dna_mm.errors.ConfigError`).
        log_per_head: Also write every head's α as a scalar (``alpha/<group>/layer<i>/head<h>``).
    """

    priority = 'LOW'

    def __init__(self, interval: int = 50, log_per_head: bool = False) -> None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(
                f'custom_hooks: AlphaLoggerHook interval must be an integer >= 1 (training iterations '
                f'between logs), got {interval!r}'
            )
        self.interval = interval
        self.log_per_head = log_per_head
        self._sites: Optional[list[AttentionSite]] = None

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        try:
            sites = find_attention_sites(model)
        except ValueError:
            sites = []
        self._sites = [s for s in sites if s.alpha is not None]
        if not self._sites:
            runner.logger.warning(
                'AlphaLoggerHook: the model has no DnA attention with a learnable α; nothing will be logged'
            )

    def after_train_iter(
        self, runner, batch_idx: int, data_batch: Any = None, outputs: Optional[dict] = None
    ) -> None:
        if self._sites and (
            self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner)
        ):
            self.log(runner, runner.iter + 1)

    def log(self, runner, step: int) -> None:
        """One logger line per attention; ``alpha/<group>/layer<i>/<stat>`` (and per head if
        asked) as scalars to every visualizer backend."""
        scalars: dict[str, float] = {}
        for site in self._sites or []:
            key, stats = f'alpha/{site.group}/layer{site.layer}', alpha_stats(site.alpha)
            scalars.update({f'{key}/{stat}': value for stat, value in stats.items()})
            if self.log_per_head:
                scalars.update({f'{key}/head{h}': v for h, v in enumerate(site.alpha.detach().tolist())})
            runner.logger.info(
                f'alpha {site.group} layer {site.layer} (iter {step}): '
                + '  '.join(f'{k} {stats[k]:.4f}' for k in STATS)
            )
        runner.visualizer.add_scalars(scalars, step=step)
