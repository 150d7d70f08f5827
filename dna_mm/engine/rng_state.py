"""The random state a training run draws from, saved in every checkpoint and restored on resume.

A run draws random numbers from Python's ``random``, numpy's global generator, torch's CPU
generator and each CUDA device's (dropout, drop-path, the RPN / RoI samplers). mmengine 0.10.7
saves none of them: a resumed run re-seeds, so from the first resumed iteration its draws differ
from those of the run it continues. What the data draws is *derived*, not stored:
``DefaultSampler`` shuffles with ``seed + epoch``, and each training sample draws from streams
seeded by the run's ``seed`` and its place in the run (:mod:`dna_mm.engine.sample_seeds`), in a
worker or in the main process; so the seeds are saved too (each rank's: :func:`rank_record`).
A config names :class:`RNGStateHook` in ``custom_hooks`` and dna_mm's loops
(:mod:`dna_mm.engine.loops`) in ``train_cfg`` (``configs/_base_/``).

Everything is stored as tensors and plain containers, so the checkpoint stays loadable with
a weights-only ``torch.load``.
"""

from __future__ import annotations

import random
from typing import Any, Optional

import numpy as np
import torch
from mmengine.dist import all_gather_object, get_dist_info
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


def data_seed(runner) -> Optional[int]:
    """The training sampler's shuffling seed: mmengine gives ``DefaultSampler`` the run's seed,
    or, under ``randomness.diff_rank_seed``, one it draws and shares between the ranks."""
    loader = getattr(getattr(runner, '_train_loop', None), 'dataloader', None)  # a built loop's
    sampler = getattr(getattr(loader, 'batch_sampler', None), 'sampler', None)
    seed = getattr(sampler, 'seed', None)
    return seed if isinstance(seed, int) else None


def rank_record(runner, state: Optional[RNGState] = None) -> dict:
    """What a resume gives back to this rank: ``seed`` (the rank's: ``runner.seed``),
    ``data_seed`` (:func:`data_seed`) and ``state`` (``state``, else :func:`capture_rng_state`)."""
    return dict(seed=runner.seed, data_seed=data_seed(runner), state=state or capture_rng_state())


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save the random state and the seeds of every rank in each checkpoint
    (``checkpoint['rng_state'] = dict(world_size=..., seed=..., data_seed=..., state=...,
    ranks=[...])``: rank 0's :func:`rank_record`, and in a distributed run each rank's in rank
    order); on resume, give them to the train loop (``resume_rng_state``), which restores this
    rank's where the saved run stood (:func:`saved_record`). Loops without ``resume_rng_state``
    (not dna_mm's) are left alone. Validation runs between :func:`capture_rng_state` and
    :func:`restore_rng_state`, so it draws nothing from the training streams.

    mmengine writes checkpoints on rank 0 only (``Runner.save_checkpoint`` is ``master_only``);
    every rank calls it, and :class:`~dna_mm.engine.runner.DnARunner` calls
    :meth:`before_save_on_every_rank` there first, which gathers the ranks' records to rank 0 (one
    ``all_gather_object`` of a few kilobytes a rank). So a distributed run resumed on as many
    ranks resumes exactly too; on another number of ranks it gets back rank 0's seeds (data
    order, each sample's draws) but not the ranks' streams (a warning says so).

    A checkpoint written during validation (mmengine's ``CheckpointHook`` writes the epoch's or
    iteration's checkpoint again after a validation with ``save_best``, to record the best score)
    holds the training streams as validation found them, the state it ends by putting back, not
    the one validation left."""

    priority = 'VERY_LOW'
    _ranks: Optional[list] = None
    _before_val: Optional[RNGState] = None

    def before_save_on_every_rank(self, runner) -> None:
        _, world_size = get_dist_info()
        self._ranks = all_gather_object(rank_record(runner, self._before_val)) if world_size > 1 else None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        _, world_size = get_dist_info()
        ranks, self._ranks = self._ranks, None
        saved = dict(world_size=world_size, **rank_record(runner, self._before_val))
        if ranks is not None and len(ranks) == world_size:
            saved['ranks'] = ranks
        checkpoint['rng_state'] = saved

    def before_val(self, runner) -> None:
        self._before_val = capture_rng_state()  # validation inside training draws nothing from it

    def after_val(self, runner) -> None:
        state, self._before_val = self._before_val, None
        if state is not None:
            restore_rng_state(state)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        loop = getattr(runner, '_train_loop', None)
        if hasattr(loop, 'resume_rng_state') and 'rng_state' in checkpoint:
            loop.resume_rng_state = checkpoint['rng_state']  # used only if the loop was resumed


def saved_record(saved: dict) -> dict:
    """This rank's :func:`rank_record` from a checkpoint's ``rng_state``, saved by a run of as many
    processes; else rank 0's seeds with ``state=None``, with a warning."""
    rank, world_size = get_dist_info()
    saved_world = saved.get('world_size', 1)
    ranks = saved.get('ranks')
    own = dict(seed=saved.get('seed'), data_seed=saved.get('data_seed'), state=saved.get('state'))
    if world_size == saved_world == 1 and own['state'] is not None:
        return own
    if world_size == saved_world and ranks is not None and len(ranks) == world_size:
        return ranks[rank]
    why = (
        f'a checkpoint of {saved_world} process(es)'
        if world_size != saved_world
        else "a checkpoint that holds rank 0's random streams only"
    )
    print_log(
        f'resume: a run of {world_size} process(es) from {why}: the seed (data order, each '
        f"sample's draws) is restored, the random streams of the processes are not (the losses "
        f'will differ from an uninterrupted run)',
        logger='current',
        level=30,
    )
    return dict(own, state=None)
