"""Collect the attention analyses over a dataset without keeping any map.

:func:`eager_attention` is the one hook point (the attentions' own attend hooks).
:class:`AttentionCollector` reduces every call on the spot (per site, branch and head) with the
functions of :mod:`.measures`;
:class:`TokenDistanceCollector` hooks the blocks' outputs for the representational-robustness
curve. Memory: running sums, fixed-bin histograms (C(V+, V-)) and ``k + 1`` intruder counts per
site — nothing grows with the dataset.
"""

from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from typing import Callable, Iterable, Iterator, Optional, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from ..models.sites import AttentionSite, find_attention_sites, prefix_tokens
from .measures import (
    attention_entropy,
    branch_cosine,
    head_redundancy,
    intruder_dimensions,
    token_distance,
    value_alignment,
)

Callback = Callable[[AttentionSite, dict[str, Tensor], dict[str, Tensor]], None]
#: analyses computed from the maps / heads of the forward pass
MAP_ANALYSES = ('entropy', 'redundancy', 'cvv', 'intruders')


@contextlib.contextmanager
def eager_attention(sites: Iterable[AttentionSite], callback: Callback) -> Iterator[None]:
    """Run ``sites`` on their eager path and pass every call's maps and heads to ``callback``.

    Inside the block, each family attention has an attend hook
    (:meth:`~dna_mm.models.attention.AttentionBase.register_attend_hook`): the module computes
    exactly the eager formula (equal to the fast path within float tolerance,
    ``tests/models/attention/test_attention_family.py``) and hands ``callback(site, maps,
    heads)`` the maps ``[B, H, M, N]`` it multiplies (before dropout) and the head-split inputs
    (``q, k, v`` and the member's extra heads, DnA's ``q_neg, v_neg``). Leaving the block removes
    the hooks.
    """
    handles = []
    try:
        for site in sites:
            hook = functools.partial(_call_back, site, callback)
            handles.append(site.module.register_attend_hook(hook))
        yield
    finally:
        for handle in reversed(handles):
            handle.remove()


def _call_back(site: AttentionSite, callback: Callback, module: nn.Module, maps: dict, heads: dict) -> None:
    callback(site, maps, heads)


class EagerObserver:
    """A collector's ``with`` block: inside it, :attr:`sites` run on their eager path and every
    call goes to :meth:`observe` (:func:`eager_attention`). A subclass sets :attr:`sites` and
    defines :meth:`observe`."""

    sites: list[AttentionSite]
    _ctx: Optional[contextlib.AbstractContextManager] = None

    def observe(self, site: AttentionSite, maps: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._ctx = eager_attention(self.sites, self.observe)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)
        self._ctx = None


def branch_outputs(
    site: AttentionSite, maps: dict[str, Tensor], heads: dict[str, Tensor], with_coefficient: bool = False
) -> tuple[Tensor, Tensor]:
    """The two branch terms ``[B, H, M, d]`` of a two-branch call, before the mixing: each map
    times the values its branch reads (:attr:`~.sites.AttentionSite.value_heads`), DnA
    ``(softmax(sQ+Kᵀ) V+, softmin(sQ-Kᵀ) V-)``, Diff ``(A1 V, A2 V)``; with
    ``with_coefficient`` the second is multiplied by its factor in the output (DnA ``α_h``,
    Diff ``-λ``)."""
    (first, second), (v_first, v_second) = site.branches, (heads[h] for h in site.value_heads)
    pos = maps[first].to(v_first.dtype) @ v_first
    neg = maps[second].to(v_second.dtype) @ v_second
    if with_coefficient:
        neg = neg * site.neg_coefficient().to(neg)
    return pos, neg


class _Mean:
    """Weighted running mean of a tensor."""

    def __init__(self) -> None:
        self.total, self.weight = 0, 0

    def add(self, value: Tensor, weight: int) -> None:
        self.total = self.total + value.detach().double().cpu() * weight
        self.weight += weight

    def value(self) -> Tensor:
        return self.total / self.weight


def histogram_quantiles(counts: Sequence[float], edges: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Quantiles of binned values, linear inside a bin (resolution: one bin). ``counts [n]``,
    ``edges [n + 1]``."""
    cum = np.concatenate([[0.0], np.cumsum(np.asarray(counts, dtype=float))])
    return [float(np.interp(q * cum[-1], cum, np.asarray(edges, dtype=float))) for q in qs]


def histogram_mean(counts: Tensor) -> float:
    """Mean of the values ``0..n-1`` counted by ``counts [n]``."""
    return float((counts * torch.arange(len(counts))).sum()) / int(counts.sum())


def summed_counts(histograms: Iterable[Sequence[int]]) -> Tensor:
    """Bin-wise sum ``[max n]`` of count lists of different lengths (the shorter ones zero-padded)."""
    histograms = [torch.as_tensor(h, dtype=torch.int64) for h in histograms]
    total = torch.zeros(max(len(h) for h in histograms), dtype=torch.int64)
    for h in histograms:
        total[: len(h)] += h
    return total


class _Histogram:
    """Fixed-bin histogram on ``[lo, hi]`` of ``[B, H]`` values, with the exact sum (for the
    mean) and the mean per head."""

    def __init__(self, bins: int, lo: float = -1.0, hi: float = 1.0) -> None:
        self.edges = torch.linspace(lo, hi, bins + 1, dtype=torch.float64)
        self.counts = torch.zeros(bins, dtype=torch.int64)
        self.total, self.n = 0.0, 0
        self.per_head = _Mean()

    def add(self, values: Tensor) -> None:
        self.per_head.add(values.mean(0), values.shape[0])
        v = values.detach().double().cpu().flatten().clamp(self.edges[0], self.edges[-1])
        idx = torch.bucketize(v, self.edges[1:-1], right=True)  # bin i: [e_i, e_{i+1})
        self.counts += torch.bincount(idx, minlength=self.counts.numel())
        self.total += float(v.sum())
        self.n += v.numel()

    def record(self) -> dict:
        """Mean, median (to one bin), ``per_head_mean [H]``, count and the histogram itself."""
        return dict(
            mean=self.total / self.n,
            median=histogram_quantiles(self.counts, self.edges, (0.5,))[0],
            per_head_mean=self.per_head.value().tolist(),
            count=self.n,
            histogram=dict(edges=[round(float(e), 6) for e in self.edges], counts=self.counts.tolist()),
        )


class AttentionCollector(EagerObserver):
    """Entropy, head redundancy, C(V+, V-), branch cosine and intruder dimensions of every
    attention of a model, accumulated over the forward passes run inside ``with collector:``.

    Per site (one attention module) and branch (DnA / Diff ``pos`` and ``neg``, softmax / Cog
    ``attn``; Cog's signed map enters the entropy as ``|W|``):

    * ``entropy``: :func:`~.measures.attention_entropy` per head, all rows and the top-k %;
    * ``redundancy``: :func:`~.measures.head_redundancy`;
    * ``cvv``: :func:`~.measures.value_alignment` of the two branches' values where each has
      its own projection (DnA's ``V+``, ``V-``: variants with a ``V-`` projection;
      :attr:`~.sites.AttentionSite.has_separate_values`), and :func:`~.measures.branch_cosine`
      of the two branch outputs (DnA, Diff; ``with_coefficient``: the second multiplied by
      ``α_h`` / ``-λ`` first);
    * ``intruders``: :func:`~.measures.intruder_dimensions` of the positive branch's output
      w.r.t. the negative one's (DnA, Diff).

    Every call's ``[B, H, ...]`` maps count as ``B`` samples: for TimeSformer's temporal
    attention that is one per (clip, patch) sequence, for its spatial one one per (clip, frame).

    Args:
        model: Holds the attentions (found by :func:`~.sites.find_attention_sites`).
        analyses: Subset of :data:`MAP_ANALYSES`.
        top_k_percent: k of the top-k % entropy.
        intruder_k, intruder_eps: ``k`` and ``ε`` of the intruder count.
        with_coefficient: Branch cosine with the mixing coefficient applied (default: the
            paper's branch terms, without).
        hist_bins: Bins of the C(V+, V-) and branch-cosine histograms on ``[-1, 1]`` (the median
            is read from it, to one bin).
    """

    def __init__(
        self,
        model: nn.Module,
        analyses: Iterable[str] = MAP_ANALYSES,
        top_k_percent: float = 10.0,
        intruder_k: int = 10,
        intruder_eps: float = 0.5,
        with_coefficient: bool = False,
        hist_bins: int = 400,
    ) -> None:
        self.analyses = tuple(analyses)
        unknown = set(self.analyses) - set(MAP_ANALYSES)
        if unknown:
            raise ValueError(
                f'AttentionCollector: unknown analyses {sorted(unknown)}; choose from {list(MAP_ANALYSES)}'
            )
        self.sites = find_attention_sites(model)
        self.top_k_percent = top_k_percent
        self.intruder_k, self.intruder_eps = intruder_k, intruder_eps
        self.with_coefficient = with_coefficient
        self._means: dict[tuple, _Mean] = defaultdict(_Mean)
        self._hists: dict[tuple, _Histogram] = defaultdict(lambda: _Histogram(hist_bins))
        self._intruders: dict[str, Tensor] = {}
        self._keys: dict[str, int] = {}  # site → most keys N of a map (entropy's maximum is log N)

    @torch.no_grad()
    def observe(self, site: AttentionSite, maps: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        """Reduce one call's maps / heads into the running statistics."""
        b = heads['q'].shape[0]
        for branch in site.branches:
            attn = maps[branch].detach()
            attn = attn.abs() if site.module.signed_maps else attn  # [B, H, M, N]
            if not site.module.normalised_maps:  # sigmoid's rows: their weights as a distribution
                attn = attn / attn.sum(-1, keepdim=True).clamp_min(torch.finfo(attn.dtype).tiny)
            if 'entropy' in self.analyses:
                self._keys[site.name] = max(self._keys.get(site.name, 0), attn.shape[-1])
                self._means[('entropy', site.name, branch)].add(attention_entropy(attn), b)
                self._means[('entropy_top', site.name, branch)].add(
                    attention_entropy(attn, self.top_k_percent), b
                )
            if 'redundancy' in self.analyses and attn.shape[1] > 1:
                self._means[('redundancy', site.name, branch)].add(head_redundancy(attn), b)
        if 'cvv' in self.analyses and site.has_separate_values:
            c = value_alignment(*(heads[h] for h in site.value_heads))  # [B, H]
            self._hists[('cvv', site.name)].add(c)
        if len(site.branches) == 2 and ('cvv' in self.analyses or 'intruders' in self.analyses):
            pos, neg = branch_outputs(site, maps, heads, self.with_coefficient)  # [B, H, M, d]
            if 'cvv' in self.analyses:
                cos = branch_cosine(pos, neg)  # [B, H]
                self._hists[('branch_cosine', site.name)].add(cos)
            if 'intruders' in self.analyses:
                counts = intruder_dimensions(pos, neg, self.intruder_k, self.intruder_eps)
                hist = torch.bincount(counts.flatten().cpu(), minlength=self.intruder_k + 1)
                self._intruders[site.name] = self._intruders.get(site.name, 0) + hist
                self._means[('intruders', site.name)].add(counts.double().mean(0), b)  # [H]

    # -- results ---------------------------------------------------------------------------
    def records(self) -> dict[str, list[dict]]:
        """Per-analysis lists of per-site (and per-branch) records, plain Python values: the
        ``entropy``, ``redundancy``, ``cvv``, ``branch_cosine`` and ``intruders`` entries of the
        report (fields: :mod:`.report`)."""
        out: dict[str, list[dict]] = defaultdict(list)
        for site in self.sites:
            base = site.record(kind=site.kind)
            for branch in site.branches:
                ent = self._means.get(('entropy', site.name, branch))
                if ent is not None and ent.weight:
                    top = self._means[('entropy_top', site.name, branch)].value()
                    out['entropy'].append(
                        dict(
                            base,
                            branch=branch,
                            per_head=ent.value().tolist(),
                            mean=float(ent.value().mean()),
                            top_k_percent=self.top_k_percent,
                            top_k_per_head=top.tolist(),
                            top_k_mean=float(top.mean()),
                            num_maps=ent.weight,
                            num_keys=self._keys.get(site.name),
                        )
                    )
                red = self._means.get(('redundancy', site.name, branch))
                if red is not None and red.weight:
                    out['redundancy'].append(
                        dict(base, branch=branch, mean=float(red.value()), num_maps=red.weight)
                    )
            for name in ('cvv', 'branch_cosine'):
                hist = self._hists.get((name, site.name))
                if hist is not None and hist.n:
                    extra = dict(with_coefficient=self.with_coefficient) if name == 'branch_cosine' else {}
                    out[name].append(dict(base, **extra, **hist.record()))
            counts = self._intruders.get(site.name)
            if counts is not None:
                out['intruders'].append(
                    dict(
                        base,
                        k=self.intruder_k,
                        eps=self.intruder_eps,
                        histogram=counts.tolist(),
                        mean=histogram_mean(counts),
                        per_head_mean=self._means[('intruders', site.name)].value().tolist(),
                        count=int(counts.sum()),
                    )
                )
        order = ('entropy', 'redundancy', 'cvv', 'branch_cosine', 'intruders')
        return {name: out[name] for name in order if out[name]}


class TokenDistanceCollector:
    """Mean pairwise cosine distance of each block's patch tokens
    (:func:`~.measures.token_distance`), via forward hooks on the blocks.

    A block's output ``[B, N, C]`` drops its prefix tokens (CLS; :func:`~.sites.prefix_tokens`);
    ``[B, H, W, C]`` (ViTDet) is flattened to ``[B, H·W, C]``. Video: all patch tokens of a
    clip (every frame) form one set. Set :attr:`tag` (e.g. the noise σ) before a forward pass:
    the means are kept per tag.

    Args:
        model: The model.
        center: Centring of :func:`~.measures.token_distance`.
    """

    def __init__(self, model: nn.Module, center: Optional[str] = 'feature') -> None:
        modules = dict(model.named_modules())
        self.layers: dict[int, tuple[str, nn.Module, int]] = {}  # block index → (path, block, prefix)
        for s in find_attention_sites(model):
            if s.layer not in self.layers and s.layer_path in modules:
                self.layers[s.layer] = (
                    s.layer_path,
                    modules[s.layer_path],
                    prefix_tokens(model, s.layer_path),
                )
        self.center = center
        self.tag: float = 0.0
        self._sums: dict[tuple[float, int], _Mean] = defaultdict(_Mean)
        self._handles: list = []

    def __enter__(self) -> 'TokenDistanceCollector':
        for layer, (path, module, prefix) in self.layers.items():
            hook = functools.partial(self._hook, layer, path, prefix)
            self._handles.append(module.register_forward_hook(hook))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    @torch.no_grad()
    def _hook(self, layer: int, path: str, prefix: int, module: nn.Module, args, output) -> None:
        x = output[0] if isinstance(output, (tuple, list)) else output
        if not isinstance(x, Tensor) or x.dim() not in (3, 4):
            raise ValueError(
                f'TokenDistanceCollector: {path} returned {type(x).__name__} '
                f'{list(getattr(x, "shape", []))}; expected tokens [B, N, C] or [B, H, W, C]'
            )
        tokens = x.flatten(1, 2) if x.dim() == 4 else x[:, prefix:]  # [B, N, C]
        self._sums[(self.tag, layer)].add(token_distance(tokens, self.center).mean(), x.shape[0])

    def distances(self) -> dict[float, dict[int, float]]:
        """Tag → block index → mean distance over the samples seen with that tag."""
        out: dict[float, dict[int, float]] = defaultdict(dict)
        for (tag, layer), m in sorted(self._sums.items()):
            out[tag][layer] = float(m.value())
        return dict(out)
