"""``tools/data/build_custom_dataset.py``: a user's videos to lists, label map and config in one
command (docs/datasets/custom.md).

    SRC --(read_source)--> classes + samples --(check_videos: once, resumable)--> readable
        --(stratified_split)--> OUT/{train,val,test}.txt, OUT/classes.txt
        --(size_recipe, initialisation, fit_sampling / check_steps, config_text)--> OUT/config.py

Each step is said with ``echo`` (the tool's ``print``). Unreadable videos (file and reason) are
said and listed in ``OUT/unreadable.txt``, left out of the lists, and the build goes on; a class
left without a readable video is an error naming it. The answers of the video check are kept
in ``OUT/video_check.jsonl``: a second run checks only new or changed files.
"""

from __future__ import annotations

import copy
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from mmengine.config import Config

from ...datasets.video_files import list_videos
from ...errors import DataError, UserError
from ...utils.files import not_an_input
from ...utils.mim_compat import read_package_config
from ..runner import SHOW, Echo
from .pipelines import SPLITS as PIPELINE_SPLITS
from .pipelines import check_steps, drop_flip, fit_sampling, rates_note, read_with_pyav, sample_by_seconds
from .recipe import base_reference, class_count, config_text, dataset_type, initialisation, merge, size_recipe
from .source import SPLITS, Sample, read_source, stratified_split
from .videos import check_videos

#: the documented path of the Kinetics-400 DnA TimeSformer (docs/checkpoints.md), relative to the
#: repository (the config gets it absolute)
K400_DNA_CHECKPOINT = 'checkpoints/timesformer_dna_k400.pth'
#: what a build writes in OUT, or removes there (the list of a split not written this time, an
#: empty ``unreadable.txt``)
OUTPUT_NAMES = (
    *(f'{s}.txt' for s in SPLITS),
    'classes.txt',
    'unreadable.txt',
    'config.py',
    'video_check.jsonl',
)


@dataclass
class BuildRequest:
    """What ``tools/data/build_custom_dataset.py`` asks for (its options, one to one)."""

    src: str
    out: str
    base: str
    load_from: str = 'auto'
    val_ratio: float = 0.2
    test_ratio: float = 0.0
    seed: int = 0
    workers: int = 1
    flip: bool = True
    sample_by_time: bool = False


def load_base(base: str, repo_configs: Path) -> tuple[str, Config]:
    """``(path or package name, config)`` of ``--base``: a file, a name under ``configs/``, or a
    ``package::path`` name (``dna_mm::…``, ``mmaction::…``: :func:`read_package_config`)."""
    if '::' in base:
        return base, read_package_config(base)
    for candidate in (Path(base), repo_configs / base):
        if candidate.is_file():
            return str(candidate), Config.fromfile(str(candidate))
    raise FileNotFoundError(
        f'--base {base}: no such config (a file, a name under {repo_configs}, dna_mm::… or mmaction::…)'
    )


def outputs(out: str) -> list[str]:
    """The files a build writes or removes in the folder ``out`` (:data:`OUTPUT_NAMES`): a tool
    refuses a ``--out`` where one of them is an input (the SRC list, the base config)."""
    return [str(Path(out) / name) for name in OUTPUT_NAMES]


def check_out(src: str, out: str) -> None:
    """Refuse, before any work, an ``out`` folder that holds videos of the source folder ``src``:
    ``src`` itself, a folder above it, one of its class folders. The build leaves out what lies
    under ``out`` (an earlier build's outputs inside ``src``), so those videos would not be read.
    A :class:`~dna_mm.errors.UserError` naming ``--out``; a list source, or an ``out`` inside
    ``src`` without videos (``src/lists``), is fine."""
    source, target = Path(src), Path(out)
    if not (source.is_dir() and target.is_dir()):
        return
    source, target = source.resolve(), target.resolve()
    hint = f'give a folder outside it (or a new one inside it, such as {Path(src) / "lists"})'
    where = 'is' if target == source else 'holds' if target in source.parents else None
    if where is not None:
        raise UserError(
            f'--out {out} {where} the source folder {src}: the build leaves out what lies under --out '
            f'(where it writes), so it would read no video; {hint}'
        )
    held = list_videos(Path(out)) if source in target.parents else []
    if held:
        raise UserError(
            f'--out {out} holds {len(held)} video(s) of the source folder {src} (e.g. {held[0]}), which '
            f'the build would leave out; {hint}'
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


def base_pipelines(base: Config) -> dict[str, list[dict]]:
    """A copy of the base's train / val / test pipelines (the loaders' datasets'), by split."""
    found = {}
    for split in PIPELINE_SPLITS:
        dataset = ((base.get(f'{split}_dataloader') or {}).get('dataset')) or {}
        dataset = dataset.get('dataset', dataset)  # a wrapper (RepeatDataset, ...) holds it
        if dataset.get('pipeline'):
            found[split] = [dict(step) for step in copy.deepcopy(dataset['pipeline'])]
    return found


def build_dataset(request: BuildRequest, repo: Path, echo: Echo) -> int:
    """Read, check, split, fit, write (see the module docstring), saying each step with
    ``echo``; ``repo``: the checkout, for the default base and checkpoint. Exit status 0. An
    ``out`` whose :func:`outputs` name an input (the SRC list, the base config, the checkpoint),
    or that holds source videos (:func:`check_out`), is refused first."""
    from mmaction.registry import TRANSFORMS
    from mmengine.registry import init_default_scope

    inputs = {
        'SRC list': request.src,
        '--base config': request.base,
        '--load-from checkpoint': request.load_from,
    }
    for path in outputs(request.out):  # written or removed: not one of the inputs, by any name or link
        not_an_input(path, f'--out {request.out}:', inputs)
    check_out(request.src, request.out)
    out = Path(request.out)
    base_path, base = load_base(request.base, repo / 'configs')
    if dataset_type(base) == 'RepeatAugDataset':
        echo('note: the base trains with repeated augmentation (RepeatAugDataset): this set trains without')
    source = read_source(request.src, skip=str(out))
    for note in source.notes:
        echo(f'note: {note}')
    echo(f'{request.src}: {len(source.classes)} classes, {len(source.samples)} videos')
    for name in source.classes:
        if name != name.strip() or any(c in name for c in '\n\r\t'):
            raise DataError(f'class name {name!r}: leading / trailing blanks or a line break; rename it')
    checks, reused = check_videos(
        [_absolute(source.root, s) for s in source.samples], out / 'video_check.jsonl', request.workers
    )
    unreadable = {p: c.problem for p, c in checks.items() if c.problem is not None}
    echo(f'checked {len(checks)} videos ({reused} from the last run): {len(unreadable)} unreadable')
    for path, why in sorted(unreadable.items())[:SHOW]:
        echo(f'  {path}: {why}')
    if len(unreadable) > SHOW:
        echo(f'  ... ({len(unreadable) - SHOW} more in {out / "unreadable.txt"})')
    readable = [s for s in source.samples if _absolute(source.root, s) not in unreadable]
    empty = sorted(set(range(len(source.classes))) - {s.label for s in readable})
    if empty:
        names = ', '.join(repr(source.classes[i]) for i in empty)
        raise DataError(f'class {names}: no readable video left (see the unreadable videos above)')
    splits, notes = stratified_split(
        readable, request.val_ratio, request.test_ratio, request.seed, source.classes
    )
    for note in notes:
        echo(f'note: {note}')
    if 'train' not in splits:
        raise DataError(f'{request.src}: no training video (a train split was given without videos?)')
    load_from = request.load_from
    dna_base = ((base.get('model') or {}).get('backbone') or {}).get('type') == 'DnATimeSformer'
    if load_from == 'auto':
        load_from = str(repo / K400_DNA_CHECKPOINT) if dna_base else None
    elif load_from != 'none' and '://' not in load_from:
        load_from = str(Path(load_from).resolve())
    if load_from not in (None, 'none') and '://' not in load_from and not os.path.isfile(load_from):
        echo(f'note: {load_from} does not exist yet; put the checkpoint there before training')
    recipe = size_recipe(base, len(splits['train']), from_scratch=load_from == 'none')
    model, init_note = initialisation(base, load_from)
    heads = {k: v for k, v in (base.get('model') or {}).items() if k != 'backbone'}  # a backbone's own
    model = merge(class_count(heads) or {}, model)  # num_classes (timm's 0: features) is its business
    pipelines = base_pipelines(base)
    sampling = fit_sampling(pipelines, [checks[_absolute(source.root, s)].frames for s in readable])
    rates = [f for f in (checks[_absolute(source.root, s)].fps for s in readable) if f]
    by_time = rates_note(rates, sampling, request.sample_by_time)
    if by_time and request.sample_by_time:
        sample_by_seconds(pipelines, sampling.frame_interval / min(rates))
    flips = 0 if request.flip else drop_flip(pipelines)
    to_pyav = read_with_pyav(pipelines)
    init_default_scope('mmaction')
    replaced = check_steps(pipelines, TRANSFORMS.build)
    write_outputs(out, source.classes, splits, unreadable)
    text = config_text(
        base_reference(base_path),
        out,
        source.root,
        source.classes,
        {s: len(v) for s, v in splits.items()},
        recipe,
        model,
        init_note,
        str(Path(request.src).resolve()),
        pipelines,
        clear_load_from=load_from is not None and bool(base.get('load_from')),
        repeat_collate=(base.train_dataloader.get('collate_fn') or {}).get('type') == 'repeat_pseudo_collate',
        auto_amp=base.optim_wrapper.get('type') == 'AmpOptimWrapper',
    )
    (out / 'config.py').write_text(text, encoding='utf-8')
    Config.fromfile(str(out / 'config.py'))  # it parses
    for split, items in splits.items():
        per_class = [sum(s.label == i for s in items) for i in range(len(source.classes))]
        echo(f'{split:5s}: {len(items):6d} videos, per class {min(per_class)}-{max(per_class)}')
    if sampling is not None:
        echo(sampling.describe())
    if by_time:
        echo(by_time if request.sample_by_time else f'note: {by_time}')
    if not request.flip:
        echo(
            f'horizontal flip: off ({flips} Flip step{"s" if flips != 1 else ""} taken out of the '
            'training pipeline)'
        )
    if to_pyav:
        echo(
            f"decoding: dna_mm's PyAV reader, the one the videos were checked with ({to_pyav} decord "
            'step(s) of the base replaced: DecordInit -> ScaledPyAVInit, DecordDecode -> SortedDecordDecode)'
        )
    for note in replaced:
        echo(f'note: {note}')
    echo(recipe.describe(len(splits['train'])))
    echo(f'initialisation: {init_note}')
    echo(f'wrote {out}/: {", ".join(f"{s}.txt" for s in splits)}, classes.txt, config.py')
    echo('next: ' + shlex.join(['python', 'tools/train.py', str(out / 'config.py')]))  # blanks quoted
    return 0
