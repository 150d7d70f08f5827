#!/usr/bin/env python
"""Test a recognizer (top-1, top-5, mean class accuracy) or a detector (COCO bbox / segm AP).

    python tools/test.py CONFIG CHECKPOINT [--dump preds.csv|preds.pkl] [--work-dir DIR]
        [--confusion-matrix cm.png [--normalize]] [--cfg-options k=v ...]
        [--launcher {none,pytorch,slurm,mpi}] [--partial-load] [--verbose]
        [--ood OOD_LIST [OOD_VIDEO_DIR]] [--skip-unreadable] [--debug]

CHECKPOINT is a local file, a URL or an mmengine prefix (``open-mmlab://...``); every load is
a ``weights_only`` load. It must match the model: missing, unexpected or resized keys are an
error listing them (``--partial-load`` tests anyway and prints what was not loaded).
``--dump x.csv`` writes one row per video (path, label, prediction, score, top-5);
``--dump x.pkl`` MMAction2's pickle of the raw predictions. ``--ood LIST [PREFIX]`` evaluates
OOD detection: the test set plus the OOD list, by ``RobustnessMetric`` (AUROC, AUPR, FPR95).
Detectors (MMDetection configs) print bbox and segm AP, AP50, AP75 (COCO); ``--dump x.pkl``
writes MMDetection's pickle of the predictions (masks as RLE), ``--dump x.json`` the COCO
results files ``x.bbox.json`` and ``x.segm.json``. ``--confusion-matrix cm.png`` draws the
recognizer's confusion matrix (rows true, columns predicted; counts, or ``--normalize`` shares of
the true class; class names from the config's ``label_map``) and writes its counts to ``cm.csv``
(any format matplotlib writes, by the suffix: .png, .pdf, .svg, ...; no suffix: .png). The
output files are checked before the test (a folder, a path under a file, an unknown figure
format: one line); their missing folders are made.

Every test video that cannot be read is listed (file and reason) at the end of the run, which
then exits with status 2 and no metric; ``--skip-unreadable`` computes the metrics over the
others and prints how many were skipped beside them. Top-k accuracies are computed only for
k < the number of classes. A mistake in the input is one line and exit status 2 (``--debug``:
the traceback). A test stopped by ``SIGTERM`` / ``SIGUSR1`` / Ctrl-C saves each rank's progress in
the work dir and exits 128 + N; the same command goes on from there (``docs/training.md``).
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description='Test a recognizer (accuracy) or a detector (COCO AP) (dna_mm)')
    p.add_argument('config', help='test config file path')
    p.add_argument('checkpoint', help='checkpoint: local file, URL or mmengine prefix')
    p.add_argument('--work-dir', help='the dir to save the evaluation metrics')
    p.add_argument(
        '--dump',
        type=str,
        help='predictions: recognizers .csv (per video) or .pkl; detectors .pkl or .json (COCO results)',
    )
    p.add_argument(
        '--confusion-matrix',
        metavar='FILE',
        help='recognizers: draw the confusion matrix to FILE (.png, .pdf, .svg, ...; no suffix: .png; '
        'its counts beside it, .csv)',
    )
    p.add_argument(
        '--normalize',
        action='store_true',
        help="with --confusion-matrix: each cell as a share of its true class (default: counts)",
    )
    p.add_argument(
        '--cfg-options', nargs='+', metavar='KEY=VALUE', help='override config settings, key=value'
    )
    p.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
    p.add_argument('--local_rank', '--local-rank', type=int, default=0)
    p.add_argument(
        '--ood',
        nargs='+',
        metavar=('ANN_FILE', 'DATA_PREFIX'),
        help='OOD evaluation: the test set (in-distribution) plus this OOD list (and its video folder), '
        'evaluated by RobustnessMetric (AUROC, AUPR, FPR95; calibration on the in-distribution part)',
    )
    p.add_argument(
        '--partial-load',
        action='store_true',
        help='test even if the checkpoint does not match the model (the keys not '
        'loaded are printed); default: refuse it',
    )
    p.add_argument(
        '--verbose',
        action='store_true',
        help='print the environment / config / hook dump on the terminal too',
    )
    p.add_argument(
        '--skip-unreadable',
        action='store_true',
        help='compute the metrics over the readable test videos (the count skipped is printed); '
        'default: list the unreadable ones and stop without a metric',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    if args.ood is not None and len(args.ood) > 2:
        p.error('--ood takes ANN_FILE and optionally DATA_PREFIX')
    if args.normalize and not args.confusion_matrix:
        p.error('--normalize goes with --confusion-matrix FILE')
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def test(args: argparse.Namespace) -> dict:
    from dna_mm.config import (
        check_config,
        format_metrics,
        make_work_dir,
        prepare_cfg,
        shutdown_distributed,
        skip_unreadable,
    )
    from dna_mm.config.build import read_config
    from dna_mm.config.check.evaluation import multi_label_dataset
    from dna_mm.engine import build_runner
    from dna_mm.errors import ConfigError
    from dna_mm.evaluation import dump_evaluator, with_ood_evaluation
    from dna_mm.evaluation.confusion import figure_files
    from dna_mm.tools.cli import not_an_input, output_file, user_file

    user_file(args.checkpoint, 'checkpoint')
    # the files written at the end, checked now: not after the whole test
    outputs = {'--dump': [args.dump]}
    if args.confusion_matrix is not None:
        # the path given too: a folder is refused, not drawn to FOLDER.png beside it
        outputs['--confusion-matrix'] = [
            args.confusion_matrix,
            *figure_files(args.confusion_matrix, '--confusion-matrix'),
        ]
    for flag, paths in outputs.items():
        for path in paths:
            output_file(path, flag)
            not_an_input(path, flag, dict(config=args.config, checkpoint=args.checkpoint))
    cfg = read_config(args.config)
    if args.partial_load:
        cfg.load_partial = True
    if args.verbose:
        cfg.log_setup_to_console = True
    # the checkpoint's weights, not a training run's state (a resumed run's saved config has resume=True)
    cfg.load_from, cfg.resume = args.checkpoint, False
    cfg.test_only = True  # the work dir's config stays the one training saved (DnARunner.dump_config)
    # --cfg-options first: they may address test_evaluator, which --dump turns into a list
    cfg = prepare_cfg(cfg, args.config, args.launcher, args.work_dir, args.cfg_options)
    check_config(cfg, 'test')
    detector = cfg.get('default_scope') == 'mmdet'
    if args.skip_unreadable:
        skip_unreadable(cfg)
    if args.ood is not None:
        with_ood_evaluation(cfg, *args.ood)
    added = []
    if args.confusion_matrix is not None:
        if detector:
            raise ConfigError('--confusion-matrix is for recognizers (a detector has no class per input)')
        multi = multi_label_dataset(cfg.test_dataloader.get('dataset'), 'test_dataloader.dataset')
        if multi is not None:
            raise ConfigError(
                f'--confusion-matrix is for a test of one class per video: {multi} has '
                'multi_class=True (its mean average precision is the metric)'
            )
        added.append(dict(type='ConfusionMatrix'))
    if args.dump is not None and detector:
        if args.dump.endswith('.json'):  # COCO results files <prefix>.bbox.json, <prefix>.segm.json
            evaluators = cfg.test_evaluator
            coco = [
                e
                for e in (evaluators if isinstance(evaluators, (list, tuple)) else [evaluators])
                if getattr(e.get('type'), '__name__', str(e.get('type'))).rpartition('.')[2] == 'CocoMetric'
            ]
            if not coco:
                raise ConfigError(
                    '--dump NAME.json writes the results of a CocoMetric, and test_evaluator has none'
                )
            for metric in coco:
                metric.outfile_prefix = args.dump[: -len('.json')]
            args.dump = None
    if args.dump is not None:
        head = cfg.model.get('cls_head') or {}
        multi_label = bool(head.get('multi_class')) and head.get('average_clips') == 'score'
        added.append(dump_evaluator(args.dump, detector, multi_label))
    if added:
        evaluators = cfg.test_evaluator
        cfg.test_evaluator = [
            *(evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]),
            *added,
        ]
    make_work_dir(cfg.work_dir)  # checked, and not made for a test refused before it starts
    try:
        runner = build_runner(cfg)
        metrics = runner.test()
        matrix = metrics.pop('confusion_matrix/result', None)
        if runner.rank == 0:
            print(format_metrics(metrics) + skipped_note(runner), flush=True)
            if matrix is not None and args.confusion_matrix is not None:  # not a config's own metric
                draw_confusion_matrix(cfg, matrix, args.confusion_matrix, args.normalize)
        del runner  # freed, with what holds the process group, before it is left
    finally:
        shutdown_distributed()
    return metrics


def draw_confusion_matrix(cfg, matrix, path: str, normalize: bool) -> None:
    """The figure and its table, class names from the config's label map."""
    from dna_mm.apis.inference import resolve_class_names
    from dna_mm.evaluation.confusion import confusion_figure

    names = resolve_class_names(cfg, int(matrix.shape[0]))
    written = confusion_figure(matrix.numpy(), names, path, normalize)
    print(f'confusion matrix: {" and ".join(written)}', flush=True)


def skipped_note(runner) -> str:
    """``'  (2 unreadable videos skipped: metrics over 62 of 64)'``, or ``''``."""
    skipped = getattr(runner.test_loop, 'unreadable', None) or []
    if not skipped:
        return ''
    total, noun = len(runner.test_loop.dataloader.dataset), runner.test_loop.noun
    for path, reason in skipped:
        print(f'skipped unreadable test {noun} {path}: {reason}', file=sys.stderr)
    return f'  ({len(skipped)} unreadable {noun}s skipped: metrics over {total - len(skipped)} of {total})'


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('test.py', test, args)


if __name__ == '__main__':
    main()
