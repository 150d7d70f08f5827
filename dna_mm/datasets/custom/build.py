"""``tools/data/build_custom_dataset.py``: a user's videos to lists, label map and config in one
command (docs/datasets/custom.md).

    SRC --(read_source)--> classes + samples --(check_videos: once, resumable)--> readable
        --(stratified_split)--> OUT/{train,val,test}.txt, OUT/classes.txt
        --(size_recipe, config_text)--> OUT/config.py

Unreadable videos (file and reason) are printed and listed in ``OUT/unreadable.txt``, left out
of the lists, and the build goes on; a class left without a readable video is an error naming
it. The answers of the video check are kept in ``OUT/video_check.jsonl``: a second run checks
only new or changed files.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional

from mmengine.config import Config

from ...apis.cli import DEBUG_HELP, cli_main
from ...errors import DataError
from ..preparation.runner import SHOW, default_workers
from .recipe import base_reference, config_text, dataset_type, initialisation, size_recipe
from .source import SPLITS, Sample, read_source, stratified_split
from .videos import check_videos

#: the documented path of the Kinetics-400 DnA TimeSformer (docs/checkpoints.md)
K400_DNA_CHECKPOINT = 'checkpoints/timesformer_dna_k400.pth'


def _ratio(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f'expected a ratio in [0, 1), got {text}')
    return value


def parse_args(argv: Optional[list[str]], default_base: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description='Lists, label map and a fine-tuning config for your own videos (docs/datasets/custom.md)'
    )
    p.add_argument('src', help='a folder of class folders of videos, or a path,label list (.csv / .txt)')
    p.add_argument('--out', required=True, help='folder for train/val/test.txt, classes.txt, config.py')
    p.add_argument('--base', default=default_base, help=f'config to inherit (default {default_base})')
    p.add_argument(
        '--load-from',
        default='auto',
        help=f'initial weights: a checkpoint, none (from scratch), or auto (default: {K400_DNA_CHECKPOINT} '
        "for a DnATimeSformer base, else the base's own)",
    )
    p.add_argument('--val-ratio', type=_ratio, default=0.2, help='share of each class for val.txt (0.2)')
    p.add_argument('--test-ratio', type=_ratio, default=0.0, help='share of each class for test.txt (0)')
    p.add_argument('--seed', type=int, default=0, help='seed of the split (0)')
    p.add_argument('--workers', type=int, default=default_workers(), help='processes checking videos')
    p.add_argument('--debug', action='store_true', help=DEBUG_HELP)
    args = p.parse_args(argv)
    if args.val_ratio + args.test_ratio >= 1:
        p.error(f'--val-ratio + --test-ratio must be < 1, got {args.val_ratio + args.test_ratio}')
    if args.workers < 1:
        p.error(f'--workers must be >= 1, got {args.workers}')
    return args


def load_base(base: str, repo_configs: Path) -> tuple[str, Config]:
    """``(path or zoo name, config)`` of ``--base``: a file, a name under ``configs/``, or a zoo
    config (``mmaction::...``)."""
    if '::' in base:
        from mmengine.hub import get_config

        return base, get_config(base)
    for candidate in (Path(base), repo_configs / base):
        if candidate.is_file():
            return str(candidate), Config.fromfile(str(candidate))
    raise FileNotFoundError(
        f'--base {base}: no such config (a file, a name under {repo_configs}, or mmaction::...)'
    )


def _absolute(source_root: Path, sample: Sample) -> str:
    return str(source_root / sample.path)


def write_outputs(
    out: Path, classes: list[str], splits: dict[str, list[Sample]], unreadable: dict[str, str]
) -> None:
    """The lists (``path label``, paths relative to the video root), ``classes.txt`` and
    ``unreadable.txt`` (removed when empty); lists of splits not written this time are removed."""
    out.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        target = out / f'{split}.txt'
        if split in splits:
            target.write_text(''.join(f'{s.path} {s.label}\n' for s in splits[split]), encoding='utf-8')
        else:
            target.unlink(missing_ok=True)
    (out / 'classes.txt').write_text(''.join(f'{name}\n' for name in classes), encoding='utf-8')
    listed = out / 'unreadable.txt'
    if unreadable:
        listed.write_text(''.join(f'{p}\t{why}\n' for p, why in sorted(unreadable.items())), encoding='utf-8')
    else:
        listed.unlink(missing_ok=True)


@cli_main('build_custom_dataset.py')
def build_cli(argv: Optional[list[str]], default_base: str, repo_configs: Path) -> int:
    """Read, check, split, write (see the module docstring); exit status 0."""
    args = parse_args(argv, default_base)
    out = Path(args.out)
    base_path, base = load_base(args.base, repo_configs)
    dataset_type(base)
    source = read_source(args.src, skip=str(out))
    for note in source.notes:
        print(f'note: {note}')
    print(f'{args.src}: {len(source.classes)} classes, {len(source.samples)} videos')
    for name in source.classes:
        if name != name.strip() or any(c in name for c in '\n\r\t'):
            raise DataError(f'class name {name!r}: leading / trailing blanks or a line break; rename it')
    problems, reused = check_videos(
        [_absolute(source.root, s) for s in source.samples], out / 'video_check.jsonl', args.workers
    )
    unreadable = {p: why for p, why in problems.items() if why is not None}
    print(f'checked {len(problems)} videos ({reused} from the last run): {len(unreadable)} unreadable')
    for path, why in sorted(unreadable.items())[:SHOW]:
        print(f'  {path}: {why}')
    if len(unreadable) > SHOW:
        print(f'  ... ({len(unreadable) - SHOW} more in {out / "unreadable.txt"})')
    readable = [s for s in source.samples if _absolute(source.root, s) not in unreadable]
    empty = sorted(set(range(len(source.classes))) - {s.label for s in readable})
    if empty:
        names = ', '.join(repr(source.classes[i]) for i in empty)
        raise DataError(f'class {names}: no readable video left (see the unreadable videos above)')
    splits, notes = stratified_split(readable, args.val_ratio, args.test_ratio, args.seed, source.classes)
    for note in notes:
        print(f'note: {note}')
    if 'train' not in splits:
        raise DataError(f'{args.src}: no training video (a train split was given without videos?)')
    load_from = args.load_from
    dna_base = ((base.get('model') or {}).get('backbone') or {}).get('type') == 'DnATimeSformer'
    if load_from == 'auto':
        load_from = K400_DNA_CHECKPOINT if dna_base else None
    if load_from not in (None, 'none') and '://' not in load_from and not os.path.isfile(load_from):
        print(f'note: {load_from} does not exist yet; put the checkpoint there before training')
    recipe = size_recipe(base, len(splits['train']))
    backbone, init_note = initialisation(base, load_from)
    write_outputs(out, source.classes, splits, unreadable)
    text = config_text(
        base_reference(base_path),
        out,
        source.root,
        source.classes,
        {s: len(v) for s, v in splits.items()},
        recipe,
        backbone,
        init_note,
        str(Path(args.src).resolve()),
    )
    (out / 'config.py').write_text(text, encoding='utf-8')
    Config.fromfile(str(out / 'config.py'))  # it parses
    for split, items in splits.items():
        per_class = [sum(s.label == i for s in items) for i in range(len(source.classes))]
        print(f'{split:5s}: {len(items):6d} videos, per class {min(per_class)}-{max(per_class)}')
    print(recipe.describe(len(splits['train'])))
    print(f'initialisation: {init_note}')
    print(f'wrote {out}/: {", ".join(f"{s}.txt" for s in splits)}, classes.txt, config.py')
    print(f'next: python tools/train.py {out / "config.py"}')
    return 0
