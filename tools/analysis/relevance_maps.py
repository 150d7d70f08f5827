#!/usr/bin/env python
"""Chefer relevance maps of images or videos, per attention branch (orange: positive, blue: negative).

    python tools/analysis/relevance_maps.py CONFIG CHECKPOINT --input IMAGE_OR_VIDEO [...] --out DIR
        [--target CLASS] [--label NAME] [--label-map FILE] [--cfg-options k=v ...]

CONFIG is an MMAction2 recognizer config (``--input`` videos, read by the config's test
pipeline; one row of overlays per branch, one column per sampled frame, titled with its index in
the source video), an MMPretrain image classifier config (``configs/imagenet/``: ``--input``
images, read by its test pipeline) or ``timm:<model>`` (``--input`` images; ``--cfg-options``
are ``create_model`` arguments). The gradients are those of the class ``--target`` (default: the
prediction); classes are named from ``--label-map`` or the config's ``label_map``, the model by
``--label``, else by its attention (``softmax``, ``Diff``, ``DnA (A±)``; the config's name where
its members are mixed). Each branch's map is min–max normalised over the whole clip. Writes, per
input, ``DIR/<input name>_relevance`` ``.png`` (the figure), ``.json`` (the model's label, class,
score, branches, frame indices; the input, config, checkpoint and outputs by absolute paths)
and ``.npz`` (the normalised maps ``[T, H, W]`` per branch); a progress bar with the ETA runs
over the inputs. An input that cannot be decoded is named with the reason and
skipped (exit status 1 at the end). The rule, and how it runs through divided space-time
attention: ``dna_mm/analysis/relevance.py``.
"""

from __future__ import annotations

import argparse
import os.path as osp
import sys
import time

NOTE = (
    'Chefer et al. (ICCV 2021) relevance of the explained class, propagated through each branch '
    'on its own; each row min–max normalised over all {what} (0: least, 1: most relevant patch of '
    'that branch; rows are not on a common absolute scale). White contour: relevance 0.5.'
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config', help='MMAction2 recognizer / MMPretrain classifier config, or timm:<model name>')
    p.add_argument('checkpoint', help='whole-model checkpoint')
    p.add_argument(
        '--input', nargs='+', required=True, help='videos (recognizer) or images (classifier, timm:)'
    )
    p.add_argument('--out', required=True, help='output directory')
    p.add_argument('--target', type=int, default=None, help='class to explain (default: predicted)')
    p.add_argument(
        '--label',
        default=None,
        help="model name in the figure title (default: its attention's, e.g. softmax, DnA (A±))",
    )
    p.add_argument(
        '--label-map', default=None, help="class names, one a line (default: the config's label_map)"
    )
    p.add_argument('--cfg-options', nargs='+', metavar='KEY=VALUE', default=None)
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    return p.parse_args(argv)


def _context(args: argparse.Namespace, num_classes: int):
    """(class names or None, the test pipeline or None) of an OpenMMLab config."""
    if args.config.startswith('timm:'):
        names = None
        if args.label_map:
            from dna_mm.apis.inference import read_label_map

            names = read_label_map(args.label_map)
        return names, None
    from dna_mm.apis.inference import resolve_class_names
    from dna_mm.config.build import read_config

    cfg = read_config(args.config, args.cfg_options)
    pipeline = cfg.test_dataloader.dataset.pipeline if cfg.get('test_dataloader') else None
    try:
        names = resolve_class_names(cfg, num_classes, args.label_map)
    except FileNotFoundError as err:
        if args.label_map:
            raise
        print(f"note: the config's label_map: {err}; classes shown by index", file=sys.stderr)
        names = None
    return names, pipeline


def explain(am, path: str, inputs, args: argparse.Namespace, names, pipeline) -> dict:
    """Relevance of one loaded input: the figure, .json and .npz; returns the summary."""
    import numpy as np

    from dna_mm.analysis.plots import plot_relevance
    from dna_mm.analysis.relevance import relevance_maps, source_frame_indices
    from dna_mm.utils.files import recorded_path, write_json_atomic

    rel = relevance_maps(am, inputs, args.target)
    stem = osp.join(args.out, osp.splitext(osp.basename(path))[0] + '_relevance')
    pixels = am.raw_pixels(inputs)[0]
    frames = (
        pixels[0].permute(1, 2, 3, 0)
        if pixels.dim() == 5  # [clips, C, T, H, W] -> [T, H, W, C]
        else pixels.permute(1, 2, 0)[None]
    )  # [C, H, W] -> [1, H, W, C]
    indices = source_frame_indices(pipeline, path) if pipeline is not None else None
    name = names[rel.target] if names and rel.target < len(names) else None
    cls = f"'{name}' (class {rel.target})" if name else f'class {rel.target}'
    why = 'the prediction' if args.target is None else '--target'
    model = args.label or am.label  # default: its attention's (DnA (A±), softmax), as analyze_attention.py
    title = f'{model}: relevance for {cls}, p = {rel.probability:.2f} ({why}) — {osp.basename(path)}'
    what = 'frames of the clip' if frames.shape[0] > 1 else 'pixels'
    maps = {k: v.numpy() for k, v in rel.maps.items()}
    png = plot_relevance(frames.numpy(), maps, stem + '.png', title, indices, NOTE.format(what=what))
    np.savez_compressed(stem + '.npz', **maps)
    summary = dict(  # the files by absolute paths: a reader in any folder finds them
        input=recorded_path(path),
        config=recorded_path(args.config),
        checkpoint=recorded_path(args.checkpoint),
        model=model,
        target=rel.target,
        class_name=name,
        score=rel.score,
        probability=rel.probability,
        branches=list(rel.maps),
        shape=list(next(iter(rel.maps.values())).shape),
        frame_indices=indices,
        normalisation='min-max per branch over the whole input',
        png=recorded_path(png),
        npz=recorded_path(stem + '.npz'),
    )
    write_json_atomic(stem + '.json', summary)
    return summary


def explain_inputs(args: argparse.Namespace) -> list[dict]:
    from mmengine.utils import ProgressBar

    from dna_mm.analysis.models import check_input, load_model, out_folder

    out_folder(args.out, make=False)
    for path in args.input:  # every input, before the model is loaded
        check_input(args.config, path)
    start = time.time()
    am = load_model(args.config, args.checkpoint, args.cfg_options)
    for path in args.input:  # of the kind the model reads, before the first is explained
        check_input(args.config, path, am.input_kind)
    for note in am.notes:
        print(f'note: {note}', flush=True)
    head = getattr(am.model, 'cls_head', None) or getattr(am.model, 'head', None)  # MMAction2, MMPretrain
    num_classes = getattr(head, 'num_classes', None) or getattr(am.model, 'num_classes', 0)
    names, pipeline = _context(args, num_classes)
    out_folder(args.out)
    print(
        f'model loaded ({time.time() - start:.0f} s); writing {len(args.input)} figure(s) to {args.out}/',
        flush=True,
    )
    bar = ProgressBar(len(args.input), file=sys.stderr) if len(args.input) > 1 else None
    summaries, failed = [], []
    for path in args.input:
        try:
            inputs = am.load_input(path)
        except Exception as err:  # noqa: BLE001  (decord / pipeline errors: report, go on)
            failed.append(path)
            print(f'{path}\n  cannot be read: {type(err).__name__}: {err}', file=sys.stderr, flush=True)
        else:
            summaries.append(explain(am, path, inputs, args, names, pipeline))
        if bar is not None:
            bar.update()
    if bar is not None:
        sys.stderr.write('\n')
    for s in summaries:
        cls = f"{s['target']} ({s['class_name']})" if s['class_name'] else str(s['target'])
        print(
            f"{osp.basename(s['input'])}: class {cls}, p = {s['probability']:.3f}; "
            f"branches {', '.join(s['branches'])}"
        )
        print(f"  wrote {s['png']} (+ .json, .npz)")
    if failed:
        print(f'{len(failed)} of {len(args.input)} inputs could not be read', file=sys.stderr)
        sys.exit(1)
    return summaries


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    from dna_mm.tools.cli import run_tool

    return run_tool('relevance_maps.py', explain_inputs, args)


if __name__ == '__main__':
    main()
