"""The schedule rule: when a config's training length changes, the values it computed from the
old length at parse time move with it (:func:`sync_schedule`). Used where a length is changed:
``--cfg-options`` (:func:`dna_mm.config.prepare_cfg`) and the custom-dataset recipe
(:func:`dna_mm.preparation.custom.size_recipe`)."""

from __future__ import annotations

from typing import Any, Optional

from mmengine.config import Config


def sync_schedule(
    cfg: Config,
    old_max: Optional[int],
    explicit: frozenset[str] | set[str] = frozenset(),
    unit: str = 'epochs',
) -> list[str]:
    """After ``train_cfg.max_epochs`` (``unit='epochs'``) or ``train_cfg.max_iters``
    (``unit='iters'``) changed from ``old_max``, move with it the values a config computed from
    it at parse time (e.g. ``T_max=max_epochs - 1``, ViTDet's steps at 88.9% / 96.3%):

    * a ``param_scheduler`` of that unit ending at the old length ends at the new one; its
      ``T_max``, if it spanned ``begin`` to the end, spans to the new end (one equal to the
      old length, as MMAction2's MViTv2 recipe has, becomes the new length); its ``milestones``
      (counted from its ``begin``, as mmengine counts them) keep their fraction of its span
      (rounded, at least 1); one that would begin
      at or after the new end is dropped;
    * ``train_cfg.val_interval`` and ``default_hooks.checkpoint.interval`` (of that unit)
      equal to the old length become the new one (validate / save at the end, as before).

    Keys in ``explicit`` (the ``--cfg-options`` given; ``param_scheduler`` covers all its
    entries) are left as given. Returns ``'key old -> new'`` for each change.
    """
    by_epoch = unit == 'epochs'
    new = (cfg.get('train_cfg') or {}).get(f'max_{unit}')
    if not isinstance(new, int) or new <= 0 or old_max in (None, new):
        return []  # an invalid length moves nothing (check_config names it)
    old, moved = old_max, []

    def move(holder: Any, key: str, name: str, value: Any) -> None:
        if name not in explicit:
            moved.append(f'{name} {holder[key]} -> {value}')
            holder[key] = value

    schedulers = cfg.get('param_scheduler')
    if isinstance(schedulers, dict):
        schedulers = [schedulers]
    if schedulers and not any(k == 'param_scheduler' or k.startswith('param_scheduler.') for k in explicit):
        kept = []
        for i, sched in enumerate(schedulers):
            kept.append(sched)
            if sched.get('by_epoch', True) != by_epoch or sched.get('end') != old:
                continue
            begin = sched.get('begin', 0)
            name = f'param_scheduler[{i}]({sched.get("type")})'
            if new <= begin:  # it would start after the run ends
                kept.pop()
                moved.append(f'{name} dropped (begins at {unit[:-1]} {begin})')
                continue
            if sched.get('T_max') == old - begin:
                move(sched, 'T_max', f'{name}.T_max', new - begin)
            elif sched.get('T_max') == old:
                move(sched, 'T_max', f'{name}.T_max', new)
            if sched.get('milestones'):
                # counted from begin (mmengine's last_step): the same fraction of the scheduler's span
                steps = [max(1, round(m * (new - begin) / (old - begin))) for m in sched['milestones']]
                move(sched, 'milestones', f'{name}.milestones', steps)
            move(sched, 'end', f'{name}.end', new)
        cfg.param_scheduler = kept
    if cfg.train_cfg.get('val_interval') == old:
        move(cfg.train_cfg, 'val_interval', 'train_cfg.val_interval', new)
    checkpoint = (cfg.get('default_hooks') or {}).get('checkpoint')
    if checkpoint and checkpoint.get('interval') == old and checkpoint.get('by_epoch', True) == by_epoch:
        move(checkpoint, 'interval', 'default_hooks.checkpoint.interval', new)
    return moved
