#!/usr/bin/env python
"""The paper's attention analyses on a checkpoint: JSON + one PNG per analysis.

    python tools/analysis/analyze_attention.py CONFIG CHECKPOINT --out DIR
        [--analyses alpha entropy redundancy cvv intruders robustness] [--num-samples N]
        [--label NAME] [--compare LABEL CONFIG CHECKPOINT ...] [--cfg-options k=v ...]
        [--input-dir IMAGES] [--split test|val] [--batch-size B] [--top-k-percent 10]
        [--intruder-k 10] [--intruder-eps 0.5] [--sigmas 0.1 0.5 1.0]
        [--noise-space normalized|pixel] [--center feature|token|none] [--with-coefficient]

CONFIG is an OpenMMLab config (TimeSformer recognizers, MMPretrain image classifiers such as
``configs/imagenet/``, ViTDet backbones: samples from its ``test_dataloader``) or ``timm:<model>``
(e.g. ``timm:dna_vit_tiny_patch16_224``: ``--cfg-options`` are then ``create_model`` arguments and
``--input-dir`` an image folder). ``--compare`` adds runs drawn into the same figures (e.g. DnA vs
softmax vs Diff); every run's model is loaded before the first is analysed, and a run that fails
leaves the runs before it written. A softmax baseline on timm's own attention is analysed through
dna_mm's softmax attention with the same weights; a figure of a quantity a run lacks (α, a
second branch) leaves that run out. A run is named by ``--label`` / its ``--compare LABEL``, which
must differ; without one, by its attention (``softmax``, ``Diff``, ``DnA (A±)``: the config's name
where its members are mixed), and two runs of one such name get their config's, work dir's or
checkpoint's name added: ``softmax (softmax_a)``. Writes ``DIR/analysis.json``
(``{"schema", "runs": [report, ...]}``, the report layout is in ``dna_mm/analysis/report.py``)
and ``DIR/<analysis>.png`` (the figures are described in ``docs/analysis.md``); a progress bar with
the ETA runs over each run's samples (stderr). The definitions are in ``dna_mm/analysis/measures.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os.path as osp
import time
from collections import Counter

#: ``dna_mm.analysis.report.ANALYSES`` (a test keeps them equal)
ANALYSES = ('alpha', 'entropy', 'redundancy', 'cvv', 'intruders', 'robustness')


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config', help='OpenMMLab config file, or timm:<model name>')
    p.add_argument('checkpoint', help='whole-model checkpoint')
    p.add_argument('--out', required=True, help='output directory (JSON + PNGs)')
    p.add_argument('--analyses', nargs='+', default=list(ANALYSES), choices=ANALYSES)
    p.add_argument('--num-samples', type=int, default=None, help='samples to analyse (default: all)')
    p.add_argument(
        '--label',
        default=None,
        help="name of this run in the figures (default: its attention's, e.g. softmax, DnA (A±))",
    )
    p.add_argument(
        '--compare',
        nargs=3,
        action='append',
        default=[],
        metavar=('LABEL', 'CONFIG', 'CHECKPOINT'),
        help='another run for the same figures',
    )
    p.add_argument(
        '--cfg-options',
        nargs='+',
        metavar='KEY=VALUE',
        default=None,
        help='config overrides (every run), or create_model arguments for timm:',
    )
    p.add_argument('--input-dir', help='image folder (timm: models)')
    p.add_argument('--split', choices=['test', 'val'], default='test')
    p.add_argument('--batch-size', type=int, default=None)
    p.add_argument('--top-k-percent', type=float, default=10.0, help='k of the top-k %% entropy')
    p.add_argument('--intruder-k', type=int, default=10)
    p.add_argument('--intruder-eps', type=float, default=0.5, help='cos(pi/3) = 0.5 in the paper')
    p.add_argument(
        '--with-coefficient',
        action='store_true',
        help='branch cosine with the second branch times its coefficient (DnA α, Diff -λ)',
    )
    p.add_argument(
        '--sigmas',
        nargs='+',
        type=float,
        default=[0.1, 0.5, 1.0],
        help='Gaussian noise levels of the robustness analysis',
    )
    p.add_argument('--noise-space', choices=['normalized', 'pixel'], default='normalized')
    p.add_argument('--center', choices=['feature', 'token', 'none'], default='feature')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    for name in ('num_samples', 'batch_size', 'intruder_k'):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f'--{name.replace("_", "-")} must be >= 1, got {value}')
    bad = [s for s in args.sigmas if not (math.isfinite(s) and s > 0)]
    if bad:  # σ = 0 is the clean pass, always run
        p.error(f'--sigmas must be noise levels > 0 (the clean pass is always run), got {bad[0]:g}')
    return args


def describe(rep: dict) -> str:
    """One line of headline numbers."""
    parts = [f"[{rep['label']}] {rep['num_samples']} samples"]
    if rep.get('accuracy') is not None:
        parts.append(f"top-1 {100 * rep['accuracy']:.1f}%")
    s = rep.get('summary') or {}
    if 'cvv' in s:
        parts.append(f"C(V+,V-) mean {s['cvv']['mean']:.3f} median {s['cvv']['median']:.3f}")
    if 'branch_cosine' in s:
        parts.append(f"branch cosine {s['branch_cosine']['mean']:.3f}")
    if 'intruders' in s:
        parts.append(f"intruders mean {s['intruders']['mean']:.2f} (mode {s['intruders']['mode']})")
    if rep.get('alpha'):
        means = [r['mean'] for r in rep['alpha']]
        parts.append(f'α mean {min(means):.3f}..{max(means):.3f} over layers')
    return '; '.join(parts)


def check_labels(args: argparse.Namespace) -> None:
    """The labels given (``--label``, each ``--compare LABEL``) name one run each; else a
    :class:`~dna_mm.errors.ConfigError` naming the label given twice."""
    from dna_mm.errors import ConfigError

    given = [label for label in [args.label, *(c[0] for c in args.compare)] if label]
    twice = [label for label, n in Counter(given).items() if n > 1]
    if twice:
        raise ConfigError(
            f'--label / --compare LABEL: the runs\' labels must differ, {twice[0]!r} is given to '
            f'{Counter(given)[twice[0]]} runs'
        )


#: what tells runs of one default label apart, tried in turn (a work dir of the demo saves its
#: config as timesformer_dna_demo.py whatever its attention: then the work dir, then the file)
RUN_TAGS = (
    lambda config, checkpoint: osp.splitext(osp.basename(config))[0],
    lambda config, checkpoint: osp.basename(osp.dirname(osp.abspath(checkpoint))),
    lambda config, checkpoint: osp.splitext(osp.basename(checkpoint))[0],
    lambda config, checkpoint: checkpoint,
)


def run_labels(given: list[str | None], runs: list[tuple[str, str]], defaults: list[str]) -> list[str]:
    """Each run's label: the one ``given``, else its model's default (``defaults``:
    ``AnalysisModel.label``, e.g. ``softmax``). A default that another run's label also is gets
    ``(TAG)`` added, TAG the first of :data:`RUN_TAGS` of its ``(config, checkpoint)`` that tells
    all of them apart (two softmax work dirs: ``softmax (softmax_a)``, ``softmax (softmax_b)``).
    One config and checkpoint compared with itself, unlabelled: a
    :class:`~dna_mm.errors.ConfigError`."""
    from dna_mm.errors import ConfigError

    labels = [label or default for label, default in zip(given, defaults, strict=True)]
    for label in dict.fromkeys(labels):
        clash = [i for i, x in enumerate(labels) if x == label]
        renamed = [i for i in clash if not given[i]]
        if len(clash) < 2 or not renamed:
            continue
        for tag in RUN_TAGS:
            new = {i: f'{label} ({tag(*runs[i])})' for i in renamed}
            if len({*new.values(), *(labels[i] for i in clash if given[i])}) == len(clash):
                break
        else:
            config, checkpoint = runs[renamed[-1]]
            raise ConfigError(
                f'--compare: {config} with {checkpoint} is given twice without a label; compare '
                f'different runs, or name each with --label / --compare LABEL'
            )
        for i, name in new.items():
            labels[i] = name
    twice = [label for label, n in Counter(labels).items() if n > 1]
    if twice:  # a tag that is another run's label: rare, named rather than guessed around
        raise ConfigError(f"--label / --compare LABEL: two runs would be labelled {twice[0]!r}; label them")
    return labels


def load_runs(args: argparse.Namespace) -> list[tuple[str, str, str, object]]:
    """``(label, config, checkpoint, AnalysisModel)`` of every run, each file checked and each
    model loaded before the first run is analysed (a checkpoint of another model is found at
    once, not after the runs before it); the labels told apart (:func:`run_labels`)."""
    from dna_mm.analysis.models import load_model
    from dna_mm.tools.cli import user_file

    check_labels(args)
    runs = [(args.label, args.config, args.checkpoint)] + [tuple(c) for c in args.compare]
    for _, config, checkpoint in runs:  # every run's files, before the first model is built
        if not config.startswith('timm:'):
            user_file(config, 'config')
        user_file(checkpoint, 'checkpoint')
    models = [
        load_model(config, checkpoint, args.cfg_options, args.input_dir, args.split, args.batch_size)
        for _, config, checkpoint in runs
    ]
    given = [label for label, _, _ in runs]
    labels = run_labels(given, [(c, k) for _, c, k in runs], [am.label for am in models])
    loaded = []
    for label, (_, config, checkpoint), am in zip(labels, runs, models, strict=True):
        for note in am.notes:
            print(f'[{label}] note: {note}', flush=True)
        loaded.append((label, config, checkpoint, am))
    return loaded


def write_results(reports: list[dict], args: argparse.Namespace) -> None:
    """``analysis.json`` and a figure per analysis of ``reports``; a figure leaves out the runs
    without its quantity (a softmax run in alpha.png) and says so."""
    from dna_mm.analysis.plots import PLOTTERS
    from dna_mm.analysis.plots.analyses import FIGURE_KEYS
    from dna_mm.analysis.report import SCHEMA

    out_json = osp.join(args.out, 'analysis.json')
    with open(out_json, 'w') as f:
        json.dump(dict(schema=SCHEMA, runs=reports), f, indent=1)
    print(f'wrote {out_json}')
    for name in args.analyses:
        path = PLOTTERS[name](reports, osp.join(args.out, f'{name}.png'))
        keys = FIGURE_KEYS.get(name, (name,))
        without = [rep['label'] for rep in reports if not any(rep.get(k) for k in keys)]
        if path is None:
            print(f'{name}: nothing to plot (no run has it)')
        elif without:
            print(f'wrote {path} (without {", ".join(without)}: no {name} to show)')
        else:
            print(f'wrote {path}')


def analyze_runs(args: argparse.Namespace) -> dict:
    from dna_mm.analysis.models import out_folder
    from dna_mm.analysis.report import SCHEMA, analyze
    from dna_mm.utils.files import recorded_path

    out_folder(args.out, make=False)  # a file named by --out: one line, before any model is loaded
    runs = load_runs(args)
    out_folder(args.out)
    print(
        f'writing {osp.join(args.out, "analysis.json")} and one PNG per analysis to {args.out}/', flush=True
    )
    names = ('analyses', 'num_samples', 'top_k_percent', 'intruder_k', 'intruder_eps', 'with_coefficient')
    options = {name: getattr(args, name) for name in (*names, 'sigmas', 'noise_space', 'seed')}
    options['center'] = None if args.center == 'none' else args.center
    reports: list[dict] = []
    try:
        while runs:
            label, config, checkpoint, am = runs.pop(0)  # each model freed once analysed
            start = time.time()
            print(f'[{label}] {config}: {", ".join(args.analyses)}', flush=True)
            rep = analyze(am, **options, label=label, progress=True)
            rep.update(config=recorded_path(config), checkpoint=recorded_path(checkpoint))  # any folder
            reports.append(rep)
            print(f'{describe(rep)}  ({time.time() - start:.0f} s)', flush=True)
    except BaseException:
        if reports:  # the runs analysed before the failure are kept
            done = ', '.join(rep['label'] for rep in reports)
            print(f'a run failed: writing the {len(reports)} run(s) analysed before it ({done})', flush=True)
            try:
                write_results(reports, args)
            except Exception as err:  # noqa: BLE001  (the run's own error is the one to report)
                print(f'writing them failed too: {type(err).__name__}: {err}', flush=True)
        raise
    write_results(reports, args)
    return dict(schema=SCHEMA, runs=reports)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('analyze_attention.py', analyze_runs, args)


if __name__ == '__main__':
    main()
