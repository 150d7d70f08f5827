"""ViTDet backbone (plain ViT for detection) with the attention chosen by config (default DnA).

The reference is MMDetection's ``projects/ViTDet`` ``ViT`` (a port of detectron2's
``modeling/backbone/vit.py``); this class keeps its arguments, defaults, parameter names and
behaviour, and adds ``attn_cfg``:

* patch embedding ``patch_embed.proj`` → tokens ``[B, H/16, W/16, C]``; ``pos_embed
  [1, (1 +) S², C]`` of the pre-training grid (``S = pretrain_img_size / patch_size``), CLS row
  dropped and resized bicubically to the token grid on every forward;
* ``blocks.{i}`` = ``norm1`` → attention → residual → ``norm2`` → ``mlp.fc1 / fc2`` → residual;
  blocks in ``window_block_indexes`` attend within ``window_size²`` windows (grid zero-padded
  after ``norm1``, no mask, cropped back), the others globally;
* relative positions (``use_rel_pos``): ``attn.rel_pos_h / rel_pos_w [2·S_attn − 1, d]``
  (``S_attn``: the window, or ``img_size / patch_size`` in global blocks), zero-initialised;
* output: one map ``[B, C, H/16, W/16]`` (a 1-tuple, what MMDetection necks take).

Pretrained weights: ``init_cfg=dict(type='Pretrained', checkpoint=FILE)`` (as the reference)
with MAE / timm ViTs, ``dna_vit_*``, the authors' DnA ViT or MMDetection ViTDet detectors
(:meth:`ViTDet.init_weights`).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import torch
import torch.utils.checkpoint as cp
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model import BaseModule
from mmengine.registry import MODELS
from torch import Tensor, nn

from ...converters.vitdet import to_vitdet
from ...errors import ConfigError
from ...family import NEGATIVE_INIT, NegativeInit, check_combine
from ..attention.builder import AttnCfg
from ..layers.positions import abs_pos_grid, resize_pos_embed, resize_rel_pos
from ..layers.vitdet_attention import vitdet_attention
from ..layers.window import window_partition, window_unpartition
from ..scopes import detection_parts_scope, home_scope
from .pretrained import ModelKeys, load_pretrained


class PatchEmbed(nn.Module):
    """``[B, 3, H, W]`` → ``[B, H/p, W/p, C]`` by a ``p×p`` stride-``p`` convolution ``proj``."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x).permute(0, 2, 3, 1)


class Mlp(nn.Module):
    """``fc2(act(fc1(x)))``, hidden width ``mlp_ratio · C`` (the reference's names)."""

    def __init__(self, dim: int, hidden: int, act_cfg: dict) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = build_activation_layer(act_cfg)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """One ViTDet block on a ``[B, H, W, C]`` grid; ``window_size`` 0 = global attention."""

    def __init__(
        self,
        attn: nn.Module,
        dim: int,
        mlp_ratio: float,
        drop_path: float,
        norm_cfg: dict,
        act_cfg: dict,
        window_size: int,
    ) -> None:
        super().__init__()
        self.norm1 = build_norm_layer(norm_cfg, dim)[1]
        self.attn = attn
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.norm2 = build_norm_layer(norm_cfg, dim)[1]
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act_cfg)
        self.window_size = window_size

    def forward(self, x: Tensor) -> Tensor:
        shortcut = x
        x = self.norm1(x)
        if self.window_size > 0:
            hw = (x.shape[1], x.shape[2])
            x, padded_hw = window_partition(x, self.window_size)  # [B·nW, w, w, C]
            x = window_unpartition(self.attn(x), self.window_size, padded_hw, hw)
        else:
            x = self.attn(x)
        x = shortcut + self.drop_path(x)
        return x + self.drop_path(self.mlp(self.norm2(x)))


@MODELS.register_module()
class ViTDet(BaseModule):
    """Plain ViT backbone of ViTDet with configurable attention (default DnA Q±V±).

    Args:
        img_size: Input size the global blocks' rel-pos tables are made for.
        patch_size: Patch side (stride 16 output for 16).
        in_chans: Input channels.
        embed_dim: Token width ``C``.
        depth: Number of blocks.
        num_heads: Attention heads.
        mlp_ratio: MLP hidden width / ``C``.
        qkv_bias: Bias in the query / key / value projections (and DnA's ``q_neg`` / ``v_neg``).
        drop_path_rate: Stochastic depth of the last block (linear from 0).
        norm_cfg: Block norms (mmcv config; the reference: ``LN``, eps 1e-6).
        act_cfg: MLP activation.
        use_abs_pos: Learn ``pos_embed`` (pre-training grid, resized on the fly).
        use_rel_pos: Decomposed relative positions in every block.
        rel_pos_zero_init: Zero-initialised rel-pos tables.
        window_size: Window side of the blocks in ``window_block_indexes`` (0: all global).
        window_block_indexes: Blocks with window attention (the others are global).
        pretrain_img_size: Image size of the pre-training ``pos_embed`` grid.
        pretrain_use_cls_token: ``pos_embed`` has a CLS row (dropped in the forward).
        init_cfg: ``dict(type='Pretrained', checkpoint=FILE)`` loads FILE by
            :func:`load_pretrained`; ``None``: truncated-normal init (std 0.02).
        attn_cfg: Attention of every block: ``'dna' | 'softmax' | 'diff' | 'cog'`` or a config
            such as ``dict(type='DnAAttention', variant='qpm_v')``. Relative positions are
            defined for softmax and DnA only.
        with_cp: Activation checkpointing per block while training (recompute in backward).
        q_neg_scale, v_neg_scale: DnA branch generated from a softmax checkpoint
            (``Q- = q_neg_scale · Q``, ``V- = v_neg_scale · V``;
            default: the authors', :data:`~dna_mm.family.NEGATIVE_INIT`).
        pretrained_combine: Sign of the branch sum in the authors' checkpoint (``'add'`` /
            ``'sub'``, see :func:`dna_mm.converters.official_to_dna_mm`).
    """

    def __init__(
        self,
        img_size: int = 1024,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        drop_path_rate: float = 0.0,
        norm_cfg: dict = dict(type='LN', eps=1e-6),  # noqa: B006 (the reference's; builders copy it)
        act_cfg: dict = dict(type='GELU'),  # noqa: B006 (the reference's; builders copy it)
        use_abs_pos: bool = True,
        use_rel_pos: bool = False,
        rel_pos_zero_init: bool = True,
        window_size: int = 0,
        window_block_indexes: Sequence[int] = (0, 1, 3, 4, 6, 7, 9, 10),
        pretrain_img_size: int = 224,
        pretrain_use_cls_token: bool = True,
        init_cfg: Optional[dict] = None,
        attn_cfg: AttnCfg = 'dna',
        with_cp: bool = False,
        q_neg_scale: float = NEGATIVE_INIT.q_neg_scale,
        v_neg_scale: float = NEGATIVE_INIT.v_neg_scale,
        pretrained_combine: str = 'add',
    ) -> None:
        super().__init__(init_cfg=init_cfg)
        bad = [i for i in window_block_indexes if not 0 <= i < depth]
        if bad and window_size > 0:
            raise ConfigError(f'ViTDet: window_block_indexes {bad} are outside 0..{depth - 1}')
        if window_size < 0 or img_size % patch_size or pretrain_img_size % patch_size:
            raise ConfigError(
                f'ViTDet: need window_size >= 0 and img_size ({img_size}) and '
                f'pretrain_img_size ({pretrain_img_size}) multiples of patch_size '
                f'({patch_size})'
            )
        check_combine(pretrained_combine, 'ViTDet: pretrained_combine')
        self.patch_size = patch_size
        self.embed_dim = embed_dim
        self.depth = depth
        self.pretrain_use_cls_token = pretrain_use_cls_token
        self.pretrain_grid = pretrain_img_size // patch_size
        self.with_cp = with_cp
        self.neg_init = NegativeInit(q_neg_scale, v_neg_scale)
        self.pretrained_combine = pretrained_combine
        self.patch_embed = PatchEmbed(patch_size, in_chans, embed_dim)
        positions = self.pretrain_grid**2 + int(pretrain_use_cls_token)
        self.pos_embed = nn.Parameter(torch.zeros(1, positions, embed_dim)) if use_abs_pos else None
        grid = img_size // patch_size
        dpr = torch.linspace(0, drop_path_rate, depth).tolist()
        blocks = []
        for i in range(depth):
            window = window_size if i in window_block_indexes else 0
            attn = vitdet_attention(
                attn_cfg,
                embed_dim,
                num_heads,
                layer_index=i,
                num_layers=depth,
                use_rel_pos=use_rel_pos,
                rel_pos_zero_init=rel_pos_zero_init,
                input_size=(window, window) if window else (grid, grid),
                qkv_bias=qkv_bias,
            )
            with home_scope(detection_parts_scope()):  # MMDetection's norm / activation types, or the root's
                blocks.append(Block(attn, embed_dim, mlp_ratio, dpr[i], norm_cfg, act_cfg, window))
        self.blocks = nn.ModuleList(blocks)
        self._init_weights()

    def _init_weights(self) -> None:
        """The reference's init: ``pos_embed`` and every ``Linear`` truncated normal (std 0.02),
        biases 0, LayerNorms 1 / 0; DnA's ``α`` keeps its start, rel-pos tables their own init."""
        if self.pos_embed is not None:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def init_weights(self) -> None:
        """Without ``init_cfg``: the init of :meth:`_init_weights` (done at construction, kept).
        With ``init_cfg=dict(type='Pretrained', checkpoint=FILE)``: :func:`load_pretrained`
        (parameters the file lacks keep that init; the reference leaves them as PyTorch made
        them)."""
        if not self.init_cfg:
            return
        if self.init_cfg.get('type') != 'Pretrained' or 'checkpoint' not in self.init_cfg:
            raise ConfigError(
                f"ViTDet: init_cfg must be dict(type='Pretrained', checkpoint=FILE), got {self.init_cfg}"
            )
        load_pretrained(self, self.init_cfg['checkpoint'], self.neg_init, self.pretrained_combine)
        self._is_init = True

    def pretrained_state_dict(self, checkpoint: Mapping, combine: str) -> ModelKeys:
        """``checkpoint`` (any layout :func:`~dna_mm.converters.vitdet.to_vitdet` reads) in this
        backbone's keys: ``pos_embed`` resized to the pre-training grid (CLS row kept, dropped or
        added as zeros), every rel-pos table to the model's length. The rel-pos tables may be
        absent (an ImageNet ViT / MAE file has none): they keep their init (reported missing)."""
        sd, layout, unused = to_vitdet(checkpoint, combine)
        own = self.state_dict()
        resized = []
        pos, mine = sd.get('pos_embed'), own.get('pos_embed')
        if pos is not None and mine is not None and pos.dim() == 3 and pos.shape[-1] == mine.shape[-1]:
            if pos.shape != mine.shape:
                sd['pos_embed'] = resize_pos_embed(pos, self.pretrain_grid, self.pretrain_use_cls_token)
                resized.append(f'pos_embed {list(pos.shape)} -> {list(sd["pos_embed"].shape)}')
        rel_pos = {k for k in own if k.endswith(('.rel_pos_h', '.rel_pos_w'))}
        for key, table in list(sd.items()):
            if key in rel_pos and table.shape != own[key].shape and table.shape[1:] == own[key].shape[1:]:
                sd[key] = resize_rel_pos(table, own[key].shape[0])
                resized.append(f'{key} {list(table.shape)} -> {list(sd[key].shape)}')
        notes = dict(resized=('resized', resized), unused=('not used by a detection backbone', unused))
        return ModelKeys(sd, layout, notes, self_init=rel_pos)

    def forward(self, x: Tensor) -> tuple[Tensor]:
        """``[B, 3, H, W]`` → ``([B, C, H/p, W/p],)``."""
        x = self.patch_embed(x)  # [B, h, w, C]
        if self.pos_embed is not None:
            x = x + abs_pos_grid(self.pos_embed, self.pretrain_use_cls_token, (x.shape[1], x.shape[2]))
        for block in self.blocks:
            if self.with_cp and self.training and x.requires_grad:
                x = cp.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return (x.permute(0, 3, 1, 2).contiguous(),)


__all__ = ['ViTDet', 'Block', 'PatchEmbed', 'Mlp', 'load_pretrained']
