"""``SimpleFPN``: ViTDet's feature pyramid from one stride-16 map (MMDetection ``projects/ViTDet``).

From ``x [B, C, H, W]`` (``C = backbone_channel``):

=====  ========  ================================================  ==========
level  stride    branch                                            channels
=====  ========  ================================================  ==========
0      4         ConvT(C→C/2, 2, 2) → norm → GELU → ConvT(C/2→C/4)  C/4
1      8         ConvT(C→C/2, 2, 2)                                C/2
2      16        identity                                          C
3      32        MaxPool(2, 2)                                     C
=====  ========  ================================================  ==========

then per level a 1×1 ``ConvModule`` (``lateral_convs``) and a 3×3 one (``fpn_convs``) to
``out_channels`` (with ``norm_cfg``, e.g. ``LN2d``; no bias when normed), and
``num_outs − 4`` extra levels by ``max_pool2d(kernel 1, stride 2)`` of the last one (stride 64).
Module names as the reference (``fpn1..fpn4``, ``lateral_convs``, ``fpn_convs``), so its
checkpoints load.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch.nn.functional as F
from mmcv.cnn import ConvModule, build_norm_layer
from mmengine.model import BaseModule
from mmengine.registry import MODELS
from torch import Tensor, nn

from ...errors import ConfigError
from ..scopes import detection_parts_scope, home_scope


@MODELS.register_module()
class SimpleFPN(BaseModule):
    """Simple feature pyramid of ViTDet.

    Args:
        backbone_channel: Channels ``C`` of the backbone map.
        in_channels: Channels of the four pyramid branches: ``[C/4, C/2, C, C]``.
        out_channels: Channels of every output level.
        num_outs: Output levels (4 branches + extra stride-2 max-pools; 5 in ViTDet).
        conv_cfg, norm_cfg, act_cfg: Of the ``ConvModule`` s; ``norm_cfg`` also in ``fpn1``.
        init_cfg: MMEngine init config.
    """

    def __init__(
        self,
        backbone_channel: int,
        in_channels: Sequence[int],
        out_channels: int,
        num_outs: int,
        conv_cfg: Optional[dict] = None,
        norm_cfg: Optional[dict] = None,
        act_cfg: Optional[dict] = None,
        init_cfg: Optional[dict] = None,
    ) -> None:
        super().__init__(init_cfg=init_cfg)
        c = backbone_channel
        expected = [c // 4, c // 2, c, c]
        if list(in_channels) != expected:
            raise ConfigError(
                f'SimpleFPN: in_channels must be {expected} for backbone_channel={c}, got {list(in_channels)}'
            )
        if num_outs < len(in_channels):
            raise ConfigError(f'SimpleFPN: num_outs ({num_outs}) must be >= {len(in_channels)}')
        if norm_cfg is None:
            raise ConfigError(
                "SimpleFPN: norm_cfg is required (fpn1 has a norm; ViTDet: dict(type='LN2d', eps=1e-6))"
            )
        self.backbone_channel = c
        self.in_channels = list(in_channels)
        self.out_channels = out_channels
        self.num_ins = len(in_channels)
        self.num_outs = num_outs
        with home_scope(detection_parts_scope()):  # MMDetection's norm / conv types, whatever the caller's
            self.fpn1 = nn.Sequential(
                nn.ConvTranspose2d(c, c // 2, 2, 2),
                build_norm_layer(norm_cfg, c // 2)[1],
                nn.GELU(),
                nn.ConvTranspose2d(c // 2, c // 4, 2, 2),
            )
            self.fpn2 = nn.Sequential(nn.ConvTranspose2d(c, c // 2, 2, 2))
            self.fpn3 = nn.Sequential(nn.Identity())
            self.fpn4 = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2))
            conv = dict(conv_cfg=conv_cfg, norm_cfg=norm_cfg, act_cfg=act_cfg, inplace=False)
            self.lateral_convs = nn.ModuleList(ConvModule(ch, out_channels, 1, **conv) for ch in in_channels)
            self.fpn_convs = nn.ModuleList(
                ConvModule(out_channels, out_channels, 3, padding=1, **conv) for _ in in_channels
            )

    def forward(self, x: Tensor | Sequence[Tensor]) -> tuple[Tensor, ...]:
        """``[B, C, H, W]`` (or the backbone's 1-tuple) → ``num_outs`` maps of strides
        4, 8, 16, 32, 64, ... and ``out_channels`` channels."""
        if isinstance(x, (tuple, list)):
            if len(x) != 1:
                raise ValueError(f'SimpleFPN: expected one backbone map, got {len(x)}')
            x = x[0]
        branches = [self.fpn1(x), self.fpn2(x), self.fpn3(x), self.fpn4(x)]
        outs = [fpn(lat(b)) for b, lat, fpn in zip(branches, self.lateral_convs, self.fpn_convs, strict=True)]
        for _ in range(self.num_outs - self.num_ins):
            outs.append(F.max_pool2d(outs[-1], 1, stride=2))
        return tuple(outs)
