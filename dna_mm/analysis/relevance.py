"""Relevance maps: Chefer et al.'s generic rule (ICCV 2021), per branch.

For every attention call, in forward order, with ``A`` the map the forward multiplies and
``∇A = ∂y_c/∂A`` its gradient for the class score ``y_c`` (default: the predicted class)::

    R ← I                                        (tokens × tokens)
    cam = mean_heads(relu(∇A ⊙ A))               [M, N]
    R ← R + cam · R                              (the residual keeps the identity)

and the relevance of the patches is the CLS row ``R[CLS, patches]``, reshaped to the patch grid,
upsampled to the input, min-max normalised. DnA and Diff propagate each branch on its own
(``pos``: softmax / ``A1``; ``neg``: softmin / ``A2``), giving a positive and a negative map
(drawn orange / blue by :func:`~.plots.plot_relevance`); a block with one map (softmax / Cog,
e.g. Cog's first and last layer) enters both chains. The maps come from the forward pass itself
(:func:`~.collector.eager_attention`, with ``retain_grad``), not from a separate computation.

Divided space-time (MMAction2's TimeSformer), tokens ``[CLS, (p, t)]`` with index ``1 + p·T + t``:
each attention is written as one ``(1 + P·T)²`` matrix before the update —

* temporal (per patch ``p``, ``T × T``, no CLS): ``cam[(p,t), (p,t')]``; the CLS row/column 0;
* spatial (per frame ``t``, ``(1+P)²`` with the CLS copied into every frame and averaged back):
  patch rows ``cam_t[(p,t), (p',t)]`` and ``cam_t[(p,t), CLS]``, the CLS row the frame average
  ``cam_t[CLS, (p',t)] / T`` and ``mean_t cam_t[CLS, CLS]``

— so one relevance matrix runs through both steps of every block, and ``R[CLS, (p, t)]`` gives
one map per frame (normalised over the whole clip, so frames compare).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import ConfigError, UnsupportedModelError
from ..models.sites import AttentionSite, find_attention_sites, prefix_tokens
from .collector import eager_attention
from .models import AnalysisModel


@dataclass
class Relevance:
    """Relevance of one input.

    Attributes:
        target: Class whose score was differentiated.
        score: Its logit.
        probability: Its softmax probability.
        maps: Chain (``'pos'``, ``'neg'`` or ``'attn'``) → ``[T, H, W]`` in ``[0, 1]`` (``T = 1``
            for an image), at the input's resolution.
        raw: Chain → the un-normalised CLS row on the patch grid ``[T, h, w]``.
    """

    target: int
    score: float
    probability: float
    maps: dict[str, Tensor]
    raw: dict[str, Tensor]


def chefer_cam(attn: Tensor, grad: Tensor) -> Tensor:
    """``mean_heads(relu(∇A ⊙ A))``: ``[B, H, M, N]`` × 2 → ``[B, M, N]``."""
    return (grad * attn).clamp(min=0).mean(dim=1)


def temporal_to_tokens(cam: Tensor) -> Tensor:
    """Temporal cams ``[P, T, T]`` → ``[1 + P·T, 1 + P·T]`` (block diagonal, CLS untouched)."""
    p, t, _ = cam.shape
    full = cam.new_zeros(1 + p * t, 1 + p * t)
    full[1:, 1:] = torch.block_diag(*cam)
    return full


def spatial_to_tokens(cam: Tensor) -> Tensor:
    """Spatial cams ``[T, 1 + P, 1 + P]`` (CLS first) → ``[1 + P·T, 1 + P·T]`` (module docstring)."""
    t, n, _ = cam.shape
    p = n - 1
    full = cam.new_zeros(1 + p * t, 1 + p * t)
    idx = 1 + torch.arange(p)[None, :] * t + torch.arange(t)[:, None]  # [T, P]: token of (p, t)
    full[idx[:, :, None], idx[:, None, :]] = cam[:, 1:, 1:]  # patch -> patch, same frame
    full[idx, 0] = cam[:, 1:, 0]  # patch -> CLS
    full[0, idx] = cam[:, 0, 1:] / t  # CLS (frame average) -> patch
    full[0, 0] = cam[:, 0, 0].mean()
    return full


def _to_tokens(site: AttentionSite, cam: Tensor) -> Tensor:
    parent = type(site.parent).__name__
    if parent == 'DividedTemporalAttentionWithNorm':
        return temporal_to_tokens(cam)
    if parent == 'DividedSpatialAttentionWithNorm':
        return spatial_to_tokens(cam)
    if cam.shape[0] != 1 or cam.shape[1] != cam.shape[2]:
        raise UnsupportedModelError(
            f'relevance: {site.name} gave maps of shape {list(cam.shape)}; the rule '
            f'needs one self-attention over all tokens per input (batch 1), or '
            f"MMAction2's divided space-time attention"
        )
    return cam[0]


def relevance_chains(model: torch.nn.Module) -> tuple[str, ...]:
    """The chains :func:`relevance_maps` gives for ``model``: ``('pos', 'neg')`` where its
    attentions have a positive and a negative branch (DnA, Diff), else ``('attn',)``."""
    names = {n for site in find_attention_sites(model) for n in site.module.map_names}
    return ('pos', 'neg') if 'neg' in names else ('attn',)


def relevance_maps(am: AnalysisModel, inputs: Tensor, target: Optional[int] = None) -> Relevance:
    """Chefer relevance of ``inputs`` (one image ``[1, C, H, W]`` or one clip ``[1, 1, C, T, H, W]``).

    Args:
        am: A classifier (:attr:`AnalysisModel.is_classifier`).
        inputs: Normalised input of batch size 1.
        target: Class to explain; default the prediction.
    """
    if not am.is_classifier:
        raise UnsupportedModelError(f'relevance maps need class scores; {am.name} is not a classifier')
    if inputs.shape[0] != 1:
        raise ValueError(f'relevance_maps: one input at a time, got batch {inputs.shape[0]}')
    sites = find_attention_sites(am.model)
    calls: list[tuple[AttentionSite, dict[str, Tensor]]] = []

    def keep(site: AttentionSite, maps: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        for m in maps.values():
            m.retain_grad()
        calls.append((site, maps))

    with torch.enable_grad(), eager_attention(sites, keep):
        logits = am.forward(inputs)  # [1, K]
        probs = logits.detach().softmax(-1)[0]
        cls = int(probs.argmax()) if target is None else int(target)
        if not 0 <= cls < logits.shape[-1]:
            raise ConfigError(f'relevance_maps: target {cls} outside the {logits.shape[-1]} classes')
        am.model.zero_grad(set_to_none=True)
        logits[0, cls].backward()
    seen = {k for _, maps in calls for k in maps}
    chains = [c for c in ('pos', 'neg') if c in seen] or ['attn']
    rel: dict[str, Tensor] = {}  # chain → R [n, n]
    for site, maps in calls:
        for chain in chains:
            a = maps.get(chain, maps.get('attn'))
            if a is None or a.grad is None:
                raise RuntimeError(f'relevance: no gradient reached the {chain!r} map of {site.name}')
            cam = _to_tokens(site, chefer_cam(a.detach().float(), a.grad.float()))  # [n, n]
            r = rel[chain] if chain in rel else torch.eye(cam.shape[0])
            rel[chain] = r + cam @ r
    video = any(type(s.parent).__name__.startswith('Divided') for s, _ in calls)
    prefix = 1 if video else prefix_tokens(am.model, calls[-1][0].layer_path)
    size = tuple(inputs.shape[-2:])
    frames = inputs.shape[-3] if video else 1
    out, raw = {}, {}
    for chain, r in rel.items():
        row = r[0, prefix:]  # [P·T] (video, index p·T + t) or [P]
        grid = _grid(row.numel() // frames, size)
        maps = row.reshape(-1, frames).t().reshape(frames, *grid)  # [T, P] → [T, h, w]
        raw[chain] = maps
        up = F.interpolate(maps[:, None], size=size, mode='bilinear', align_corners=False)[:, 0]
        lo, hi = up.min(), up.max()
        out[chain] = (up - lo) / (hi - lo) if hi > lo else torch.zeros_like(up)
    return Relevance(cls, float(logits[0, cls].detach()), float(probs[cls]), out, raw)


def _grid(num_patches: int, size: tuple[int, int]) -> tuple[int, int]:
    """Patch grid ``(h, w)`` with ``h·w = num_patches`` and the input's aspect ratio."""
    h = max(1, round(math.sqrt(num_patches * size[0] / size[1])))
    if num_patches % h:
        raise ValueError(f'relevance: {num_patches} patches do not form a grid for an input of {tuple(size)}')
    return h, num_patches // h


def source_frame_indices(pipeline: list[dict], path: str) -> Optional[list[int]]:
    """Indices in the source video of the frames a test pipeline samples from ``path`` (its
    first clip): the pipeline run up to its ``SampleFrames`` step, nothing decoded.
    ``None`` when the pipeline has no such step."""
    from mmengine.dataset import Compose

    end = next((i for i, step in enumerate(pipeline) if 'SampleFrames' in str(step.get('type', ''))), None)
    if end is None:
        return None
    out = Compose(pipeline[: end + 1])(dict(filename=path, label=-1, start_index=0, modality='RGB'))
    return [int(i) for i in out['frame_inds'][: out['clip_len']]]
