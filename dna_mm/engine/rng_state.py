"""The random state a training run draws from, saved in every checkpoint and restored on resume.

A run draws random numbers from Python's ``random``, numpy's global generator, torch's CPU
generator and each CUDA device's (dropout, drop-path, the RPN / RoI samplers). mmengine 0.10.7
saves none of them: a resumed run re-seeds, so from the first resumed iteration its draws differ
from those of the run it continues. What the data draws is *derived*, not stored:
``DefaultSampler`` shuffles with ``seed + epoch``, and each training sample draws from streams
seeded by the run's ``seed`` and its place in the run (:mod:`dna_mm.engine.sample_seeds`), in a
worker or in the main process; so the run's ``seed`` is saved too. A config names
:class:`RNGStateHook` in ``custom_hooks`` and dna_mm's loops (:mod:`dna_mm.engine.loops`) in
``train_cfg`` (``configs/_base_/``).

Everything is stored as tensors and plain containers, so the checkpoint stays loadable with
a weights-only ``torch.load``.
"""

from __future__ import annotations

import random
from typing import Any, Optional

import numpy as np
import torch
from mmengine.dist import get_dist_info
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS

RNGState = dict[str, Any]


def capture_rng_state() -> RNGState:
    """This process's generators: ``python``, ``numpy``, ``torch`` (CPU) and ``cuda`` (one state
    per device, when CUDA is initialised)."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: RNGState = dict(
        python=[version, torch.tensor(internal, dtype=torch.int64), gauss],
        numpy=[name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        torch=torch.get_rng_state(),
    )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: RNGState) -> None:
    """Set the generators to ``state`` (from :func:`capture_rng_state`). Its tensors may be on a
    GPU (mmengine's resume maps a checkpoint to the run's device); the generators take CPU ones."""
    version, internal, gauss = state['python']
    random.setstate((int(version), tuple(int(x) for x in internal.tolist()), gauss))
    name, keys, pos, has_gauss, cached = state['numpy']
    np.random.set_state((name, keys.cpu().numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state['torch'].cpu())
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state['cuda']])


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save the random state and the run's seed in each checkpoint
    (``checkpoint['rng_state'] = dict(seed=..., world_size=..., state=...)``); on resume, give
    them to the train loop (``resume_rng_state``), which restores them where the saved run
    stood. Loops without ``resume_rng_state`` (not dna_mm's) are left alone. Validation runs
    between :func:`capture_rng_state` and :func:`restore_rng_state`, so it draws nothing from the
    training streams.

    mmengine saves checkpoints on rank 0 only (``Runner.save_checkpoint`` is ``master_only``),
    so the state saved is rank 0's: a run of one process resumes exactly; a distributed run
    gets back its seed (data order, each sample's draws) but not the other ranks' streams (a
    warning says so on resume)."""

    priority = 'VERY_LOW'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        _, world_size = get_dist_info()
        checkpoint['rng_state'] = dict(seed=runner.seed, world_size=world_size, state=capture_rng_state())

    def before_val(self, runner) -> None:
        self._before_val = capture_rng_state()  # validation inside training draws nothing from it

    def after_val(self, runner) -> None:
        state, self._before_val = getattr(self, '_before_val', None), None
        if state is not None:
            restore_rng_state(state)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        loop = getattr(runner, '_train_loop', None)
        if hasattr(loop, 'resume_rng_state') and 'rng_state' in checkpoint:
            loop.resume_rng_state = checkpoint['rng_state']  # used only if the loop was resumed


def rank_state(saved: dict) -> Optional[RNGState]:
    """The state to restore from a checkpoint's ``rng_state``: the saved one in a run of one
    process that was saved by one process; else ``None``, with a warning."""
    _, world_size = get_dist_info()
    if world_size == 1 and saved.get('world_size', 1) == 1 and 'state' in saved:
        return saved['state']
    print_log(
        f'resume: a run of {world_size} process(es) from a checkpoint of '
        f"{saved.get('world_size', 1)}: the seed (data order, each sample's draws) is restored, "
        f'the random streams of the processes are not (the losses will differ from an uninterrupted run)',
        logger='current',
        level=30,
    )
    return None
