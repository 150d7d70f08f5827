"""Exact resume: a training run killed (SIGKILL) right after a checkpoint and resumed with
``--resume`` logs the same loss as the uninterrupted run at every later iteration.

TimeSformer (epoch-based; dropout, drop-path, random frame offsets drawn in two dataloader
workers, persistent or not) is killed after a checkpoint taken by iteration in the middle of its
second epoch; ViTDet (iteration-based; RPN / RoI sampling, random flips in the main process, or in
two persistent workers, the COCO configs' loader, with the resumed run on another seed) in the
middle of its second pass over the data. A run resumed from the same checkpoint without its random
state shows that the comparison can fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest
import torch
from conftest import REPO, TINY_MASK_RCNN, coco_run_options, drawing_demo_config, run_tool, tiny_run_options
from processes import children

from dna_mm.checkpoint import read_checkpoint

VITDET_DEMO = str(REPO / 'configs' / 'vitdet_dna_demo.py')


def losses(work_dir: Path) -> dict[int, float]:
    """iteration (1-based) -> loss, from the newest run's ``vis_data/scalars.json``."""
    runs = sorted(work_dir.glob('*/vis_data/scalars.json'))
    records = [json.loads(ln) for ln in runs[-1].read_text().splitlines()]
    return {r['step']: r['loss'] for r in records if 'loss' in r}


def descendants(pid: int) -> list[int]:
    """``pid``'s child processes, theirs, and so on."""
    found = children(pid)
    return [*found, *(d for child in found for d in descendants(child))]


def kill_after_checkpoint(
    cmd: list[str], work_dir: Path, timeout: float = 600, env: Optional[dict] = None
) -> dict:
    """Start ``cmd``, SIGKILL it and every process under it (loader workers, torchrun's ranks) as
    soon as it has written a checkpoint; that checkpoint."""
    log = open(work_dir.parent / f'{work_dir.name}.out', 'w')
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    pointer, start = work_dir / 'last_checkpoint', time.time()
    while not pointer.exists() and proc.poll() is None and time.time() - start < timeout:
        time.sleep(0.05)
    alive = proc.poll() is None
    for pid in [proc.pid, *descendants(proc.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    log.close()
    assert alive, f'the run ended before it was killed:\n{Path(log.name).read_text()[-3000:]}'
    return read_checkpoint(pointer.read_text().strip())


def forget_rng_state(checkpoint: dict) -> str:
    """Take the random state out of ``checkpoint``; what was taken."""
    del checkpoint['rng_state']
    return 'without the random state'


def check_exact_resume(
    config: str,
    opts: list[str],
    tmp_path: Path,
    last: int,
    resume_seed: int = 0,
    launcher: Sequence[str] = (),
    forget: Callable[[dict], str] = forget_rng_state,
    flags: Sequence[str] = (),
) -> dict:
    """``resume_seed``: the seed of the resumed run (a run that draws its seed draws another one;
    the saved run's comes back). ``launcher``: what runs ``tools/train.py`` (torchrun's module and
    options, the ranks then launched with ``--launcher pytorch``). ``forget``: what a run resumed
    from the checkpoint without it must differ by. ``flags``: more of ``tools/train.py``'s."""
    distributed = ['--launcher', 'pytorch'] if launcher else []
    train = [*launcher, 'tools/train.py', config, *distributed, *flags, '--seed', '0']
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'GLOO_SOCKET_IFNAME': 'lo'}
    full, cut = tmp_path / 'full', tmp_path / 'cut'
    run_tool([*train, '--work-dir', str(full), '--cfg-options', *opts], env=env)
    saved = kill_after_checkpoint(
        [sys.executable, *train, '--work-dir', str(cut), '--cfg-options', *opts], cut, env=env
    )
    at = saved['meta']['iter']
    train[-1] = str(resume_seed)
    out = run_tool([*train, '--work-dir', str(cut), '--resume', '--cfg-options', *opts], env=env).stdout
    reference, resumed = losses(full), losses(cut)
    assert sorted(reference) == list(range(1, last + 1))
    assert sorted(resumed) == list(range(at + 1, last + 1)), out[-3000:]  # continued, nothing repeated
    print(
        f'\n{config}: killed after the checkpoint of iteration {at}; iteration, loss uninterrupted, resumed'
    )
    for i in resumed:
        print(f'  {i:3d}  {reference[i]:.10f}  {resumed[i]:.10f}')
    assert [resumed[i] for i in resumed] == [reference[i] for i in resumed], (at, reference, resumed)

    # the same checkpoint without (part of) its random state resumes with other draws
    taken = forget(saved)
    blind = tmp_path / 'blind'
    blind.mkdir()
    torch.save(saved, blind / 'no_rng.pth')
    run_tool(
        [*train, '--work-dir', str(blind), '--resume', str(blind / 'no_rng.pth'), '--cfg-options', *opts],
        env=env,
    )
    other = losses(blind)
    print(f'  {taken}: ' + '  '.join(f'{i}: {other[i]:.6f}' for i in other))
    assert any(other[i] != reference[i] for i in other), 'the comparison cannot fail'
    return dict(at=at, reference=reference, resumed=resumed, other=other, out=out)


@pytest.mark.slow  # four training processes: ~1-2 min on 2 cores
@pytest.mark.integration
@pytest.mark.parametrize('persistent', [False, True], ids=['workers', 'persistent workers'])
def test_timesformer_killed_mid_epoch_resumes_exactly(tiny_video_set, tmp_path, persistent: bool) -> None:
    opts = [
        *tiny_run_options(tiny_video_set, epochs=3),  # 4 iterations per epoch
        'train_dataloader.num_workers=2',
        f'train_dataloader.persistent_workers={persistent}',  # the dataset configs' True
        'model.backbone.drop_path_rate=0.2',
        'model.backbone.dropout_ratio=0.1',
        'model.cls_head.dropout_ratio=0.5',
        'default_hooks.checkpoint.by_epoch=False',
        'default_hooks.checkpoint.interval=5',  # iteration 5: the 2nd batch of epoch 2
        'log_processor.window_size=1',
        'val_dataloader=None',
        'val_cfg=None',
        'val_evaluator=None',
    ]
    seen = check_exact_resume(str(drawing_demo_config(tmp_path)), opts, tmp_path, last=12)
    assert seen['at'] % 4 != 0  # mid-epoch


def swap_rank_1_streams(checkpoint: dict) -> str:
    """Give rank 1 the random streams rank 0 saved (the seeds and rank 0 keep theirs)."""
    ranks = checkpoint['rng_state']['ranks']
    assert len(ranks) == 2 and ranks[0]['seed'] != ranks[1]['seed'], ranks  # --diff-rank-seed
    ranks[1]['state'] = ranks[0]['state']
    return "with rank 1 given rank 0's streams"


@pytest.mark.slow  # four runs of two ranks: ~2-3 min on 2 cores
@pytest.mark.integration
def test_two_ranks_killed_mid_epoch_resume_exactly(tiny_video_set, tmp_path) -> None:
    """Two ranks under torchrun (gloo), each its own seed (``--diff-rank-seed``; the sampler's then
    drawn and shared): rank 0 logs its loss, which rank 1's dropout and drop path reach through
    DDP's averaged gradients, so rank 1's streams must come back too (each rank's are in the
    checkpoint)."""
    opts = [
        *tiny_run_options(tiny_video_set, epochs=6),  # 2 iterations per epoch on each rank
        'train_dataloader.num_workers=2',
        'train_dataloader.persistent_workers=True',
        'model.backbone.drop_path_rate=0.2',
        'model.backbone.dropout_ratio=0.1',
        'model.cls_head.dropout_ratio=0.5',
        'default_hooks.checkpoint.by_epoch=False',
        'default_hooks.checkpoint.interval=5',  # iteration 5: the 1st batch of epoch 3
        'log_processor.window_size=1',
        'val_dataloader=None',
        'val_cfg=None',
        'val_evaluator=None',
    ]
    launcher = ['-m', 'dna_mm.tools.torchrun', '--nproc_per_node=2']
    config = str(drawing_demo_config(tmp_path))
    forget, flags = swap_rank_1_streams, ['--diff-rank-seed']
    seen = check_exact_resume(config, opts, tmp_path, last=12, launcher=launcher, forget=forget, flags=flags)
    assert seen['at'] == 5, seen['at']


@pytest.mark.slow  # four training processes: ~1-2 min on 2 cores
@pytest.mark.integration
@pytest.mark.parametrize(
    'workers', [0, 2], ids=['flips in the main process', 'flips in 2 persistent workers, another seed drawn']
)
def test_vitdet_killed_mid_interval_resumes_exactly(tmp_path, workers: int) -> None:
    pytest.importorskip('mmdet.models')
    from dna_mm.synthetic.coco_shapes import CocoDatasetSpec, ensure_coco_dataset

    root = ensure_coco_dataset(
        tmp_path / 'coco',
        CocoDatasetSpec(train_images=6, test_images=2, size=64, min_object=18, max_object=30, max_objects=2),
    )
    values = dict(TINY_MASK_RCNN, **coco_run_options(root))
    values.update(
        {
            'model.backbone.window_size': 4,
            'train_cfg.max_iters': 8,  # 3 batches a pass over the data (DefaultSampler, as COCO's)
            'default_hooks.checkpoint.interval': 4,  # batch 1 of pass 2
            'default_hooks.logger.interval': 1,
            'log_processor.window_size': 1,
        }
    )
    if workers:  # the COCO configs' loader: the workers started when the loop is built are kept
        values.update({'train_dataloader.num_workers': workers, 'train_dataloader.persistent_workers': True})
    opts = [f'{k}={json.dumps(v) if isinstance(v, list) else v}' for k, v in values.items()]
    seen = check_exact_resume(VITDET_DEMO, opts, tmp_path, last=8, resume_seed=1 if workers else 0)
    assert seen['at'] == 4, seen['at']
    skipped = (
        'iteration 5 is batch 2 of pass 2 over the training data; the 4 batches already trained are skipped'
    )
    assert skipped in seen['out'], seen['out'][-3000:]


def test_validation_draws_nothing_from_the_training_streams() -> None:
    """RNGStateHook puts the random state back after validation (mmengine's loops run it)."""
    import random

    import numpy as np

    from dna_mm.engine import RNGStateHook

    def seed() -> None:
        torch.manual_seed(0), random.seed(0), np.random.seed(0)

    def draw() -> tuple:
        return torch.rand(3).tolist(), random.random(), np.random.rand()

    seed()
    expected = draw()
    seed()
    hook = RNGStateHook()
    hook.before_val(None)
    draw(), draw()  # what validation draws
    hook.after_val(None)
    assert draw() == expected


def test_a_rank_gets_its_own_record_back_and_another_world_size_only_the_seeds() -> None:
    """``saved_record`` on this process (one, rank 0): a checkpoint of one process gives its
    record; one of two ranks (``ranks``) is another number of processes: rank 0's seeds, no
    streams (the run draws as it starts)."""
    from dna_mm.engine.rng_state import capture_rng_state, saved_record

    state = capture_rng_state()
    one = dict(world_size=1, seed=3, data_seed=9, state=state)
    assert saved_record(one) == dict(seed=3, data_seed=9, state=state)
    ranks = [dict(seed=3, data_seed=9, state=state), dict(seed=4, data_seed=9, state=state)]
    two = dict(world_size=2, seed=3, data_seed=9, state=state, ranks=ranks)
    assert saved_record(two) == dict(seed=3, data_seed=9, state=None)
    older = dict(world_size=1, seed=3, state=state)  # a checkpoint of an earlier dna_mm: no data seed
    assert saved_record(older) == dict(seed=3, data_seed=None, state=state)


def test_the_private_mmengine_names_the_loops_use_are_there() -> None:
    """dna_mm's loops re-implement mmengine 0.10's ``run``; the private names they use
    (``MMENGINE_PRIVATE_NAMES``) must be in the mmengine installed (requirements: 0.10)."""
    import pkgutil

    import mmengine

    from dna_mm.engine.loops import MMENGINE_PRIVATE_NAMES

    assert mmengine.__version__.startswith('0.10.'), mmengine.__version__
    for owner, names in MMENGINE_PRIVATE_NAMES.items():
        where = pkgutil.resolve_name(owner)
        assert all(callable(getattr(where, name, None)) for name in names), (owner, names)
    from mmengine.runner.loops import _InfiniteDataloaderIterator
    from torch.utils.data import DataLoader

    assert _InfiniteDataloaderIterator(DataLoader(range(2)))._epoch == 0  # the passes, set on resume


@pytest.mark.parametrize('value', [-1, 'often', True])
def test_a_bad_skip_log_interval_is_named(value) -> None:
    from dna_mm.engine.loops import ResumableEpochBasedTrainLoop, ResumableIterBasedTrainLoop
    from dna_mm.errors import ConfigError

    for loop in (ResumableEpochBasedTrainLoop, ResumableIterBasedTrainLoop):
        with pytest.raises(
            ConfigError, match=r'train_cfg.skip_log_interval must be a number of seconds >= 0'
        ):
            loop(runner=None, dataloader=None, skip_log_interval=value)
