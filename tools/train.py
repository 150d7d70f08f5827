#!/usr/bin/env python
"""Train a recognizer (MMAction2's ``tools/train.py`` flags, plus CPU-aware defaults), or a
detector from an MMDetection config (``configs/vitdet_*.py``) the same way.

    python tools/train.py configs/timesformer_dna_ntu60.py [--work-dir DIR] [--resume [CKPT]]
        [--amp] [--no-validate] [--global-batch N|none] [--auto-scale-lr] [--seed N] [--cfg-options k=v ...]
        [--launcher {none,pytorch,slurm,mpi}] [--partial-load] [--tensorboard] [--verbose] [--debug]

Without CUDA, distributed runs use gloo and AMP falls back to full precision (logged).
``--resume`` with no value continues from the latest checkpoint in the work dir (and says so
when there is none). ``load_from`` / ``--resume`` checkpoints must match the model
(``--partial-load`` accepts one that does not and prints what was not loaded); a new
``train_cfg.max_epochs`` moves the schedule's end, ``val_interval`` and the checkpoint interval
with it. ``--global-batch N`` (config key ``global_batch_size``; the video recipes state 64) reaches a
global batch of N clips per optimizer step on any number of processes by gradient accumulation
(the steps are logged, iteration-based schedules scaled; :mod:`dna_mm.engine.global_batch`); it
leaves the lr as the config sets it (the log says so, with the linearly scaled value to set);
``--auto-scale-lr`` is the other choice (lr scaled to the actual batch, no accumulation).
``--tensorboard`` also writes TensorBoard scalars; ``--verbose`` prints the setup dump
(environment, config, hooks) on the terminal, not only in the log file.

Config values are checked before anything is built (lengths, intervals, batch sizes, learning
rates, clip / crop sizes > 0; attention names known): a mistake in the input (a value, a list
line, a missing file, a checkpoint that does not match or cannot be read) is one line and exit
status 2; ``--debug`` prints its traceback. Checkpoints carry the random state: a run stopped
at any checkpoint (also mid-epoch) and resumed logs the same losses as one never stopped.

Faults (``docs/training.md``, "When the machine misbehaves"): ``SIGTERM`` / ``SIGUSR1`` / Ctrl-C
save the iteration in progress and exit with status 128 + the signal's number (143 / 138 / 130:
requeue and ``--resume``; a second Ctrl-C stops at once); a crash is its traceback and status 1,
a killed data-loader worker one line and status 1 (``--resume`` goes on from the last
checkpoint); a checkpoint write that fails, a NaN / inf loss or gradient norm, or a work dir
that a live run holds is one line and status 2. Many ranks (``docs/training.md``, "Many ranks"):
a lost rank stops the others within ``env_cfg.dist_cfg.timeout`` (300 s by default; at once when
its process ended) with one line naming it, status 1; under ``torchrun --max-restarts`` a worker
started again resumes from the work dir's last checkpoint.
"""

from __future__ import annotations

import argparse
import os


def _global_batch(text: str) -> int:
    """``--global-batch``: a positive int, or ``none`` (0: accumulation off)."""
    if text.lower() == 'none':
        return 0
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f'expected a positive integer or none, got {text!r}')
    return int(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Train an action recognizer (dna_mm)')
    p.add_argument('config', help='train config file path')
    p.add_argument('--work-dir', help='the dir to save logs and models')
    p.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from CKPT, or (no value) from the latest checkpoint in work-dir',
    )
    p.add_argument('--amp', action='store_true', help='automatic mixed precision (CUDA only)')
    p.add_argument('--no-validate', action='store_true', help='skip validation during training')
    p.add_argument(
        '--global-batch',
        type=_global_batch,
        metavar='N|none',
        help='clips per optimizer step, reached by gradient accumulation over world size x batch '
        "(default: the config's global_batch_size; none: off)",
    )
    p.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the lr by actual / base batch size instead (no accumulation)',
    )
    p.add_argument('--seed', type=int, default=None, help="random seed (overrides the config's)")
    p.add_argument('--diff-rank-seed', action='store_true', help='different seeds per rank')
    p.add_argument('--deterministic', action='store_true', help='deterministic CUDNN')
    p.add_argument(
        '--cfg-options',
        nargs='+',
        metavar='KEY=VALUE',
        help='override config settings, key=value (e.g. train_cfg.max_epochs=1)',
    )
    p.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
    p.add_argument('--local_rank', '--local-rank', type=int, default=0)
    p.add_argument(
        '--partial-load',
        action='store_true',
        help='accept a load_from / resume checkpoint that does not match the model '
        '(the keys not loaded are printed); default: refuse it',
    )
    p.add_argument(
        '--tensorboard',
        action='store_true',
        help='also write TensorBoard scalars (TensorboardVisBackend) to the work dir',
    )
    p.add_argument(
        '--verbose',
        action='store_true',
        help='print the environment / config / hook dump on the terminal too',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def train(args: argparse.Namespace) -> None:
    from dna_mm.config import (
        check_config,
        enable_tensorboard,
        make_work_dir,
        prepare_cfg,
        shutdown_distributed,
    )
    from dna_mm.config.build import read_config
    from dna_mm.engine import apply_global_batch, build_runner, refuse_busy_work_dir
    from dna_mm.engine.distributed import resume_after_restart
    from dna_mm.errors import ConfigError
    from dna_mm.tools.cli import cfg_options, user_file

    cfg = read_config(args.config)
    if args.partial_load:
        cfg.load_partial = True
    if args.verbose:
        cfg.log_setup_to_console = True
    if args.tensorboard:
        enable_tensorboard(cfg)
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    if args.amp:
        cfg.optim_wrapper.type = 'AutoAmpOptimWrapper'  # dtype and loss scaling by the device
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
    if args.auto_scale_lr:
        if args.global_batch:
            raise ConfigError('--global-batch and --auto-scale-lr: choose one (see docs/training.md)')
        cfg.auto_scale_lr.enable = True
        cfg.global_batch_size = None  # the other answer to a smaller batch
    # the command line overrides the config's randomness, key by key (MMAction2's train.py drops
    # --seed when the config sets one: every seed of a sweep would train the same model)
    randomness = {'seed': None, **(cfg.get('randomness') or {})}  # None: a random seed
    if args.seed is not None:
        randomness['seed'] = args.seed
    if args.diff_rank_seed:
        randomness['diff_rank_seed'] = True
    if args.deterministic:
        randomness['deterministic'] = True
    cfg.randomness = randomness
    given = (cfg_options(args.cfg_options) or {}).get('randomness.seed', args.seed)
    if args.seed is not None and given != args.seed:  # the options merge last: they would win
        raise ConfigError(
            f'--seed {args.seed} and --cfg-options randomness.seed={given} disagree: give the seed once'
        )
    cfg = prepare_cfg(cfg, args.config, args.launcher, args.work_dir, args.cfg_options)
    resume_after_restart(cfg)  # torchrun --max-restarts: a worker started again goes on
    check_config(cfg, 'train')
    apply_global_batch(cfg, args.launcher, args.global_batch)
    if cfg.get('load_from'):
        user_file(cfg.load_from, '--resume' if cfg.get('resume') else 'load_from')
    make_work_dir(cfg.work_dir)  # checked, and not made for a run refused before it starts
    try:
        refuse_busy_work_dir(cfg.work_dir)  # before the runner makes its log folder there
        build_runner(cfg).train()
    finally:
        shutdown_distributed()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    run_tool('train.py', train, args)


if __name__ == '__main__':
    main()
