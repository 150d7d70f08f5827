"""TimeSformer whose attention is chosen by config (DnA, softmax, ...): ``attn_cfg``.

Subclass of MMAction2's :class:`~mmaction.models.backbones.TimeSformer`: same constructor
arguments and parameter names outside the attention modules, so a stock TimeSformer state
dict converts with :func:`dna_mm.converters.softmax_to_dna` (after
:func:`~dna_mm.converters.rename_mha`) and loads with ``strict=True``.
"""

from __future__ import annotations

from typing import Mapping, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from einops import rearrange
from mmaction.models.backbones import TimeSformer
from mmaction.models.common.transformer import (
    DividedSpatialAttentionWithNorm,
    DividedTemporalAttentionWithNorm,
)
from mmcv.cnn.bricks.transformer import MultiheadAttention
from mmengine import ConfigDict
from mmengine.model.weight_init import trunc_normal_
from mmengine.registry import MODELS
from timm.layers import resample_abs_pos_embed
from torch import nn

from ...converters import to_timesformer
from ...converters.timesformer import IMAGE_LAYOUTS
from ...errors import ConfigError
from ...family import NEGATIVE_INIT, NegativeInit, check_combine
from ..attention.builder import AttnCfg, deprecated_key
from ..layers.video_attention import from_divided, from_host
from ..scopes import home_scope
from .pretrained import ModelKeys, load_pretrained


def _layer_cfgs(
    attention_type: str,
    embed_dims: int,
    num_heads: int,
    num_frames: int,
    num_layers: int,
    drop_path_rate: float,
    attn_drop: float,
) -> ConfigDict:
    """MMAction2's default layer configs, with ``drop_path_rate`` and ``attn_drop``."""
    dpr = np.linspace(0, drop_path_rate, num_layers)
    ln = dict(type='LN', eps=1e-6)
    layers = []
    for i in range(num_layers):
        drop = dict(type='DropPath', drop_prob=float(dpr[i]))
        attn = dict(embed_dims=embed_dims, num_heads=num_heads, attn_drop=attn_drop, dropout_layer=drop)
        ffn = dict(
            type='FFN',
            embed_dims=embed_dims,
            feedforward_channels=embed_dims * 4,
            num_fcs=2,
            act_cfg=dict(type='GELU'),
            dropout_layer=drop,
        )
        if attention_type == 'divided_space_time':  # each step brings its own pre-norm
            steps = ('DividedTemporalAttentionWithNorm', 'DividedSpatialAttentionWithNorm')
            attn.update(num_frames=num_frames, norm_cfg=ln)
            layer = dict(
                attn_cfgs=[dict(attn, type=t) for t in steps],
                ffn_cfgs=dict(ffn, type='FFNWithNorm', norm_cfg=ln),
                operation_order=('self_attn', 'self_attn', 'ffn'),
            )
        else:
            layer = dict(
                attn_cfgs=[dict(attn, type='MultiheadAttention', batch_first=True)],
                ffn_cfgs=ffn,
                operation_order=('norm', 'self_attn', 'norm', 'ffn'),
                norm_cfg=ln,
                batch_first=True,
            )
        layers.append(dict(type='BaseTransformerLayer', **layer))
    return ConfigDict(type='TransformerLayerSequence', transformerlayers=layers, num_layers=num_layers)


def give_members(layers: nn.ModuleList, temporal_attn: AttnCfg, spatial_attn: AttnCfg) -> None:
    """Every attention of MMAction2's TimeSformer ``layers`` (in place) replaced by its form,
    layer ``i`` of ``len(layers)``, through the one route into each host: the form builder that
    ``with_attention``'s host table names for its class
    (:data:`dna_mm.models.adapters.hosts.HOSTS`). A divided step becomes
    :func:`~dna_mm.models.layers.video_attention.from_divided`'s (MMAction2's step, its
    ``nn.MultiheadAttention`` the member in that module's form; ``temporal_attn`` in the
    temporal step, ``spatial_attn`` in the spatial one), an mmcv ``MultiheadAttention`` of the
    joint / space-only layers :func:`~dna_mm.models.layers.video_attention.from_host`'s
    (``spatial_attn``). An attention already of the family (a ``TokenAttention`` in explicit
    layer configs, a step whose ``attn`` is a member) is kept."""
    divided = (DividedTemporalAttentionWithNorm, DividedSpatialAttentionWithNorm)
    for i, layer in enumerate(layers):
        for j, step in enumerate(layer.attentions):
            if isinstance(step, divided) and isinstance(step.attn, nn.MultiheadAttention):
                cfg = temporal_attn if isinstance(step, DividedTemporalAttentionWithNorm) else spatial_attn
                layer.attentions[j] = from_divided(step, cfg, i, len(layers))
            elif type(step) is MultiheadAttention:
                layer.attentions[j] = from_host(step, spatial_attn, i, len(layers))


STEPS = ('temporal', 'spatial')


class TimeSformerArgumentError(ConfigError, AssertionError):
    """An argument MMAction2's ``TimeSformer`` asserts on (an unknown ``attention_type``, a
    ``transformer_layers`` that is not a config): a :class:`~dna_mm.errors.ConfigError` (one line
    from the tools, a ``ValueError``) and the ``AssertionError`` MMAction2 raises for it, so code
    and tests written against either catch it."""


def step_attentions(
    attn_cfg: Union[AttnCfg, Mapping[str, AttnCfg]],
    temporal_attn: Optional[AttnCfg] = None,
    spatial_attn: Optional[AttnCfg] = None,
) -> tuple[AttnCfg, AttnCfg]:
    """``attn_cfg`` → the ``(temporal, spatial)`` attentions: one attention (a short name or a
    config with ``type``) for both steps, or ``dict(temporal=..., spatial=...)`` (a step left
    out: ``'dna'``). The deprecated ``temporal_attn`` / ``spatial_attn`` replace their step,
    with a ``FutureWarning``."""
    if isinstance(attn_cfg, Mapping) and 'type' not in attn_cfg:
        unknown = sorted(set(attn_cfg) - set(STEPS))
        if unknown:
            raise ConfigError(
                "DnATimeSformer: attn_cfg is an attention ('dna', dict(type='DnAAttention', ...)) or "
                f'dict(temporal=..., spatial=...); got the keys {unknown}'
            )
        steps = [attn_cfg.get(step, 'dna') for step in STEPS]
    elif isinstance(attn_cfg, Mapping) and set(STEPS) & set(attn_cfg):
        raise ConfigError(
            f'DnATimeSformer: attn_cfg has a type ({attn_cfg["type"]!r}) and per-step keys '
            f'{sorted(set(STEPS) & set(attn_cfg))} (merged onto a base config? use _delete_=True)'
        )
    else:
        steps = [attn_cfg, attn_cfg]
    for i, (step, old) in enumerate(zip(STEPS, (temporal_attn, spatial_attn), strict=True)):
        if old is not None:
            deprecated_key('DnATimeSformer', f'{step}_attn', f'attn_cfg=dict({step}=...)')
            steps[i] = old
    return steps[0], steps[1]


@MODELS.register_module()
class DnATimeSformer(TimeSformer):
    """TimeSformer with configurable attention (default: DnA Q±V± in both temporal and spatial
    attention of every divided space-time block).

    Args:
        num_frames, img_size, patch_size, embed_dims, num_heads, num_transformer_layers,
            in_channels, dropout_ratio, attention_type, norm_cfg: As MMAction2's TimeSformer.
        attn_cfg: The attention of every block: a short name (``'dna' | 'softmax' | 'diff' |
            'cog'``) or a config such as ``dict(type='DnAAttention', variant='qpm_v')``; or
            one per step of a divided space-time block, ``dict(temporal=..., spatial=...)``
            (``joint_space_time`` / ``space_only`` have the spatial step only).
        temporal_attn, spatial_attn: Deprecated aliases of ``attn_cfg=dict(temporal=...)`` /
            ``dict(spatial=...)`` (a ``FutureWarning``; removed in the next release).
        drop_path_rate: Stochastic-depth rate of the last layer (linear from 0; MMAction2: 0.1).
        attn_drop: Dropout on the attention maps.
        pretrained: Local checkpoint to initialise from: MMAction2's ImageNet ViT file, a timm
            ViT, the authors' DnA ViT / TimeSformer, or a softmax / DnA TimeSformer (MMAction2
            or dna_mm). DnA attentions missing a negative branch get one
            (``Q- = q_neg_scale · Q``, ``V- = v_neg_scale · V``, ``α`` of ``NEGATIVE_INIT``).
        q_neg_scale, v_neg_scale: Scales of that initialisation (default: the authors',
            :data:`~dna_mm.family.NEGATIVE_INIT`).
        pretrained_combine: Sign of the branch sum in the authors' checkpoint ``pretrained``
            (``'add'``: their TimeSformer fork and ``vit/dna_models.py``; ``'sub'``:
            ``vit/dna.py``; VisCoP files hold only probe cross-attentions, no TimeSformer);
            see :func:`dna_mm.converters.official_to_dna_mm`.
        transformer_layers: Explicit layer configs (MMAction2's; overrides ``drop_path_rate``
            and ``attn_drop``); their attentions get ``attn_cfg`` as the default layers'.
        with_cp: Activation checkpointing while training: each transformer layer keeps only its
            input, and its activations are recomputed in the backward pass (one more forward
            of the layers, far less memory; gradients and drop-path masks unchanged).
    """

    def __init__(
        self,
        num_frames: int,
        img_size: int,
        patch_size: int,
        pretrained: Optional[str] = None,
        embed_dims: int = 768,
        num_heads: int = 12,
        num_transformer_layers: int = 12,
        in_channels: int = 3,
        dropout_ratio: float = 0.0,
        transformer_layers: Optional[Union[dict, list]] = None,
        attention_type: str = 'divided_space_time',
        norm_cfg: dict = dict(type='LN', eps=1e-6),  # noqa: B006 (mmcv style; copied by build_norm_layer)
        attn_cfg: Union[AttnCfg, Mapping[str, AttnCfg]] = 'dna',
        temporal_attn: Optional[AttnCfg] = None,
        spatial_attn: Optional[AttnCfg] = None,
        drop_path_rate: float = 0.1,
        attn_drop: float = 0.0,
        q_neg_scale: float = NEGATIVE_INIT.q_neg_scale,
        v_neg_scale: float = NEGATIVE_INIT.v_neg_scale,
        pretrained_combine: str = 'add',
        with_cp: bool = False,
        **kwargs,
    ) -> None:
        if attention_type not in self.supported_attention_types:
            raise TimeSformerArgumentError(
                f'DnATimeSformer: attention_type must be one of {self.supported_attention_types}, '
                f'got {attention_type!r}'
            )
        if not (transformer_layers is None or isinstance(transformer_layers, (dict, list))):
            raise TimeSformerArgumentError(
                'DnATimeSformer: transformer_layers must be a layer config (a dict or a list of them) or '
                f'None, got {type(transformer_layers).__name__} {transformer_layers!r}'
            )
        temporal_attn, spatial_attn = step_attentions(attn_cfg, temporal_attn, spatial_attn)
        if transformer_layers is None:
            transformer_layers = _layer_cfgs(
                attention_type,
                embed_dims,
                num_heads,
                num_frames,
                num_transformer_layers,
                drop_path_rate,
                attn_drop,
            )
        with home_scope('mmaction'):  # MMAction2's layers, whatever the caller's scope
            super().__init__(
                num_frames,
                img_size,
                patch_size,
                pretrained=pretrained,
                embed_dims=embed_dims,
                num_heads=num_heads,
                num_transformer_layers=num_transformer_layers,
                in_channels=in_channels,
                dropout_ratio=dropout_ratio,
                transformer_layers=transformer_layers,
                attention_type=attention_type,
                norm_cfg=norm_cfg,
                **kwargs,
            )
        give_members(self.transformer_layers.layers, temporal_attn, spatial_attn)
        check_combine(pretrained_combine)
        self.neg_init = NegativeInit(q_neg_scale, v_neg_scale)
        self.pretrained_combine = pretrained_combine
        self.with_cp = with_cp

    def init_weights(self, pretrained: Optional[str] = None) -> None:
        """Truncated-normal CLS / position embeddings, then the optional checkpoint."""
        trunc_normal_(self.pos_embed, std=0.02)
        trunc_normal_(self.cls_token, std=0.02)
        if pretrained:
            self.pretrained = pretrained
        if isinstance(self.pretrained, str):
            load_pretrained(self, self.pretrained, self.neg_init, self.pretrained_combine)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, C, T, H, W]`` → the CLS token ``[B, embed_dims]``: MMAction2's forward, with
        ``with_cp`` its transformer layers checkpointed while training with gradients."""
        if not (self.with_cp and self.training and torch.is_grad_enabled()):
            return super().forward(x)
        batches = x.shape[0]
        x = self.patch_embed(x)  # [B*T, P, C]
        x = torch.cat((self.cls_token.expand(x.size(0), -1, -1), x), dim=1)
        x = self.drop_after_pos(x + self.pos_embed)  # [B*T, 1+P, C]
        if self.attention_type != 'space_only':
            cls_tokens = x[:batches, 0, :].unsqueeze(1)
            x = rearrange(x[:, 1:, :], '(b t) p m -> (b p) t m', b=batches)
            x = self.drop_after_time(x + self.time_embed)
            x = rearrange(x, '(b p) t m -> b (p t) m', b=batches)
            x = torch.cat((cls_tokens, x), dim=1)  # [B, 1+P*T, C]
        for layer in self.transformer_layers.layers:  # recomputed in backward
            x = cp.checkpoint(layer, x, None, None, use_reentrant=False)
        if self.attention_type == 'space_only':
            x = x.view(-1, self.num_frames, *x.size()[-2:]).mean(1)
        return self.norm(x)[:, 0]

    def pretrained_state_dict(self, checkpoint: Mapping, combine: str) -> ModelKeys:
        """``checkpoint`` (any layout :func:`~dna_mm.converters.to_timesformer` reads) in this
        model's keys, ``pos_embed`` resampled to its grid and ``time_embed`` to its frames. An
        image ViT has no ``time_embed`` / ``temporal_fc``: they keep their initialisation, as in
        MMAction2 (noted ``video_init``)."""
        sd, layout = to_timesformer(checkpoint, self.attention_type, combine)
        resized = []
        pos = sd.get('pos_embed')
        if pos is not None and pos.shape != self.pos_embed.shape:
            pe = self.patch_embed
            grid = [s // p for s, p in zip(pe.img_size, pe.patch_size, strict=True)]
            sd['pos_embed'] = resample_abs_pos_embed(pos, grid, num_prefix_tokens=1)
            resized.append(f'pos_embed {list(pos.shape)} -> {list(sd["pos_embed"].shape)}')
        time = sd.get('time_embed')
        if time is not None and hasattr(self, 'time_embed') and time.shape != self.time_embed.shape:
            sd['time_embed'] = F.interpolate(
                time.transpose(1, 2), size=self.num_frames, mode='linear', align_corners=False
            ).transpose(1, 2)
            resized.append(f'time_embed {list(time.shape)} -> {list(sd["time_embed"].shape)}')
        image = layout in IMAGE_LAYOUTS  # an image model never had the temporal parts
        temporal = [k for k in self.state_dict() if k == 'time_embed' or '.temporal_fc.' in k]
        video_init = sorted(k for k in temporal if image and k not in sd)
        video = ('not in an image model, kept at init', video_init)
        return ModelKeys(sd, layout, dict(resized=('resized', resized), video_init=video))
