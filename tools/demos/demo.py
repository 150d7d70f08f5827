#!/usr/bin/env python
"""The embedded default: generate the synthetic motion set (once), train, test, report.

    python tools/demos/demo.py                       # TimeSformer-DnA
    python tools/demos/demo.py --attn dna softmax    # DnA and the softmax baseline, same data
    python tools/demos/demo.py --attn relu dna --import docs/attention/relu_attention.py

``--attn`` takes any registered attention member, by short name (``softmax``, ``dna``, ``diff``,
``cog``) or registered type (``DnAAttention``), ``NAME:VARIANT`` for one of DnA's variants
(``dna:apm``, or the paper's name: ``dna:A±``, ``A±``) and ``NAME+gated`` for that member with
the gate of gated attention (``dna+gated``: ``gated=True``), as the study's ``--methods`` take them;
``--import`` imports a member of your own first (a module on the Python path, or a ``.py``
file), and the runs import it too. ``--cfg-options`` set keys of the member's config too
(``model.backbone.attn_cfg.variant=apm``).

Each run goes through ``tools/train.py`` and ``tools/test.py`` with
``configs/timesformer_dna_demo.py`` (the commands are printed, their progress lines shown as
they come, the log file named), so what the demo shows is exactly what a user runs on a real
dataset. From a checkout the data and the runs go under the checkout (``data/demo``,
``work_dirs/demo``), from wherever it is run; from an installed dna_mm (``dna_mm demo``) under
the current folder, with the installed tools (``python -m dna_mm.tools train
dna_mm::timesformer_dna_demo.py ...``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout, or an installed dna_mm's .mim folder
CONFIG = 'configs/timesformer_dna_demo.py'
#: ``dna_mm.tools.cli.IMPORT_HELP`` (a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--attn',
        nargs='+',
        default=['dna'],
        metavar='NAME',
        help='attention(s) to train and test (temporal and spatial): any registered member, by short '
        'name or registered type; NAME:VARIANT (dna:apm), NAME+gated (dna+gated): that member so '
        'set, as the study takes them',
    )
    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
    p.add_argument('--data-root', default='data/demo')
    p.add_argument('--work-dir', default='work_dirs/demo')
    p.add_argument(
        '--epochs',
        type=int,
        default=None,
        help='override the config\'s epochs, at least 1 (the cosine schedule, validation and '
        'checkpoint intervals follow)',
    )
    p.add_argument(
        '--cfg-options',
        dest='run_options',
        nargs='+',
        default=[],
        metavar='KEY=VALUE',
        help="settings of every run's config, after the demo's own (tools/train.py and tools/test.py "
        'take them as written)',
    )
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def demo(args: argparse.Namespace) -> dict:
    """Each ``--attn`` trained and tested on the demo set: ``{attn: (metrics, seconds)}``. A
    member or a count the demo cannot take is one line before any work."""
    from dna_mm.config import format_metrics
    from dna_mm.synthetic.motion_clips import CLASSES, ensure_motion_dataset
    from dna_mm.tools.cli import known_methods
    from dna_mm.utils.tool_runs import at_least, demo_options, runs_home, shipped_config, train_then_test

    methods = known_methods('--attn', args.attn)  # {canonical name: its member, settings}, each model once
    at_least({'--epochs': args.epochs})
    t0 = time.time()
    home = runs_home(REPO)  # the runs' commands run here (config-relative paths)
    config = shipped_config(CONFIG, home)
    root = ensure_motion_dataset(home / args.data_root)
    print(f'demo data: {root} ({len(CLASSES)} classes, chance = {100 / len(CLASSES):.0f}%)')
    results = {}
    for method, known in methods.items():
        attn, work_dir = known.given, f'{args.work_dir}/{method}'  # A± in dna:apm
        # the clips by their absolute path: the config the run saves reads them from any folder
        opts = demo_options(known.member, str(root), args.epochs, args.imports, known.settings)
        opts += args.run_options
        metrics, secs = train_then_test(config, work_dir, opts, f'{work_dir}/predictions.csv', home)
        results[attn] = (metrics, secs)
        print(f'[{attn}] {format_metrics(metrics)}  ({secs:.0f} s)', flush=True)
    print('\nSummary (synthetic motion set, test split):')
    for attn, (metrics, secs) in results.items():
        top1, mca = (f'{100 * metrics[k]:.2f}' if k in metrics else '?' for k in ('acc/top1', 'acc/mean1'))
        print(f'  {attn:8s} top-1 {top1:>6s}%   mCA {mca:>6s}%   ({secs:.0f} s train + test)')
    print(f'total {time.time() - t0:.0f} s')
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('demo.py', demo, args)


if __name__ == '__main__':
    main()
