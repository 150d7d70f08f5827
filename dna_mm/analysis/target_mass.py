"""Target attention mass: the share of attention that lands on the patches an object covers.

The DnA paper's claim is that softmax attention spreads mass over "closely associated but
irrelevant" features and that the negative branch takes them out. With the object's box known in
every frame (the synthetic motion set writes it, :func:`dna_mm.synthetic.motion_clips.load_boxes`),
that is measurable: how much of a query's attention goes to the keys of the target's patches.

Per query row ``a`` (the class token's row where the sequence has one, else the pooled query
``ā = mean over rows``), keys ``K`` (the patch tokens) and region ``R ⊆ K`` (the patches that
overlap the box)::

    mass(a, R) = Σ_{n ∈ R} |a_n|  /  Σ_{n ∈ K} |a_n|          uniform(R) = |R| / |K|

``uniform`` is what a row spread evenly over the patches gives (the chance level). The absolute
value leaves softmax / DnA / Diff branch maps unchanged (non-negative rows) and makes the measure
the share of attention *weight* for signed maps: Cog's ``sign(S) ⊙ softmax(|S|)`` and the
combined map of a two-branch attention, ``A+ + c·A−`` with ``c`` = DnA's ``α_h`` or Diff's
``−λ`` (for DnA's ``Q±V±`` the branches multiply different values ``V+`` / ``V−``, so the
combined map is the operator the two maps would form on shared values: a summary, not the
layer's exact mixing).

=======================  =========================================================  ==========
function                 what                                                       returns
=======================  =========================================================  ==========
box_patch_mask           patches of a ``gh × gw`` grid overlapping any box          ``[..., P]``
attention_mass           ``mass`` above per sample and head                         ``[B, H]``
uniform_mass             ``uniform`` above per sample                               ``[B]``
sequence_regions         a clip's ``[B, T, P]`` region → each attention's keys      tuple
=======================  =========================================================  ==========

:class:`TargetMassCollector` hooks every attention of a model (the analysis toolkit's
:func:`~.collector.eager_attention`) and averages ``mass`` per site, branch (``pos``, ``neg``,
``combined``; ``attn`` for single-map attentions), region and head over the forward passes it
sees; set :attr:`TargetMassCollector.regions` before each one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional

import torch
from torch import Tensor, nn

from ..models.sites import AttentionSite, find_attention_sites, prefix_tokens
from .collector import EagerObserver, _Mean

_EPS = 1e-12


def box_patch_mask(boxes: Tensor, grid: tuple[int, int], patch: tuple[int, int]) -> Tensor:
    """Which patches of a ``gh × gw`` grid of ``ph × pw``-pixel patches overlap a box.

    ``boxes [..., K, 4]`` pixel boxes ``(x0, y0, x1, y1)``, end exclusive, ``K`` boxes (the union
    is taken; ``K = 0``: no patch) → ``[..., gh·gw]`` bool, patches in row-major order (a patch
    embedding's ``flatten(2)``). A patch overlaps a box when their intersection has a positive
    area.
    """
    if boxes.shape[-1] != 4 or boxes.dim() < 2:
        raise ValueError(f'box_patch_mask: expected boxes [..., K, 4], got shape {list(boxes.shape)}')
    (gh, gw), (ph, pw) = grid, patch
    x0 = torch.arange(gw, dtype=torch.float64) * pw  # [gw] left edges
    y0 = torch.arange(gh, dtype=torch.float64) * ph  # [gh] top edges
    b = boxes.double()[..., None, None, :]  # [..., K, 1, 1, 4]
    over_x = (b[..., 0] < x0 + pw) & (x0 < b[..., 2])  # [..., K, 1, gw]
    over_y = (b[..., 1] < y0[:, None] + ph) & (y0[:, None] < b[..., 3])  # [..., K, gh, 1]
    return (over_x & over_y).any(dim=-3).flatten(-2)  # [..., gh·gw]


def attention_mass(
    attn: Tensor, region: Tensor, keys: Optional[Tensor] = None, query: Optional[int] = None
) -> Tensor:
    """``Σ_{n ∈ region} |a_n| / Σ_{n ∈ keys} |a_n|`` per sample and head.

    Args:
        attn: ``[B, H, M, N]`` maps (rows: queries).
        region: ``[B, N]`` bool, the keys on the object (a subset of ``keys``).
        keys: ``[N]`` or ``[B, N]`` bool, the keys counted in the denominator (default: all).
        query: The row ``a`` (e.g. 0, the class token); ``None``: the mean of all rows.

    Returns:
        ``[B, H]``; 0 where the keys carry no weight.
    """
    if attn.dim() != 4 or region.shape != (attn.shape[0], attn.shape[-1]):
        raise ValueError(
            f'attention_mass: expected attn [B, H, M, N] and region [B, N], got '
            f'{list(attn.shape)} and {list(region.shape)}'
        )
    keys = torch.ones_like(region) if keys is None else keys.expand_as(region)
    rows = (attn[:, :, query] if query is not None else attn.mean(dim=2)).abs().double()  # [B, H, N]
    on = (rows * (region & keys)[:, None]).sum(-1)  # [B, H]
    total = (rows * keys[:, None]).sum(-1)
    return on / total.clamp_min(_EPS)


def uniform_mass(region: Tensor, keys: Optional[Tensor] = None) -> Tensor:
    """``|region ∩ keys| / |keys|`` per sample ``[B]``: the mass of a row spread evenly."""
    keys = torch.ones_like(region) if keys is None else keys.expand_as(region)
    return (region & keys).sum(-1).double() / keys.sum(-1).clamp_min(1).double()


def sequence_regions(
    group: str, clip_region: Tensor, num_keys: int, prefix: int = 1
) -> tuple[Tensor, Tensor, Optional[int]]:
    """A clip-level region ``[B, T, P]`` (frame, patch) → ``(region [B', N], keys [N], query)``
    of one attention call, for the token layouts of TimeSformer (``[B, prefix + P·T]``,
    patch-major, time-minor):

    * ``'spatial'`` (divided): ``B' = B·T`` sequences ``[CLS, patches of frame t]``; the class
      token's row;
    * ``'temporal'`` (divided): ``B' = B·P`` sequences ``[patch p in frames 0..T-1]``, no class
      token; the pooled query;
    * anything else: one sequence of all tokens ``[prefix tokens, p0t0, p0t1, …]`` (joint
      space-time, or a ViT with ``T = 1``); the class token's row if ``prefix``, else the pooled
      query.

    Raises:
        ValueError: ``num_keys`` does not fit the layout.
    """
    b, t, p = clip_region.shape
    if group == 'spatial':
        if num_keys != 1 + p:
            raise ValueError(f'spatial attention with {num_keys} keys; expected 1 + {p} patches')
        region = torch.cat([clip_region.new_zeros(b * t, 1), clip_region.reshape(b * t, p)], dim=1)
        keys = torch.ones(1 + p, dtype=torch.bool, device=clip_region.device)
        keys[0] = False
        return region, keys, 0
    if group == 'temporal':
        if num_keys != t:
            raise ValueError(f'temporal attention with {num_keys} keys; expected {t} frames')
        region = clip_region.permute(0, 2, 1).reshape(b * p, t)
        return region, torch.ones(t, dtype=torch.bool, device=clip_region.device), None
    if num_keys != prefix + p * t:
        raise ValueError(f'attention with {num_keys} keys; expected {prefix} + {p} patches × {t} frames')
    region = torch.cat([clip_region.new_zeros(b, prefix), clip_region.permute(0, 2, 1).reshape(b, p * t)], 1)
    keys = torch.ones(num_keys, dtype=torch.bool, device=clip_region.device)
    keys[:prefix] = False
    return region, keys, (0 if prefix else None)


class TargetMassCollector(EagerObserver):
    """:func:`attention_mass` of every attention of a model, per site, branch, region and head,
    averaged over the forward passes run inside ``with collector:``.

    Before each forward, set :attr:`regions` to the batch's named clip regions, ``name → [B, T, P]``
    bool (frame, patch in row-major order), e.g. ``{'target': ..., 'distractors': ...}``. Each
    attention call's sequences (:func:`sequence_regions`) count one each: the spatial mass is the
    mean over (clip, frame), the temporal one over (clip, patch).

    Branches: ``attn`` (softmax, Cog), ``pos`` / ``neg`` and ``combined`` = ``A+ + c·A−``
    (DnA ``c = α_h``, Diff ``c = −λ``; :meth:`~.sites.AttentionSite.neg_coefficient`).

    Args:
        model: Holds the attentions (:func:`~.sites.find_attention_sites`).
    """

    def __init__(self, model: nn.Module) -> None:
        self.sites = find_attention_sites(model)
        self._prefix = {s.name: prefix_tokens(model, s.layer_path) for s in self.sites}
        self.regions: dict[str, Tensor] = {}
        self._mass: dict[tuple, _Mean] = defaultdict(_Mean)
        self._uniform: dict[tuple, _Mean] = defaultdict(_Mean)

    @staticmethod
    def branch_maps(site: AttentionSite, maps: dict[str, Tensor]) -> dict[str, Tensor]:
        """The maps measured: the module's own and, for two branches, ``combined``."""
        if len(site.branches) == 1:
            return {'attn': maps['attn']}
        coef = site.neg_coefficient().to(maps['neg'])  # [1, H, 1, 1] or a scalar
        return {'pos': maps['pos'], 'neg': maps['neg'], 'combined': maps['pos'] + coef * maps['neg']}

    @torch.no_grad()
    def observe(self, site: AttentionSite, maps: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        """Reduce one call's maps into the running means."""
        if not self.regions:
            raise RuntimeError(
                'TargetMassCollector: set .regions (name -> [B, T, P]) before the forward pass'
            )
        measured = self.branch_maps(site, maps)
        n = next(iter(measured.values())).shape[-1]
        for name, clip_region in self.regions.items():
            region, keys, query = sequence_regions(site.group, clip_region.bool(), n, self._prefix[site.name])
            region, keys = region.to(heads['q'].device), keys.to(heads['q'].device)
            count = region.shape[0]
            self._uniform[(site.name, name)].add(uniform_mass(region, keys).mean(), count)
            for branch, attn in measured.items():
                if attn.shape[0] != count:
                    raise ValueError(
                        f'{site.name}: {attn.shape[0]} sequences in the call, {count} from the '
                        f'regions of {name!r} (batch or layout mismatch)'
                    )
                self._mass[(site.name, branch, name)].add(
                    attention_mass(attn, region, keys, query).mean(0), count
                )

    def records(self) -> list[dict]:
        """``[{site, layer, group, kind, branch, region, per_head, mean, uniform, num_sequences}]``
        (``mean``: over heads; ``uniform``: the chance level over the same sequences)."""
        out = []
        for site in self.sites:
            for (name, branch, region), m in self._mass.items():
                if name != site.name or not m.weight:
                    continue
                per_head = m.value()
                out.append(
                    site.record(
                        kind=site.kind,
                        branch=branch,
                        region=region,
                        per_head=per_head.tolist(),
                        mean=float(per_head.mean()),
                        uniform=float(self._uniform[(site.name, region)].value()),
                        num_sequences=m.weight,
                    )
                )
        return out
