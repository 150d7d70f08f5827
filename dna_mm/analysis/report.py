"""One analysis run over a model's data: the JSON report behind ``tools/analysis/analyze_attention.py``.

Report layout (``schema = 'dna_mm.analysis/1'``; numbers are plain floats, entropies in nats)::

    label, member, config, checkpoint, num_samples, accuracy (clean top-1 on the analysed samples, if known)
                (label: as given, else the model's own: AnalysisModel.label, e.g. 'DnA (A±)';
                member: its attention member as a study method, models.model_member, e.g. 'dna:apm',
                null where its members are mixed: the figures colour the run by it)
    settings   {analyses, top_k_percent, intruder_k, intruder_eps, with_coefficient, sigmas,
                noise_space, center, seed}
    sites      [{site, layer, group, kind, branches, num_heads, variant (DnA: its variant, 'apm' ...)}]
    alpha      [{site, layer, group, per_head, mean, max, min, std, init}]    (DnA with α)
    lambda     [{site, layer, group, value, lambda_init}]                      (Diff)
    entropy    [{site, layer, group, kind, branch, per_head, mean, top_k_per_head, top_k_mean,
                 num_keys (N: uniform rows have the maximum log N), ...}]
    redundancy [{site, layer, group, kind, branch, mean}]  (mean pairwise distance 1 - cos between heads)
    cvv, branch_cosine  [{site, layer, group, kind, mean, median, per_head_mean, count, histogram}]
    intruders  [{site, layer, group, kind, k, eps, histogram, mean, per_head_mean, count}]
    robustness [{sigma, psnr, accuracy, layers: [{layer, distance}]}]         (sigma 0 = clean)
    summary    {cvv: {mean, median}, branch_cosine: {mean, median}, intruders: {histogram, mean, mode}}

Only the analyses asked for appear. ``alpha`` and ``lambda`` are the members' mixing weights
(:meth:`~dna_mm.models.attention.AttentionBase.mixing_weights`), one list per name: a per-head
weight ``[H]`` with its statistics and ``init``, a scalar with its ``value`` and ``<name>_init``
(``alpha`` always, another name where a member has it).
"""

from __future__ import annotations

import contextlib
import math
import sys
from typing import Iterable, Optional, Sequence

import torch
from mmengine.utils import ProgressBar

from ..errors import DataError
from ..family import NEGATIVE_INIT
from ..models.attention import MixingWeight
from ..models.sites import AttentionSite, find_attention_sites
from .collector import (
    MAP_ANALYSES,
    AttentionCollector,
    TokenDistanceCollector,
    histogram_mean,
    histogram_quantiles,
    summed_counts,
)
from .measures import alpha_stats
from .models import AnalysisModel, model_member

SCHEMA = 'dna_mm.analysis/1'
#: ``DnAAttention``'s initial α (its ``alpha_init`` default and the converters' value)
ALPHA_INIT = NEGATIVE_INIT.alpha
ANALYSES = ('alpha', 'entropy', 'redundancy', 'cvv', 'intruders', 'robustness')


def weight_record(site: AttentionSite, name: str, weight: MixingWeight) -> dict:
    """One site's record of its mixing weight ``name``: a per-head ``[H]`` weight (DnA's α) as
    ``per_head``, its statistics (:func:`~.measures.alpha_stats`) and ``init``; a scalar (Diff's
    λ) as ``value`` and ``<name>_init``."""
    if weight.value.dim() == 1:
        per_head = weight.value
        return site.record(per_head=per_head.tolist(), **alpha_stats(per_head), init=float(weight.init))
    return site.record(value=float(weight.value.detach()), **{f'{name}_init': float(weight.init)})


def parameter_records(am: AnalysisModel) -> dict[str, list[dict]]:
    """Every site's mixing weights (:meth:`~dna_mm.models.attention.AttentionBase.mixing_weights`),
    one list per name (:func:`weight_record`): ``alpha`` (DnA's α; the list always, empty
    without one) and any other (Diff's ``lambda``)."""
    records: dict[str, list[dict]] = {'alpha': []}
    for site in find_attention_sites(am.model):
        for name, weight in site.module.mixing_weights().items():
            records.setdefault(name, []).append(weight_record(site, name, weight))
    return records


def site_record(site: AttentionSite) -> dict:
    """A site of ``sites``: its member's short name (``kind``), branches, heads and, for a member
    of variants (DnA), its ``variant`` (canonical: ``'apm'``, ``'qpm_vpm'``, ...)."""
    record = site.record(kind=site.kind, branches=list(site.branches), num_heads=site.module.num_heads)
    variant = getattr(site.module, 'variant', None)
    if isinstance(variant, str):
        record['variant'] = variant
    return record


def analyze(
    am: AnalysisModel,
    analyses: Sequence[str] = ANALYSES,
    num_samples: Optional[int] = None,
    top_k_percent: float = 10.0,
    intruder_k: int = 10,
    intruder_eps: float = 0.5,
    with_coefficient: bool = False,
    sigmas: Iterable[float] = (0.1, 0.5, 1.0),
    noise_space: str = 'normalized',
    center: Optional[str] = 'feature',
    seed: int = 0,
    label: Optional[str] = None,
    progress: bool = False,
) -> dict:
    """Run the analyses over ``num_samples`` samples of ``am`` (all when ``None``).

    One pass over the data: each batch runs once on the eager path (maps reduced by
    :class:`~.collector.AttentionCollector`, block outputs by the token-distance hooks as the
    clean, σ = 0 case) and once per ``σ`` with Gaussian noise (:meth:`AnalysisModel.add_noise`,
    fast path, seeded by ``seed``). ``progress``: a bar with the ETA on stderr (mmengine's
    ``ProgressBar``, samples done / to do).
    """
    unknown = set(analyses) - set(ANALYSES)
    if unknown:
        raise ValueError(f'unknown analyses {sorted(unknown)}; choose from {list(ANALYSES)}')
    sigmas = [float(s) for s in sigmas]
    if any(not (math.isfinite(s) and s >= 0) for s in sigmas):
        raise ValueError(f'noise levels must be finite and >= 0 (0: the clean pass, always run): {sigmas}')
    sigmas = sorted({s for s in sigmas if s > 0}) if 'robustness' in analyses else []
    map_analyses = [a for a in analyses if a in MAP_ANALYSES]
    sites = find_attention_sites(am.model)
    report: dict = dict(
        schema=SCHEMA,
        label=label or am.label,
        member=model_member(am.model),
        num_samples=0,
        settings=dict(
            analyses=list(analyses),
            top_k_percent=top_k_percent,
            intruder_k=intruder_k,
            intruder_eps=intruder_eps,
            with_coefficient=with_coefficient,
            sigmas=sigmas,
            noise_space=noise_space,
            center=center,
            seed=seed,
        ),
        sites=[site_record(s) for s in sites],
    )
    if 'alpha' in analyses:
        report.update(parameter_records(am))
    if not map_analyses and 'robustness' not in analyses:
        return report
    collector = AttentionCollector(
        am.model, map_analyses, top_k_percent, intruder_k, intruder_eps, with_coefficient
    )
    tokens = TokenDistanceCollector(am.model, center) if 'robustness' in analyses else None
    gen = torch.Generator().manual_seed(seed)
    correct = dict.fromkeys((0.0, *sigmas), 0)
    psnr = dict.fromkeys(sigmas, 0.0)
    labelled = 0
    bar = None
    with torch.no_grad():
        for batch in am.batches(num_samples):
            b = batch.inputs.shape[0]
            if progress and bar is None:
                bar = ProgressBar(batch.meta.get('total') or num_samples or 0, file=sys.stderr)
            report['num_samples'] += b
            known = batch.labels is not None and bool((batch.labels >= 0).all()) and am.is_classifier
            labelled += b if known else 0
            for sigma in (0.0, *sigmas):  # the clean pass (σ = 0) reduces the maps too
                inputs = am.add_noise(batch.inputs, sigma, noise_space, gen)
                with contextlib.ExitStack() as stack:
                    if sigma == 0 and map_analyses:
                        stack.enter_context(collector)
                    if tokens is not None:
                        tokens.tag = sigma
                        stack.enter_context(tokens)
                    out = am.forward(inputs)
                if sigma:
                    psnr[sigma] += am.psnr(batch.inputs, inputs) * b
                if known:
                    correct[sigma] += int((out.argmax(-1) == batch.labels).sum())
            if bar is not None:
                bar.update(b)
    if bar is not None:
        sys.stderr.write('\n')
    n = report['num_samples']
    if n == 0:
        raise DataError(f'{am.name}: the data gave no samples')
    if labelled == n:
        report['accuracy'] = correct[0.0] / n
    report.update(collector.records())
    if tokens is not None:
        dist = tokens.distances()
        report['robustness'] = [
            dict(
                sigma=s,
                psnr=None if s == 0 else psnr[s] / n,
                accuracy=correct[s] / n if labelled == n else None,
                layers=[dict(layer=layer, distance=d) for layer, d in dist.get(s, {}).items()],
            )
            for s in [0.0, *sigmas]
        ]
    report['summary'] = summarize(report)
    return report


def summarize(report: dict) -> dict:
    """Dataset-level numbers over all sites: C(V+, V-) and branch cosine mean / median (merged
    histograms, median to one bin), intruder histogram, mean and mode."""
    summary: dict = {}
    for name in ('cvv', 'branch_cosine'):
        recs = report.get(name) or []
        if recs:
            counts = summed_counts(r['histogram']['counts'] for r in recs)
            n = int(counts.sum())
            median = histogram_quantiles(counts, recs[0]['histogram']['edges'], (0.5,))[0]
            summary[name] = dict(mean=sum(r['mean'] * r['count'] for r in recs) / n, median=median, count=n)
    recs = report.get('intruders') or []
    if recs:
        hist = summed_counts(r['histogram'] for r in recs)
        summary['intruders'] = dict(
            histogram=hist.tolist(), count=int(hist.sum()), mean=histogram_mean(hist), mode=int(hist.argmax())
        )
    return summary
