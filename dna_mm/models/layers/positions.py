"""Position terms of ViTDet (pure functions, no parameters).

* Absolute: a pre-training ``pos_embed [1, (1 +) S·S, C]`` (with or without a CLS row) is
  resized bicubically to the token grid ``[1, H, W, C]`` on every forward
  (:func:`abs_pos_grid`), and at load time to the model's pre-training grid
  (:func:`resize_pos_embed`).
* Relative, decomposed (MViTv2 / ViTDet): per axis a table ``rel_pos [2·S − 1, d]`` indexed by
  the query–key offset; the logit bias of query ``(i, j)`` and key ``(k, l)`` is

      b[(i, j), (k, l)] = q_(i,j) · Rh[i, k] + q_(i,j) · Rw[j, l]

  with the **unscaled** query ``q`` (the attention adds it to ``s·q·kᵀ``). For DnA each branch
  gets the bias of its own queries (``Q+`` and ``Q-``) from the shared tables.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def _grid_side(n: int, what: str) -> int:
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f'{what}: {n} positions do not form a square grid')
    return side


def pos_embed_has_cls(num_positions: int) -> bool:
    """Whether a ``pos_embed`` with ``num_positions`` rows has a CLS row: ``1 + S²`` rows do,
    ``S²`` rows do not (the authors' DnA ViT gives the CLS token no position)."""
    if num_positions > 1 and math.isqrt(num_positions) ** 2 == num_positions:
        return False
    _grid_side(num_positions - 1, 'pos_embed')
    return True


def abs_pos_grid(pos_embed: Tensor, has_cls_token: bool, hw: tuple[int, int]) -> Tensor:
    """``pos_embed [1, (1 +) S², C]`` → ``[1, H, W, C]`` (CLS row dropped; bicubic resize,
    ``align_corners=False``, when ``(H, W) != (S, S)``)."""
    grid = pos_embed[:, 1:] if has_cls_token else pos_embed
    side = _grid_side(grid.shape[1], 'pos_embed')
    grid = grid.reshape(1, side, side, -1)
    if (side, side) == tuple(hw):
        return grid
    grid = F.interpolate(grid.permute(0, 3, 1, 2), size=hw, mode='bicubic', align_corners=False)
    return grid.permute(0, 2, 3, 1)


def resize_pos_embed(pos_embed: Tensor, side: int, with_cls: bool) -> Tensor:
    """A checkpoint's ``pos_embed [1, (1 +) S², C]`` → ``[1, (1 +) side², C]``: grid resized
    bicubically; a CLS row kept, dropped, or added as zeros (zero = no position, what the
    authors' DnA ViT gives its CLS token) per ``with_cls``."""
    has_cls = pos_embed_has_cls(pos_embed.shape[1])
    cls = pos_embed[:, :1] if has_cls else pos_embed.new_zeros(1, 1, pos_embed.shape[-1])
    grid = abs_pos_grid(pos_embed, has_cls, (side, side)).reshape(1, side * side, -1)
    return torch.cat([cls, grid], dim=1) if with_cls else grid


def resize_rel_pos(rel_pos: Tensor, length: int) -> Tensor:
    """``[L, d]`` → ``[length, d]`` by linear interpolation along ``L`` (``align_corners=False``,
    detectron2's rule for a table made for another window or grid)."""
    if rel_pos.shape[0] == length:
        return rel_pos
    resized = F.interpolate(rel_pos.t().unsqueeze(0), size=length, mode='linear')  # [1, d, length]
    return resized[0].t()


def get_rel_pos(q_size: int, k_size: int, rel_pos: Tensor) -> Tensor:
    """Table rows for every (query, key) offset along one axis → ``[q_size, k_size, d]``.

    The table is resized to ``2·max(q, k) − 1`` rows when it has another length; when the query
    and key axes differ, the shorter one's coordinates are stretched to the longer one's.
    """
    table = resize_rel_pos(rel_pos, 2 * max(q_size, k_size) - 1)
    q_ratio, k_ratio = max(k_size / q_size, 1.0), max(q_size / k_size, 1.0)
    q_coords = torch.arange(q_size, device=rel_pos.device)[:, None] * q_ratio
    k_coords = torch.arange(k_size, device=rel_pos.device)[None, :] * k_ratio
    offsets = (q_coords - k_coords) + (k_size - 1) * k_ratio  # in [0, 2·max − 2]
    return table[offsets.long()]


def decomposed_rel_pos(
    q: Tensor, rel_pos_h: Tensor, rel_pos_w: Tensor, q_hw: tuple[int, int], k_hw: tuple[int, int]
) -> Tensor:
    """The decomposed relative-position logit bias of (unscaled) queries.

    Args:
        q: ``[B, heads, q_h·q_w, d]``, row-major over the query grid.
        rel_pos_h, rel_pos_w: ``[L, d]`` tables of the height / width axis.
        q_hw, k_hw: Query and key grids.

    Returns:
        ``[B, heads, q_h·q_w, k_h·k_w]``, to be added to ``s·q·kᵀ``.
    """
    (qh, qw), (kh, kw) = q_hw, k_hw
    rh = get_rel_pos(qh, kh, rel_pos_h).to(q.dtype)  # [qh, kh, d]
    rw = get_rel_pos(qw, kw, rel_pos_w).to(q.dtype)  # [qw, kw, d]
    b, heads, _, d = q.shape
    grid = q.reshape(b, heads, qh, qw, d)
    rel_h = torch.einsum('bnhwc,hkc->bnhwk', grid, rh)  # [B, heads, qh, qw, kh]
    rel_w = torch.einsum('bnhwc,wkc->bnhwk', grid, rw)  # [B, heads, qh, qw, kw]
    bias = rel_h[..., :, None] + rel_w[..., None, :]  # [B, heads, qh, qw, kh, kw]
    return bias.reshape(b, heads, qh * qw, kh * kw)
