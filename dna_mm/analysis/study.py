"""The denoising study's evaluation and statistics (``tools/analysis/study.py`` runs it).

* statistics over seeds: :func:`mean_std` (sample std, ``n − 1``), :func:`paired_difference`
  (per-seed differences of two methods, their mean and the Student-t interval
  ``d̄ ± t_{1−(1−level)/2, n−1} · s_d / √n``, the quantile from ``scipy.stats.t``);
* :func:`evaluate` — one trained model on clip sets with ground-truth boxes: top-1, mean class
  accuracy and the target attention mass (:class:`~.target_mass.TargetMassCollector`) per set;
* :func:`summarize` / :func:`markdown_table` — the per-run results of a study as its table,
  its accuracy-against-distractors curve and its mass per layer.

A run's result (``result.json`` of one method and seed)::

    method, seed, test {top1, mca} (tools/test.py on the training set's test split, in %),
    epochs, cfg_options (what the run was trained with: the epochs, the config's where no
    --epochs was given, and the study's --cfg-options), distractors, likeness,
    heldout_per_class (the held-out sets it was evaluated on), train_test_seconds (of every
    attempt of a run stopped and resumed, added), eval_seconds,
    sets [{name, num_distractors, likeness, heldout, num_clips, top1, mca, seconds,
           mass [records of TargetMassCollector]}]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np
import torch
from scipy.stats import t as student_t

from ..errors import DataError
from ..synthetic.motion_clips import load_boxes
from .models import _label
from .target_mass import TargetMassCollector, box_patch_mask

SCHEMA = 'dna_mm.study/1'


# -- statistics ------------------------------------------------------------------------------
def mean_std(values: Sequence[float]) -> dict:
    """``{mean, std, n}``; ``std`` with ``n − 1`` (``None`` for one value)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError('mean_std: no values')
    std = float(x.std(ddof=1)) if x.size > 1 else None
    return dict(mean=float(x.mean()), std=std, n=int(x.size))


def paired_difference(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> dict:
    """``a − b`` paired by position (one seed each): ``{mean, std, low, high, n, level, t}``, the
    interval ``d̄ ± t · s_d / √n`` with ``t`` the ``1 − (1 − level)/2`` quantile of Student's t with
    ``n − 1`` degrees of freedom (``low`` / ``high`` ``None`` for one pair)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f'paired_difference: expected two equally long lists, got {a.shape} and {b.shape}')
    d = a - b
    out = dict(mean_std(d), level=level, low=None, high=None, t=None)
    if d.size > 1:
        t = float(student_t.ppf(1 - (1 - level) / 2, d.size - 1))
        half = t * out['std'] / math.sqrt(d.size)
        out.update(low=out['mean'] - half, high=out['mean'] + half, t=t)
    return out


# -- evaluation --------------------------------------------------------------------------------
@dataclass
class ClipSet:
    """Clips with ground-truth boxes: ``root/videos/<file>``, the list ``root/<ann>``
    (``file label`` lines) and ``root/boxes.json`` (:func:`~dna_mm.synthetic.motion_clips.load_boxes`)."""

    name: str
    root: Path
    num_distractors: int
    likeness: str = 'demo'
    heldout: bool = True
    ann: str = 'test.txt'


def clip_batches(cfg, pre, clip_set: ClipSet, batch_size: int, patch: tuple[int, int]) -> Iterator[tuple]:
    """``(inputs [B, 1, C, T, H, W], labels [B], regions {'target', 'distractors': [B, T, P]})``
    of ``clip_set`` through the config's test pipeline and the data preprocessor ``pre``.

    The boxes of every source frame go through the pipeline as MMAction2's ``gt_bboxes``
    (normalised to the frame, as its decoders expect; its resizes, crops and flips then move them
    with the pixels); the frames the sampler picked (``frame_inds``) select theirs.
    ``distractors``: patches overlapping a distractor but not the target.
    """
    from mmengine.dataset import Compose

    pipeline = Compose(cfg.test_dataloader.dataset.pipeline)
    *before, pack = pipeline.transforms
    before = Compose(before)
    boxes, (width, height) = load_boxes(clip_set.root)
    unit = np.array([width, height, width, height], np.float32)
    lines = [ln.split() for ln in (clip_set.root / clip_set.ann).read_text().splitlines() if ln.strip()]
    chunk: list = []
    for i, (rel, label) in enumerate(lines):
        if rel not in boxes:
            raise DataError(f'{clip_set.root / "boxes.json"}: no boxes for {rel}')
        clip = boxes[rel]
        every = np.concatenate(
            [clip['target'][:, None], clip['distractors'].transpose(1, 0, 2)], 1
        )  # [F, 1+D, 4]
        results = dict(
            filename=str(clip_set.root / 'videos' / rel), label=int(label), start_index=0, modality='RGB'
        )
        results['gt_bboxes'] = every.reshape(-1, 4).astype(np.float32) / unit  # the decoder scales them back
        results = before(results)
        moved = results.pop('gt_bboxes').reshape(every.shape)[np.asarray(results['frame_inds']) % len(every)]
        h, w = results['img_shape']
        if (moved[..., 2:] - moved[..., :2]).max() <= 1:  # still normalised: no decoder scaled them
            raise DataError(
                f'{clip_set.name}: the test pipeline did not scale the boxes to pixels (gt_bboxes)'
            )
        grid = (h // patch[0], w // patch[1])
        moved = torch.from_numpy(np.asarray(moved, dtype=np.float64))  # [T, 1+D, 4]
        target = box_patch_mask(moved[:, :1], grid, patch)  # [T, P]
        distractors = box_patch_mask(moved[:, 1:], grid, patch) & ~target
        packed = pack(results)
        chunk.append((packed, target, distractors))
        if len(chunk) == batch_size or i == len(lines) - 1:
            data = pre(
                dict(
                    inputs=[c[0]['inputs'] for c in chunk], data_samples=[c[0]['data_samples'] for c in chunk]
                ),
                False,
            )
            inputs = data['inputs']
            if inputs.shape[1] != 1:
                raise DataError(
                    f'{clip_set.name}: the test pipeline gives {inputs.shape[1]} views per clip; expected 1'
                )
            labels = torch.tensor([_label(s) for s in data['data_samples']])
            regions = dict(
                target=torch.stack([c[1] for c in chunk]), distractors=torch.stack([c[2] for c in chunk])
            )
            yield inputs, labels, regions
            chunk = []


def evaluate(
    config: str,
    checkpoint: str,
    clip_sets: Sequence[ClipSet],
    batch_size: int = 8,
    device: Optional[str] = None,
) -> list[dict]:
    """Top-1 (%, MMAction2's), mean class accuracy (%, over the labelled classes:
    :func:`~dna_mm.evaluation.class_accuracy.mean_class_accuracy`) and target mass records per
    clip set of the model of ``config`` / ``checkpoint`` (a TimeSformer recognizer; ``device``: default
    CUDA when available). Every attention runs on its eager path (the maps it returns are the
    ones it multiplies; equal to the fast path within float tolerance)."""
    from mmaction.evaluation.functional import top_k_accuracy

    from ..config.build import read_config
    from ..evaluation.class_accuracy import mean_class_accuracy
    from .models import load_mm_model

    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    cfg = read_config(config)
    am = load_mm_model(config, checkpoint)
    am.model.to(device)
    pre = am.model.data_preprocessor
    patch = cfg.model.backbone.patch_size
    patch = (patch, patch) if isinstance(patch, int) else tuple(patch)
    out = []
    for clip_set in clip_sets:
        start = time.time()
        collector = TargetMassCollector(am.model)
        scores, labels = [], []
        with torch.no_grad(), collector:
            for inputs, y, regions in clip_batches(cfg, pre, clip_set, batch_size, patch):
                collector.regions = {k: v.to(device) for k, v in regions.items()}
                scores.append(am.forward(inputs.to(device)).float().cpu().numpy())
                labels.append(y.numpy())
        scores_np, labels_np = np.concatenate(scores), np.concatenate(labels)
        out.append(
            dict(
                name=clip_set.name,
                num_distractors=clip_set.num_distractors,
                likeness=clip_set.likeness,
                heldout=clip_set.heldout,
                num_clips=len(labels_np),
                top1=100 * float(top_k_accuracy(list(scores_np), list(labels_np), (1,))[0]),
                mca=100 * float(mean_class_accuracy(list(scores_np), list(labels_np))),
                mass=collector.records(),
                seconds=time.time() - start,
            )
        )
    return out


# -- summary -----------------------------------------------------------------------------------
def summarize(results: Sequence[dict], reference: str = 'softmax', level: float = 0.95) -> dict:
    """The study over its finished runs (:mod:`result layout <dna_mm.analysis.study>`).

    Returns ``{methods, seeds, reference, table, curve, mass, seconds}``:

    * ``table[method]``: ``top1`` / ``mca`` :func:`mean_std` (test split), ``diff_top1`` /
      ``diff_mca`` :func:`paired_difference` against ``reference`` over the seeds both have,
      ``seeds``, ``train_test_seconds`` (:func:`mean_std` of one run's time);
    * ``curve[method][set name]``: ``num_distractors``, ``likeness`` and ``top1``
      :func:`mean_std` of the held-out sets, and for the other methods ``diff_top1``, the
      :func:`paired_difference` against ``reference`` on that set;
    * ``mass[method][set name]``: ``[{layer, group, branch, region, mean, std, n, uniform}]``
      (``mean`` / ``std`` over seeds of the mean over heads).
    """
    methods = list(dict.fromkeys(r['method'] for r in results))
    by = {(r['method'], r['seed']): r for r in results}
    seeds = sorted({r['seed'] for r in results})
    table, curve, mass = {}, {}, {}
    heldout: dict[tuple[str, str], dict[int, float]] = {}  # (method, set) -> seed -> top-1
    for m in methods:
        runs = [by[(m, s)] for s in seeds if (m, s) in by]
        row = dict(
            seeds=[r['seed'] for r in runs],
            top1=mean_std([r['test']['top1'] for r in runs]),
            mca=mean_std([r['test']['mca'] for r in runs]),
            train_test_seconds=mean_std([r['train_test_seconds'] for r in runs]),
        )
        if m != reference:
            pairs = [s for s in seeds if (m, s) in by and (reference, s) in by]
            if pairs:
                for key in ('top1', 'mca'):
                    row[f'diff_{key}'] = paired_difference(
                        [by[(m, s)]['test'][key] for s in pairs],
                        [by[(reference, s)]['test'][key] for s in pairs],
                        level,
                    )
                row['diff_seeds'] = pairs
        table[m] = row
        curve[m], mass[m] = {}, {}
        for name in dict.fromkeys(e['name'] for r in runs for e in r['sets']):
            entries = [e for r in runs for e in r['sets'] if e['name'] == name]
            if entries[0].get('heldout', True):
                per_seed = {r['seed']: e['top1'] for r in runs for e in r['sets'] if e['name'] == name}
                curve[m][name] = dict(
                    num_distractors=entries[0]['num_distractors'],
                    likeness=entries[0].get('likeness', 'demo'),
                    top1=mean_std(list(per_seed.values())),
                )
                heldout[(m, name)] = per_seed
            groups: dict[tuple, list] = {}
            for e in entries:
                for rec in e['mass']:
                    key = (rec['layer'], rec['group'], rec['branch'], rec['region'])
                    groups.setdefault(key, []).append(rec)
            mass[m][name] = [
                dict(
                    layer=k[0],
                    group=k[1],
                    branch=k[2],
                    region=k[3],
                    **mean_std([rec['mean'] for rec in recs]),
                    uniform=float(np.mean([rec['uniform'] for rec in recs])),
                )
                for k, recs in sorted(groups.items(), key=lambda kv: kv[0][0])  # by layer, then as collected
            ]
    for (m, name), per_seed in heldout.items():
        ref = heldout.get((reference, name), {})
        pairs = [s for s in seeds if s in per_seed and s in ref]
        if m != reference and pairs:
            curve[m][name]['diff_top1'] = paired_difference(
                [per_seed[s] for s in pairs], [ref[s] for s in pairs], level
            )
    seconds = sum(r['train_test_seconds'] + r.get('eval_seconds', 0.0) for r in results)
    return dict(
        schema=SCHEMA,
        methods=methods,
        seeds=seeds,
        reference=reference,
        level=level,
        table=table,
        curve=curve,
        mass=mass,
        seconds=seconds,
    )


def _pm(stat: dict, digits: int = 2) -> str:
    if stat['std'] is None:
        return f'{stat["mean"]:.{digits}f}'
    return f'{stat["mean"]:.{digits}f} ± {stat["std"]:.{digits}f}'


def _interval(d: Optional[dict]) -> str:
    if d is None:
        return '—'
    if d['low'] is None:
        return f'{d["mean"]:+.2f} (one seed: no interval)'
    return f'{d["mean"]:+.2f} [{d["low"]:+.2f}, {d["high"]:+.2f}]'


def markdown_table(summary: dict, names: Optional[dict] = None) -> str:
    """The study's tables in Markdown. The test split: per method top-1 / mCA mean ± std, the
    paired difference to the reference with its interval, the seeds, the mean time of one run.
    Then the held-out sets, one row each: per method top-1 mean ± std and, for the others, the
    paired difference to the reference with its interval."""
    names = names or {}
    ref = summary['reference']
    level = round(100 * summary['level'])
    lines = [
        f'| attention | top-1 (%) | mCA (%) | top-1 − {names.get(ref, ref)} [{level} % CI] | '
        f'mCA − {names.get(ref, ref)} [{level} % CI] | seeds | train + test per run |',
        '|---|---|---|---|---|---|---|',
    ]
    for m, row in summary['table'].items():
        lines.append(
            f'| {names.get(m, m)} | {_pm(row["top1"])} | {_pm(row["mca"])} | '
            f'{_interval(row.get("diff_top1"))} | {_interval(row.get("diff_mca"))} | '
            f'{len(row["seeds"])} | {row["train_test_seconds"]["mean"]:.0f} s |'
        )
    methods = [m for m in summary['methods'] if summary['curve'].get(m)]
    if methods:
        head = ['held-out set']
        for m in methods:
            head.append(f'{names.get(m, m)} top-1 (%)')
            if m != ref:
                head.append(f'{names.get(m, m)} − {names.get(ref, ref)} [{level} % CI]')
        lines += ['', '| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
        for name, entry in summary['curve'][methods[0]].items():
            likeness = ' in the target\'s colour' if entry['likeness'] != 'demo' else ''
            cells = [f'{entry["num_distractors"]} distractors{likeness}']
            for m in methods:
                point = summary['curve'][m].get(name)
                cells.append(_pm(point['top1']) if point else '—')
                if m != ref:
                    cells.append(_interval(point.get('diff_top1')) if point else '—')
            lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'
