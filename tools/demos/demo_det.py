#!/usr/bin/env python
"""The detection demo: generate the synthetic shapes set (once), train a tiny ViTDet-DnA Mask
R-CNN on it, test it, report COCO bbox and segm AP.

    python tools/demos/demo_det.py                        # ViTDet-DnA (make demo-det)
    python tools/demos/demo_det.py --attn dna softmax     # and the softmax baseline, same data
    python tools/demos/demo_det.py --baseline             # also test the untrained model (AP floor)
    python tools/demos/demo_det.py --attn relu --import docs/attention/relu_attention.py
    python tools/demos/demo_det.py --attn dna dna:apm dna+gated   # DnA's variants, with the gate

``--attn`` takes any registered attention member, by short name (``softmax``, ``dna``, ``diff``,
``cog``) or registered type (``DnAAttention``), ``NAME:VARIANT`` for one of DnA's variants
(``dna:apm``, or the paper's name: ``dna:A±``, ``A±``) and ``NAME+gated`` for that member with
the gate of gated attention (``gated=True``), as the video demo and the study take them;
``--import`` imports a member of your own first (a module on the Python path, or a ``.py``
file), and the runs import it too. A member that takes no position bias
(``takes_position_bias = False``: Diff, Cog) runs without ViTDet's relative positions.

Each run goes through ``tools/train.py`` and ``tools/test.py`` with
``configs/vitdet_dna_demo.py`` (the commands are printed, their progress lines shown as they
come, the log file named), so what the demo shows is exactly what a user runs on COCO with
``configs/vitdet_*_coco*.py``. All AP figures are in % (COCO's -1 for a size range with no
object is shown as n/a). From a checkout the data and the runs go under the checkout
(``data/demo_coco``, ``work_dirs/demo_det``); from an installed dna_mm (``dna_mm demo_det``) under
the current folder.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout, or an installed dna_mm's .mim folder
CONFIG = 'configs/vitdet_dna_demo.py'
#: ``dna_mm.tools.cli.IMPORT_HELP`` (a test keeps them equal)
IMPORT_HELP = (
    'import these first: a module on the Python path (dotted name) or a .py file; what they '
    'register (an attention member of your own) can then be named'
)
#: the summary's columns: their names in the test line, their keys in the test's metrics (COCO)
METRICS = {'bbox AP': 'coco/bbox_mAP', 'bbox AP50': 'coco/bbox_mAP_50', 'segm AP': 'coco/segm_mAP'}
METRICS['segm AP50'] = 'coco/segm_mAP_50'


def untrained_checkpoint(path: Path, config: str, opts: list[str]) -> Path:
    """The demo model as initialised (seed 0), saved as a checkpoint tools/test.py reads."""
    import torch
    from mmengine.logging import MMLogger
    from mmengine.runner import set_random_seed

    from dna_mm.config.build import build_part, read_config
    from dna_mm.tools.cli import cfg_options

    cfg = read_config(config, cfg_options(opts))
    MMLogger.get_instance('demo_det_untrained', log_level='WARNING')  # no per-parameter init log
    set_random_seed(0)
    model = build_part(cfg)
    model.init_weights()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(dict(meta=dict(note='untrained demo model'), state_dict=model.state_dict()), path)
    return path


def summary(metrics: dict) -> str:
    """The summary's AP columns, in % (``?`` where COCO measured none)."""
    shown = {k: f'{100 * metrics[key]:.2f}' for k, key in METRICS.items() if metrics.get(key, -1) >= 0}
    return '  '.join(f'{k} {shown.get(k, "?"):>6s}' for k in METRICS)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        '--attn',
        nargs='+',
        default=['dna'],
        metavar='NAME',
        help='backbone attention(s) to train and test: any registered member, by short name or '
        'registered type; NAME:VARIANT (dna:apm), NAME+gated (dna+gated): that member so set',
    )
    p.add_argument('--import', dest='imports', nargs='+', default=[], metavar='MODULE', help=IMPORT_HELP)
    p.add_argument('--data-root', default='data/demo_coco')
    p.add_argument('--work-dir', default='work_dirs/demo_det')
    p.add_argument(
        '--iters',
        type=int,
        default=None,
        help="override the config's iterations, at least 1 (its schedule and intervals follow)",
    )
    p.add_argument(
        '--baseline',
        action='store_true',
        help='also test the untrained model (what AP a model that learned nothing gets)',
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
    """Each ``--attn`` trained and tested on the shapes set (and, with ``--baseline``, tested
    untrained): ``{name: (metrics, seconds)}``. A count, a member or an environment the demo
    cannot take is one line before any work."""
    from dna_mm.errors import UserError
    from dna_mm.utils.mmcv_ops import has_ops, missing_ops_line
    from dna_mm.utils.tool_runs import at_least

    at_least({'--iters': args.iters})
    if not has_ops():  # Mask R-CNN's RoI ops: one line before anything is built
        raise UserError(missing_ops_line('The detector demo (Mask R-CNN)'))
    from dna_mm.config import format_metrics
    from dna_mm.synthetic.coco_shapes import COCO_CLASSES, ensure_coco_dataset
    from dna_mm.tools.cli import known_methods
    from dna_mm.utils.tool_runs import (
        attention_options,
        import_options,
        read_test_metrics,
        run_script,
        runs_home,
        shipped_config,
        tool_args,
        train_then_test,
    )

    methods = known_methods('--attn', args.attn)  # {canonical name: its member, settings}, each model once
    t0 = time.time()
    home = runs_home(REPO)  # the runs' commands run here (config-relative paths)
    config = shipped_config(CONFIG, home)
    root = ensure_coco_dataset(home / args.data_root)
    print(f'demo data: {root} ({len(COCO_CLASSES)} classes: {", ".join(COCO_CLASSES)})', flush=True)
    data = f'{args.data_root}/'
    common = [f'{split}_dataloader.dataset.data_root={data}' for split in ('train', 'val', 'test')]
    common += [
        f'{split}_evaluator.ann_file={data}annotations/instances_test.json' for split in ('val', 'test')
    ]
    common += import_options(args.imports)
    results = {}
    for method, known in methods.items():
        attn, work_dir = known.given, f'{args.work_dir}/{method}'  # A± in dna:apm
        opts = common + attention_options(known.member, known.settings)
        if args.iters is not None:  # the schedule's end, cosine and the val / checkpoint intervals follow
            opts += [f'train_cfg.max_iters={args.iters}']
        if not known.cls.takes_position_bias:  # the member says (Diff, Cog: no rel-pos)
            opts += ['model.backbone.use_rel_pos=False']
        opts += args.run_options
        if args.baseline:
            path = config if '::' in config else str(home / config)  # dna_mm::NAME, or the checkout's
            ckpt = untrained_checkpoint(home / work_dir / 'untrained.pth', path, opts)
            test = [config, str(ckpt), '--work-dir', work_dir, '--cfg-options', *opts]
            run_script([*tool_args('test', home), *test], home, 'demo_det', work_dir)
            results[f'{attn} untrained'] = (read_test_metrics(home / work_dir), 0.0)
            print(f'[{attn} untrained] {format_metrics(results[f"{attn} untrained"][0])}', flush=True)
        metrics, secs = train_then_test(
            config, work_dir, opts, f'{work_dir}/predictions.pkl', home, 'demo_det'
        )
        results[f'{attn} trained'] = (metrics, secs)
        print(f'[{attn}] {format_metrics(metrics)}  ({secs:.0f} s)', flush=True)
    print('\nSummary (synthetic shapes set, test split, COCO AP in %):')
    for name, (metrics, secs) in results.items():
        timing = f'   ({secs:.0f} s train + test)' if secs else ''
        print(f'  {name:18s} {summary(metrics)}{timing}')
    print(f'total {time.time() - t0:.0f} s')
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('demo_det.py', demo, args)


if __name__ == '__main__':
    main()
