#!/usr/bin/env python
"""Does DnA denoise? The video demo as a controlled experiment: several methods, several seeds,
ground truth, error bars.

    python tools/analysis/study.py [--methods softmax dna diff] [--seeds 5] [--epochs E]
        [--out DIR] [--data-root data/demo] [--distractors 2 4 8 16] [--likeness demo color]
        [--heldout-per-class 32] [--reference softmax] [--batch-size 8] [--device cpu|cuda]
        [--import MODULE ...] [--cfg-options KEY=VALUE ...] [--report-only]

A method is any registered attention member, by short name (``softmax``, ``dna``, ``diff``,
``cog``) or registered type; ``--import`` imports a member of your own first (a module on the
Python path, or a ``.py`` file: ``--methods relu dna --reference dna --import
docs/attention/relu_attention.py``), and the runs import it too. The tables and figures name
each method as its member does (:func:`dna_mm.analysis.plots.study.method_label`). A DnA variant is
a method of its own, ``dna:VARIANT`` or the paper's name alone (``dna:apm``, ``dna:A±``, ``A±``,
``Â±``, ``Q±V``, ``QV±``; ``dna`` is ``Q±V±``), named by the paper's name (``DnA (A±)``).

Each method is trained with each seed (0 … N−1) on the demo set (``tools/train.py`` then
``tools/test.py``, through the video demo's runs: ``configs/timesformer_dna_demo.py``, 2
distractors per clip), then evaluated in this process on clip sets whose target boxes are known:
the demo's test split and held-out sets with more distractors (``--distractors``; ``--likeness
color``: distractors in the target's colour too). The results:

* ``DIR/study.json`` — every run and the summary (:func:`dna_mm.analysis.study.summarize`):
  top-1 / mCA mean ± std over seeds, each method's paired difference to ``--reference`` with
  its 95 % Student-t interval, accuracy per held-out set, target attention mass per layer,
  attention, branch and set;
* ``DIR/table.md`` — the tables (the test split; the held-out sets);
  ``DIR/accuracy_vs_distractors.png``, ``DIR/target_mass.png``.

Runs go seed by seed (every method of seed 0, then of seed 1, …), so a partial study is already
paired. Each finished run keeps ``DIR/runs/<method>_seed<s>/result.json``, with what it was
trained with (``--epochs``, ``--cfg-options``) and evaluated on (``--distractors``, ``--likeness``,
``--heldout-per-class``); a study started again with the same ``--out`` skips them, and a run
stopped half-way (Ctrl-C, ``SIGTERM``, a scheduler's preemption: its ``preempted_iter_*.pth``, or
its last ``epoch_*.pth``) continues from its checkpoint (``tools/train.py --resume``; its seconds
are every attempt's). A run trained otherwise (or by an earlier study.py, which did not record
how) is not kept: the study stops first, naming the setting and both values; a run evaluated on
other held-out sets has its checkpoint evaluated on this study's. ``--report-only``
writes the JSON, table and figures of the runs finished so far and trains nothing (e.g. while
another invocation is still running); the runs must agree with each other. The training runs
use CUDA when there is a GPU, the CPU otherwise (``--device`` sets the evaluation's). A
checkout's study works in the checkout, an installed dna_mm's in the current folder (relative
``--out``, ``--data-root``, ``--heldout-root``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from dna_mm.analysis.study import ClipSet

REPO = Path(__file__).resolve().parents[2]  # the checkout, or an installed dna_mm's .mim folder
#: ``dna_mm.tools.cli.IMPORT_HELP`` (a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)
CONFIG = 'configs/timesformer_dna_demo.py'
#: --likeness → the MotionDatasetSpec fields that make the held-out distractors like the target
LIKENESS = {'demo': {}, 'color': dict(distractor_color='target'), 'size': dict(distractor_size='target')}
#: seed of the held-out set with n distractors: far from the demo set's (0)
HELDOUT_SEED = 1000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--methods',
        nargs='+',
        default=['softmax', 'dna', 'diff'],
        metavar='NAME',
        help='the attentions compared: any registered member, by short name or registered type; '
        'NAME+gated: that member with the gate of gated attention (dna+gated); NAME:VARIANT, or the '
        "paper's name alone: a DnA variant (dna:apm, dna:A±, A±, Â±, Q±V, QV±; dna is Q±V±)",
    )
    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
    p.add_argument('--seeds', type=int, default=5, help='runs per method, seeds 0 … N-1 (default 5)')
    p.add_argument('--epochs', type=int, default=None, help="training epochs (default: the demo config's 20)")
    p.add_argument('--out', default='work_dirs/study', help='study folder (runs, JSON, table, figures)')
    p.add_argument('--data-root', default='data/demo', help='the demo set (generated there once)')
    p.add_argument('--heldout-root', default=None, help='held-out sets (default: <data-root>_heldout)')
    p.add_argument(
        '--distractors', nargs='+', type=int, default=[2, 4, 8, 16], help='held-out distractor counts'
    )
    p.add_argument('--likeness', nargs='+', default=['demo', 'color'], choices=sorted(LIKENESS))
    p.add_argument('--heldout-per-class', type=int, default=32, help='clips per class of each held-out set')
    p.add_argument('--reference', default='softmax', help='the method the paired differences are taken to')
    p.add_argument('--batch-size', type=int, default=8, help='evaluation batch size')
    p.add_argument('--device', default=None, help='evaluation device (default: cuda when available)')
    p.add_argument(
        '--cfg-options',
        dest='run_options',
        nargs='+',
        default=[],
        metavar='KEY=VALUE',
        help="settings of every run's config, after the study's own (tools/train.py and tools/test.py "
        'take them as written)',
    )
    p.add_argument('--report-only', action='store_true', help='summarise the finished runs, train nothing')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """The values :func:`parse_args` does not check: a :class:`~dna_mm.errors.ConfigError`. The
    methods must be registered members unless ``--report-only`` (which trains nothing), a
    variant (``dna:apm``) a variant of a member that has them; ``args.methods`` and
    ``args.reference`` become their canonical names (``A±`` → ``dna:apm``, ``dna:Q±V±`` → ``dna``:
    the runs' folders), a model named twice run once."""
    from dna_mm.errors import ConfigError
    from dna_mm.family import distinct_methods
    from dna_mm.tools.cli import known_methods
    from dna_mm.utils.tool_runs import at_least

    # {canonical: ...}; a report of runs made reads their names only (a member of yours need not import)
    methods = list((distinct_methods if args.report_only else known_methods)('--methods', args.methods))
    at_least({'--seeds': args.seeds, '--epochs': args.epochs, '--heldout-per-class': args.heldout_per_class})
    seeded = [o for o in args.run_options if o.split('=', 1)[0].strip() in ('randomness.seed', 'randomness')]
    if seeded:
        raise ConfigError(
            f'--cfg-options {seeded[0]}: the study gives each run its seed (0 … N-1, --seeds N); one '
            'seed for every run would train each method N times as one model'
        )
    at_least({'--distractors': args.distractors}, least=0)
    (reference,) = distinct_methods('--reference', [args.reference])
    if reference not in methods:
        raise ConfigError(f'--reference {args.reference} is not one of --methods {args.methods}')
    args.methods, args.reference = methods, reference


def home() -> Path:
    """Where the study's runs work (``dna_mm.utils.tool_runs.runs_home``): the checkout, or for an
    installed dna_mm the current folder; relative ``--out``, ``--data-root`` and ``--heldout-root``
    are taken from there."""
    from dna_mm.utils.tool_runs import runs_home

    return runs_home(REPO)


def _absolute(path: str) -> Path:
    return Path(path) if os.path.isabs(path) else home() / path


def clip_sets(args: argparse.Namespace, data_root: Path) -> list[ClipSet]:
    """The demo set (generated once) and the held-out sets, each made unless cached."""
    from dna_mm.analysis.study import ClipSet
    from dna_mm.synthetic.motion_clips import MotionDatasetSpec, ensure_motion_dataset

    demo = MotionDatasetSpec()
    ensure_motion_dataset(data_root, demo)
    sets = [ClipSet('demo_test', data_root, demo.num_distractors, heldout=False)]
    root = (
        _absolute(args.heldout_root)
        if args.heldout_root
        else data_root.with_name(data_root.name + '_heldout')
    )
    for like in args.likeness:
        for n in args.distractors:
            spec = MotionDatasetSpec(
                train_per_class=0,
                test_per_class=args.heldout_per_class,
                num_distractors=n,
                seed=HELDOUT_SEED + 100 * sorted(LIKENESS).index(like) + n,
                **LIKENESS[like],
            )
            name = f'{like}_{n}'
            sets.append(ClipSet(name, ensure_motion_dataset(root / name, spec), n, like))
    return sets


def test_numbers(metrics: dict) -> dict:
    """``{line, top1, mca}`` of a test run's metrics (``dna_mm.utils.tool_runs.read_test_metrics``): the
    line ``tools/test.py`` prints and its top-1 and mCA (%), as it prints them (two decimals)."""
    from dna_mm.config import format_metrics

    return dict(
        line=format_metrics(metrics),
        top1=round(100 * metrics['acc/top1'], 2),
        mca=round(100 * metrics['acc/mean1'], 2),
    )


def run_config(run_dir: Path, member: str, settings: dict) -> Path:
    """A config of the run's own in ``run_dir``: the demo's, its attention ``member`` with
    ``settings`` (``gated=True``). Named as the demo's, so that mmengine's dump of it, which the
    evaluation reads, is where a plain run's is."""
    from dna_mm.models.attention import attention_class
    from dna_mm.utils.files import write_text_atomic

    attn = dict(_delete_=True, type=attention_class(member).__name__, **settings)
    path = run_dir / Path(CONFIG).name
    write_text_atomic(
        path, f'_base_ = {str(REPO / CONFIG)!r}\nmodel = dict(backbone=dict(attn_cfg={attn!r}))\n'
    )
    return path


def resumed_from(run_dir: Path) -> Optional[str]:
    """The checkpoint a training run stopped half-way left in ``run_dir`` (``preempted_iter_*.pth``
    of a run told to stop, an ``epoch_*.pth``): the one ``tools/train.py --resume`` continues from
    (:func:`dna_mm.engine.checkpoint_hook.resume_candidates`), or ``None`` for a run to start."""
    from dna_mm.engine.checkpoint_hook import resume_candidates

    found = resume_candidates(str(run_dir))
    return found[0] if found else None


def runs_config() -> str:
    """The config the study's runs are made from, as this process reads it: the checkout's file
    (an absolute path: the study may run from any folder), else the installed one
    (``dna_mm.utils.tool_runs.shipped_config``); its epochs are a run's without ``--epochs``."""
    from dna_mm.utils.tool_runs import shipped_config

    config = shipped_config(CONFIG, home())
    return str(home() / config) if config == CONFIG else config


def training_settings(args: argparse.Namespace) -> dict:
    """What this study trains its runs with besides the method and seed
    (:func:`dna_mm.analysis.study_runs.training_settings`): ``{epochs, cfg_options}``."""
    from dna_mm.analysis.study_runs import training_settings as settings

    return settings(args.epochs, args.run_options, runs_config())


def run_one(args, method: str, seed: int, data_root: Path, sets: list[ClipSet], out: Path) -> dict:
    """Train + test (skipped when ``test.json`` is there), evaluate, write ``result.json``. The
    seconds of train + test are those of every attempt (a run stopped and resumed: each added),
    recorded in the run's :data:`~dna_mm.analysis.study_runs.RUN_RECORD`."""
    from dna_mm.analysis.study_runs import (
        RUN_RECORD,
        attempts_seconds,
        begin_attempt,
        end_attempt,
        trained_with,
    )
    from dna_mm.family import method_attention
    from dna_mm.utils.files import write_json_atomic
    from dna_mm.utils.tool_runs import demo_options, shipped_config, train_then_test

    run_dir = out / 'runs' / f'{method}_seed{seed}'
    run_dir.mkdir(parents=True, exist_ok=True)
    test_file = run_dir / 'test.json'
    if test_file.is_file():
        test = json.loads(test_file.read_text())
    else:
        record = begin_attempt(run_dir, training_settings(args))
        write_json_atomic(run_dir / RUN_RECORD, record)
        member, settings = method_attention(method)
        opts = demo_options(member, str(data_root), args.epochs, args.imports) + args.run_options
        config = shipped_config(CONFIG, home())
        if settings:  # the member's config with its settings: a config of this run's own
            config = str(run_config(run_dir, member, settings))
            opts = [o for o in opts if not o.startswith('model.backbone.attn_cfg=')]
        resume = resumed_from(run_dir)
        if resume is not None:
            print(f'{run_dir.name}: resuming the stopped run from {resume}', flush=True)
        try:
            metrics, _ = train_then_test(
                config,
                str(run_dir),
                opts,
                str(run_dir / 'predictions.csv'),
                home(),
                'study',
                seed,
                resume is not None,
            )
        finally:  # this attempt's end, also of one stopped (Ctrl-C) or failed
            write_json_atomic(run_dir / RUN_RECORD, end_attempt(record))
        ckpt = (run_dir / 'last_checkpoint').read_text().strip()
        test = dict(
            **test_numbers(metrics), seconds=attempts_seconds(record), checkpoint=ckpt, **record['settings']
        )
        write_json_atomic(test_file, test)
    trained = trained_with(test) or training_settings(args)
    return evaluated(args, method, seed, run_dir, test, trained, sets)


def evaluated(
    args, method: str, seed: int, run_dir: Path, test: dict, trained: dict, sets: list[ClipSet]
) -> dict:
    """The run's model (``test['checkpoint']``) evaluated on ``sets``: its ``result.json``
    (written), with the settings it was ``trained`` with and this study's held-out options."""
    from dna_mm.analysis.study import evaluate
    from dna_mm.utils.files import write_json_atomic

    start = time.time()
    config = str(run_dir / Path(CONFIG).name)  # the config as the run used it (mmengine's dump)
    result = dict(
        method=method,
        seed=seed,
        **trained,
        distractors=list(args.distractors),
        likeness=list(args.likeness),
        heldout_per_class=args.heldout_per_class,
        test=dict(top1=test['top1'], mca=test['mca'], line=test['line']),
        train_test_seconds=test['seconds'],
        eval_seconds=None,
        checkpoint=test['checkpoint'],
        sets=evaluate(config, test['checkpoint'], sets, args.batch_size, args.device),
    )
    result['eval_seconds'] = time.time() - start
    write_json_atomic(run_dir / 'result.json', result)
    return result


def check_kept(args: argparse.Namespace, out: Path, plan: list[tuple[str, int]]) -> None:
    """Before any work: every run this study would keep (``result.json``), or continue (a run
    stopped half-way, or trained but not evaluated), was trained as this study trains its runs
    (:func:`training_settings`), else a :class:`~dna_mm.errors.ConfigError` naming the setting,
    both values and what to do (:mod:`dna_mm.analysis.study_runs`); a run that does not record a
    setting is refused as unknown. Under ``--report-only`` (whose options do not say how the runs
    were made) the finished runs must agree with each other, in training and in the held-out sets
    they were evaluated on."""
    from dna_mm.analysis.study_runs import (
        check_together,
        made_with,
        training_mismatch,
        training_refusal,
        unrecorded_refusal,
    )
    from dna_mm.errors import ConfigError

    wanted = None if args.report_only else training_settings(args)
    first: Optional[tuple[Path, dict]] = None
    for method, seed in plan:
        run_dir = out / 'runs' / f'{method}_seed{seed}'
        found = made_with(run_dir, finished_only=args.report_only)
        if found is None:
            begun = (run_dir / 'test.json').is_file() or resumed_from(run_dir) is not None
            if not args.report_only and begun:
                raise ConfigError(unrecorded_refusal(run_dir))
            continue
        if wanted is not None:
            mismatch = training_mismatch(found[1], wanted, runs_config())
            if mismatch:
                raise ConfigError(
                    training_refusal(found[0], mismatch, out / 'runs', runs_config(), args.epochs is not None)
                )
        elif first is None:
            first = found
        else:
            check_together(first, found, out / 'runs', runs_config())


def kept(args, done: Path, sets: list[ClipSet], signature: set) -> tuple[dict, str]:
    """A finished run (``result.json``; its training checked by :func:`check_kept`) and how it
    was kept: as it is, or, evaluated on other held-out sets than this study's, its checkpoint
    (:func:`~dna_mm.analysis.study_runs.kept_checkpoint`) evaluated on them (exact: the
    evaluation of a new run)."""
    from dna_mm.analysis.study_runs import kept_checkpoint, set_signature, show_sets, trained_with

    result = json.loads(done.read_text())
    ckpt = None if args.report_only else kept_checkpoint(done, signature, Path(CONFIG).name)
    if ckpt is None:
        return result, 'kept'
    test = dict(result['test'], seconds=result['train_test_seconds'], checkpoint=str(ckpt))
    before = show_sets(set_signature(result['sets']))
    result = evaluated(args, result['method'], result['seed'], done.parent, test, trained_with(result), sets)
    return result, f'kept, evaluated again on this study\'s held-out sets (it had {before})'


def _study_command(args, out: Path) -> str:
    """The command that ran the study: this one, or under ``--report-only`` the one that
    ``study.json`` already records (a report does not rename the study)."""
    command = 'python tools/analysis/study.py ' + ' '.join(sys.argv[1:])
    previous = out / 'study.json'
    if args.report_only and previous.is_file():
        return json.loads(previous.read_text())['summary'].get('command', command)
    return command


def report(args, results: list[dict], out: Path, wall: float) -> dict:
    """``study.json``, ``table.md`` and the figures from the finished runs; returns the summary."""
    from dna_mm.analysis.plots.study import method_label, plot_accuracy_vs_distractors, plot_target_mass
    from dna_mm.analysis.study import SCHEMA, markdown_table, summarize
    from dna_mm.synthetic.motion_clips import MotionDatasetSpec
    from dna_mm.utils.files import write_json_atomic, write_text_atomic

    summary = summarize(results, args.reference)
    summary['command'] = _study_command(args, out)
    summary['wall_seconds_this_invocation'] = wall
    summary['labels'] = labels = {m: method_label(m) for m in summary['methods']}
    table = markdown_table(summary, labels)
    write_text_atomic(out / 'table.md', table)
    write_json_atomic(out / 'study.json', dict(schema=SCHEMA, summary=summary, runs=results))
    print('\n' + table)
    figures = [
        plot_accuracy_vs_distractors(
            summary, str(out / 'accuracy_vs_distractors.png'), MotionDatasetSpec().num_distractors
        ),
        plot_target_mass(summary, str(out / 'target_mass.png'), 'demo_test'),
    ]
    for path in figures:
        if path:
            print(f'wrote {path}')
    print(f'wrote {out / "study.json"} and {out / "table.md"}')
    return summary


def study(args: argparse.Namespace) -> dict:
    """The study of ``args`` (:func:`parse_args`): its runs trained, kept or evaluated again, seed
    by seed, then reported; returns the summary (:func:`report`)."""
    from dna_mm.analysis.study_runs import clip_signature, kept_checkpoint
    from dna_mm.errors import ConfigError

    check_args(args)
    t0 = time.time()
    out = _absolute(args.out)
    if args.report_only and not (out / 'runs').is_dir():
        raise ConfigError(f'--out {out}: no study there (no runs/ folder) for --report-only to summarise')
    out.mkdir(parents=True, exist_ok=True)
    data_root = _absolute(args.data_root)
    print(f'study: {", ".join(args.methods)} × {args.seeds} seeds → {out}', flush=True)
    plan = [(m, s) for s in range(args.seeds) for m in args.methods]
    check_kept(args, out, plan)  # before any work: no run made otherwise kept or continued
    sets = [] if args.report_only else clip_sets(args, data_root)
    if sets:
        print(f'clip sets: {", ".join(f"{s.name} ({s.root})" for s in sets)}', flush=True)
    signature = clip_signature(sets)
    for method, seed in [] if args.report_only else plan:  # every kept run evaluable on them
        done = out / 'runs' / f'{method}_seed{seed}' / 'result.json'
        if done.is_file():
            kept_checkpoint(done, signature, Path(CONFIG).name)
    results, spent = [], []
    for k, (method, seed) in enumerate(plan, 1):
        done = out / 'runs' / f'{method}_seed{seed}' / 'result.json'
        if done.is_file():
            result, how = kept(args, done, sets, signature)
            results.append(result)
            print(f'[{k}/{len(plan)}] {method} seed {seed}: {how} ({done})', flush=True)
            continue
        if args.report_only:
            print(f'[{k}/{len(plan)}] {method} seed {seed}: not finished yet', flush=True)
            continue
        print(f'[{k}/{len(plan)}] {method} seed {seed}: training', flush=True)
        start = time.time()
        result = run_one(args, method, seed, data_root, sets, out)
        results.append(result)
        spent.append(time.time() - start)
        left = len(plan) - k
        eta = f', about {left * sum(spent) / len(spent) / 60:.0f} min left' if left else ''
        print(
            f'[{k}/{len(plan)}] {method} seed {seed}: top-1 {result["test"]["top1"]:.2f}% '
            f'({spent[-1]:.0f} s{eta})',
            flush=True,
        )
    if not results:
        raise ConfigError(f'{out}: no finished run to report')
    summary = report(args, results, out, time.time() - t0)
    print(f'study: {time.time() - t0:.0f} s this time, {summary["seconds"]:.0f} s of runs in all')
    return summary


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('study.py', study, args)


if __name__ == '__main__':
    main()
