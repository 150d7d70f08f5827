"""Host attentions a family attention can replace, and how each maps.

One entry per host class: how to build the replacement from the host module (its sizes) and
how to read a state dict written by the host (the host's own weights, a zoo checkpoint) into the
replacement's keys. The replacement holds a family attention (``DnAAttention``,
``SoftmaxAttention``, ...) and only maps the host's call and weights onto it:

======================================  ================================  =======================
host                                    replacement (keys under ``P.``)   host keys it reads
======================================  ================================  =======================
timm ``Attention`` (ViT, DeiT, ...)     the family module (``qkv``,       same names
                                        ``proj``)
MMAction2 ``vit_mae.Attention``         the family module, ``qkv`` with   ``qkv.weight`` +
(VideoMAE / VideoMAE V2)                bias                              ``q_bias``, ``v_bias``
MMAction2 ``WindowAttention3D``         :class:`WindowAttention3DAdapter` ``qkv``, ``proj`` →
(Video Swin)                            (``attn.*``, the bias table)      ``attn.qkv``, ...
mmcv ``MultiheadAttention`` (DETR, any  ``TokenAttention`` (``attn.*``)   ``attn.in_proj_*``,
``BaseTransformerLayer``)                                                 ``attn.out_proj``
timm ``EvaAttention`` (EVA / EVA-02     :class:`EvaAttentionAdapter`      ``qkv.weight`` +
without rotary positions)               (``attn.*``)                      ``q_bias`` / ``v_bias``,
                                                                          or ``q/k/v_proj``
======================================  ================================  =======================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from ...converters import rename_mha
from ...errors import UnsupportedModelError
from ..attention import build_attention

StateDict = dict[str, Tensor]


@dataclass(frozen=True)
class HostSpec:
    """How one host attention class is replaced.

    Attributes:
        name: Readable name of the host (errors, docs).
        build: ``(host, attn_cfg, layer_index, num_layers) → replacement`` with the host's
            sizes, dropouts and scale (the swap then loads the host's weights through
            ``to_replacement``, as it loads a checkpoint).
        to_replacement: Host-layout keys of one attention (relative to it) → the
            replacement's keys; keys already in the replacement's layout pass unchanged.
        family_prefix: Where the family attention sits inside the replacement (``''`` or
            ``'attn.'``).
    """

    name: str
    build: Callable[[nn.Module, object, int, int], nn.Module]
    to_replacement: Callable[[StateDict], StateDict]
    family_prefix: str


def _family(
    host: nn.Module, attn_cfg, layer_index: int, num_layers: int, embed_dims: int, **kwargs
) -> nn.Module:
    """The family attention with the host's heads, dropouts and scale."""
    drops = dict(attn_drop=host.attn_drop.p, proj_drop=host.proj_drop.p)
    family = build_attention(attn_cfg, embed_dims, host.num_heads, layer_index, num_layers, **drops, **kwargs)
    family.scale = host.scale
    return family


def _refuse(host: nn.Module, what: str) -> None:
    raise UnsupportedModelError(
        f'{type(host).__module__}.{type(host).__name__}: {what} is not supported by the attention swap'
    )


def _refuse_extras(host: nn.Module, qk_norm: str, scale_norm: str) -> None:
    """Refuse a timm host's ``q_norm`` / ``k_norm``, ``norm`` (when not identities) or ``gate``."""
    if not isinstance(host.q_norm, nn.Identity) or not isinstance(host.k_norm, nn.Identity):
        _refuse(host, qk_norm)
    if not isinstance(getattr(host, 'norm', nn.Identity()), nn.Identity):
        _refuse(host, scale_norm)
    if getattr(host, 'gate', None) is not None:
        _refuse(host, 'a gated output')


# -- timm Attention -------------------------------------------------------------------------
def _build_timm(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    _refuse_extras(host, 'qk_norm / scale_norm', 'qk_norm / scale_norm')
    if host.qkv.in_features != host.proj.out_features or host.attn_dim != host.qkv.in_features:
        _refuse(host, 'attn_head_dim / dim_out different from the token width')
    bias = dict(qkv_bias=host.qkv.bias is not None, proj_bias=host.proj.bias is not None)
    return _family(host, attn_cfg, layer_index, num_layers, host.qkv.in_features, **bias)


def _qkv_bias(q_bias: Tensor, v_bias: Tensor) -> Tensor:
    """``[q_bias, 0, v_bias]`` (``[3C]``): the fused bias of hosts that learn no key bias
    (VideoMAE, EVA); a key bias would shift every logit of a row alike, so 0 is exact."""
    return torch.cat([q_bias, torch.zeros_like(q_bias), v_bias])


# -- MMAction2 VideoMAE Attention -----------------------------------------------------------
def _videomae_to_family(sd: StateDict) -> StateDict:
    """``qkv.weight`` (no bias) + ``q_bias`` / ``v_bias`` → ``qkv.weight`` / ``qkv.bias``."""
    if 'q_bias' not in sd:
        return sd
    out = {k: v for k, v in sd.items() if k not in ('q_bias', 'v_bias')}
    out['qkv.bias'] = _qkv_bias(sd['q_bias'], sd['v_bias'])
    return out


def _build_videomae(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    return _family(host, attn_cfg, layer_index, num_layers, host.embed_dims, qkv_bias=hasattr(host, 'q_bias'))


# -- MMAction2 WindowAttention3D (Video Swin) ------------------------------------------------
class WindowAttention3DAdapter(nn.Module):
    """Video Swin's window attention with a family attention inside.

    ``forward(x [B·nW, N, C], mask [nW, N, N] or None)`` as the host: the relative position
    bias ``table[index]`` (``[H, N, N]``) is an ``attn_bias`` (inside the formula: both DnA
    branches, ``s Q K^T + b``); the shifted-window mask (``0 / -100``) is an exclusion
    ``attn_mask`` (a key of another window leaves both branches). Keys:
    ``relative_position_bias_table``, ``relative_position_index`` (as the host), ``attn.*``.
    """

    def __init__(self, family: nn.Module, table: Tensor, index: Tensor, window_size: tuple[int, ...]) -> None:
        super().__init__()
        self.attn = family
        self.embed_dims, self.num_heads = family.embed_dims, family.num_heads
        self.window_size = window_size
        self.relative_position_bias_table = nn.Parameter(table.detach().clone())
        self.register_buffer('relative_position_index', index.clone())

    def forward(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
        n = x.shape[1]
        bias = self.relative_position_bias_table[self.relative_position_index[:n, :n]]  # [N, N, H]
        bias = bias.permute(2, 0, 1).unsqueeze(0)  # [1, H, N, N]
        if mask is not None:  # [nW, N, N], windows minor in the batch: [B·nW, 1, N, N]
            mask = mask.to(x.dtype).repeat(x.shape[0] // mask.shape[0], 1, 1).unsqueeze(1)
        return self.attn(x, attn_mask=mask, attn_bias=bias.to(x.dtype))


def _swin_to_adapter(sd: StateDict) -> StateDict:
    return {(f'attn.{k}' if k.startswith(('qkv.', 'proj.')) else k): v for k, v in sd.items()}


def _build_swin(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    family = _family(
        host, attn_cfg, layer_index, num_layers, host.embed_dims, qkv_bias=host.qkv.bias is not None
    )
    return WindowAttention3DAdapter(
        family, host.relative_position_bias_table, host.relative_position_index, tuple(host.window_size)
    )


# -- mmcv MultiheadAttention ----------------------------------------------------------------
def _mha_to_token(sd: StateDict) -> StateDict:
    return dict(rename_mha(sd))


def _build_mmcv_mha(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    from ..layers.video_attention import TokenAttention

    mha = host.attn
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.in_proj_bias is None:
        _refuse(host, 'nn.MultiheadAttention with kdim / vdim, add_bias_kv or bias=False')
    token = TokenAttention(
        host.embed_dims,
        host.num_heads,
        attn_cfg=attn_cfg,
        attn_drop=mha.dropout,
        proj_drop=host.proj_drop.p,
        batch_first=host.batch_first,
        layer_index=layer_index,
        num_layers=num_layers,
        dropout_layer=None,
    )
    token.dropout_layer = host.dropout_layer  # the host's module (DropPath, Dropout, Identity)
    return token


# -- timm EvaAttention (EVA without rope) ---------------------------------------------------
class EvaAttentionAdapter(nn.Module):
    """timm's ``EvaAttention`` call ``(x [B, N, C], rope=None, attn_mask=None,
    is_causal=False) → [B, N, C]`` onto a family attention (``attn.*``): ``attn_mask`` (``bool``
    True = attend, or float added, as SDPA) is the family's exclusion mask, ``is_causal`` ANDs
    a causal mask into it. The family has no rotary positions: an EVA built with
    ``use_rot_pos_emb=True`` is refused by the swap (its ``RotaryEmbedding*`` module), and a
    ``rope`` tensor reaching this module anyway is refused at call time."""

    def __init__(self, family: nn.Module) -> None:
        super().__init__()
        self.attn = family

    def forward(
        self,
        x: Tensor,
        rope: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        is_causal: bool = False,
    ) -> Tensor:
        if rope is not None:
            raise ValueError(
                'with_attention: this EVA passes rotary position embeddings (rope), which the '
                'swapped attention does not support; build the EVA with use_rot_pos_emb=False'
            )
        return self.attn(x, attn_mask=attn_mask, is_causal=is_causal)  # [B, N, C]


def _eva_to_adapter(sd: StateDict) -> StateDict:
    """EVA's fused ``qkv.weight`` + ``q_bias`` / ``v_bias`` (the key bias is a zero buffer) or
    separate ``q_proj`` / ``k_proj`` / ``v_proj`` → ``attn.qkv``; ``proj`` → ``attn.proj``."""
    if not any(k.startswith(('qkv.', 'q_proj.', 'q_bias', 'proj.')) for k in sd):
        return sd  # already the adapter's layout
    out = {f'attn.{k}': v for k, v in sd.items() if k.startswith('proj.')}
    if 'qkv.weight' in sd:
        out['attn.qkv.weight'] = sd['qkv.weight']
    else:
        out['attn.qkv.weight'] = torch.cat([sd['q_proj.weight'], sd['k_proj.weight'], sd['v_proj.weight']])
    q_bias = sd.get('q_bias', sd.get('q_proj.bias'))
    v_bias = sd.get('v_bias', sd.get('v_proj.bias'))
    if q_bias is not None:
        out['attn.qkv.bias'] = _qkv_bias(q_bias, v_bias)
    return out


def _build_eva(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    _refuse_extras(host, 'qk_norm', 'scale_norm (scale_attn_inner)')
    dim = host.proj.out_features
    if host.head_dim * host.num_heads != dim:
        _refuse(host, 'attn_head_dim different from the token width / num_heads')
    has_bias = host.q_bias is not None or (host.q_proj is not None and host.q_proj.bias is not None)
    bias = dict(qkv_bias=has_bias, proj_bias=host.proj.bias is not None)
    return EvaAttentionAdapter(_family(host, attn_cfg, layer_index, num_layers, dim, **bias))


def host_specs() -> dict[type, HostSpec]:
    """Host class → spec, for the host classes importable in this environment."""
    from mmaction.models.backbones.swin import WindowAttention3D
    from mmaction.models.backbones.vit_mae import Attention as VideoMAEAttention
    from mmcv.cnn.bricks.transformer import MultiheadAttention
    from timm.layers.attention import Attention as TimmAttention
    from timm.models.eva import EvaAttention

    return {
        TimmAttention: HostSpec('timm Attention', _build_timm, lambda sd: sd, ''),
        MultiheadAttention: HostSpec('mmcv MultiheadAttention', _build_mmcv_mha, _mha_to_token, 'attn.'),
        VideoMAEAttention: HostSpec('MMAction2 VideoMAE Attention', _build_videomae, _videomae_to_family, ''),
        WindowAttention3D: HostSpec('MMAction2 WindowAttention3D', _build_swin, _swin_to_adapter, 'attn.'),
        EvaAttention: HostSpec('timm EvaAttention (no rope)', _build_eva, _eva_to_adapter, 'attn.'),
    }
