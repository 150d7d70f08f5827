"""Non-overlapping window partition of a token grid (ViTDet's local-attention blocks).

Shapes: a grid ``x [B, H, W, C]``; windows ``[B·nH·nW, w, w, C]`` with ``nH = ceil(H / w)``,
``nW = ceil(W / w)``. A grid whose sides are not multiples of ``w`` is zero-padded at the
bottom / right first, with no mask: padded tokens take part in the attention as keys (they are
zeros after ``norm1``, so their keys and values are the projections' biases), as in detectron2
and MMDetection's ViTDet; :func:`window_unpartition` crops them away again.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def window_partition(x: Tensor, window_size: int) -> tuple[Tensor, tuple[int, int]]:
    """``[B, H, W, C]`` → ``([B·nH·nW, w, w, C], (Hp, Wp))``, ``Hp = nH·w``, ``Wp = nW·w``."""
    if window_size <= 0:
        raise ValueError(f'window_partition: window_size must be positive, got {window_size}')
    b, h, w, c = x.shape
    pad_h, pad_w = -h % window_size, -w % window_size
    if pad_h or pad_w:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))  # zeros after the last row / column
    hp, wp = h + pad_h, w + pad_w
    x = x.reshape(b, hp // window_size, window_size, wp // window_size, window_size, c)
    windows = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window_size, window_size, c)
    return windows, (hp, wp)


def window_unpartition(
    windows: Tensor, window_size: int, padded_hw: tuple[int, int], hw: tuple[int, int]
) -> Tensor:
    """Inverse of :func:`window_partition`: ``[B·nH·nW, w, w, C]`` → ``[B, H, W, C]`` (padding
    cropped)."""
    hp, wp = padded_hw
    h, w = hw
    nh, nw = hp // window_size, wp // window_size
    b = windows.shape[0] // (nh * nw)
    x = windows.reshape(b, nh, nw, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, -1)
    if hp > h or wp > w:
        x = x[:, :h, :w].contiguous()
    return x
