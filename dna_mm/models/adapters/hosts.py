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
torch ``nn.MultiheadAttention``         its ``nn.MultiheadAttention``     ``in_proj_*``,
(torchvision ViT, CLIP blocks,          form (``qkv`` or ``q/k/v_proj``,  ``out_proj``, or
UniFormerV2's local blocks, ...)        ``proj``;                         ``q/k/v_proj_weight``
                                        :mod:`..layers.mha_attention`)
MMAction2 UniFormerV2 ``Extractor``     :class:`ExtractorAdapter`         ``attn.in_proj_*``,
(the global UniBlocks)                  (the form under ``attn.``)        ``attn.out_proj``
MMAction2 MViTv2                        its MViTv2 form (pooling, rel-    same names; DnA's
``MultiScaleAttention``                 pos; :mod:`..layers.mvit_         negative pooling
                                        attention`)                       generated
======================================  ================================  =======================

Blocks whose class name looks like attention but which reach their attention only through its
call are walked through (:func:`is_container`): CLIP's ``ResidualAttentionBlock``, OpenCLIP's
``AttentionalPooler``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from mmaction.models.backbones.uniformerv2 import Extractor
from mmengine.model import BaseModule
from torch import Tensor, nn

from ...converters import rename_mha
from ...errors import UnsupportedModelError
from ...family import NEGATIVE_KEYS, NegativeInit
from ..attention import DnAAttention, build_attention
from ..attention.builder import AttnCfg
from ..fitting import adapt_attentions

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
        fit: ``(family, weights, neg_init, source) → (weights, generated)``: fits the family
            attention's weights (relative to it) to its class; default
            :func:`~dna_mm.models.fitting.adapt_attentions` (for DnA from softmax weights:
            ``Q- = q_neg_scale · Q``, ``V- = v_neg_scale · V``, ``α = 0.5``, the scales of
            :class:`~dna_mm.family.NegativeInit`).
    """

    name: str
    build: Callable[[nn.Module, AttnCfg, int, int], nn.Module]
    to_replacement: Callable[[StateDict], StateDict]
    family_prefix: str
    fit: Callable[..., tuple[StateDict, list[str]]] = adapt_attentions


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
def _mha_keys(sd: StateDict) -> StateDict:
    """``nn.MultiheadAttention``'s keys (also under ``attn.``) → the family's: ``in_proj_*`` →
    ``qkv.*``, ``out_proj.*`` → ``proj.*``."""
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


# -- torch nn.MultiheadAttention ------------------------------------------------------------
def _torch_mha_form(
    host: nn.Module, attn_cfg, layer_index: int, num_layers: int, owner: nn.Module
) -> nn.Module:
    """The ``nn.MultiheadAttention`` form of the family with ``host``'s sizes (``kdim`` /
    ``vdim`` included), biases, dropout and layout; ``owner`` (the swapped module) is named in a
    refusal."""
    from ..layers.mha_attention import build_mha_attention

    if host.bias_k is not None or host.add_zero_attn:
        what = '' if owner is host else 'its nn.MultiheadAttention with '
        _refuse(owner, f'{what}add_bias_kv=True or add_zero_attn=True')
    return build_mha_attention(
        attn_cfg,
        host.embed_dim,
        host.num_heads,
        layer_index,
        num_layers,
        qkv_bias=host.in_proj_bias is not None,
        proj_bias=host.out_proj.bias is not None,
        attn_drop=host.dropout,
        batch_first=host.batch_first,
        kdim=host.kdim,
        vdim=host.vdim,
    )


def _build_torch_mha(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    return _torch_mha_form(host, attn_cfg, layer_index, num_layers, host)


def _torch_mha_keys(sd: StateDict) -> StateDict:
    """``nn.MultiheadAttention``'s keys → its family form's: packed ``in_proj_*`` → ``qkv.*``
    (:func:`_mha_keys`); separate ``{q,k,v}_proj_weight`` (``kdim`` / ``vdim`` ≠ ``E``) and the
    packed ``in_proj_bias`` → ``{q,k,v}_proj.weight`` / ``.bias``; ``out_proj.*`` → ``proj.*``."""
    if 'q_proj_weight' not in sd:
        return _mha_keys(sd)
    out = {f'{n}_proj.weight': sd[f'{n}_proj_weight'] for n in 'qkv'}
    if 'in_proj_bias' in sd:
        out.update({f'{n}_proj.bias': b for n, b in zip('qkv', sd['in_proj_bias'].chunk(3), strict=True)})
    out.update({'proj.' + k[len('out_proj.') :]: v for k, v in sd.items() if k.startswith('out_proj.')})
    return out


def _fit_torch_mha(
    module: nn.Module, sd: StateDict, neg_init: NegativeInit, source: str = 'checkpoint'
) -> tuple[StateDict, list[str]]:
    """Packed projections: :func:`adapt_attentions`. Separate ones (``q_proj``, ``k_proj``,
    ``v_proj``): the same rules on them — a DnA module from softmax weights gets ``q_neg =
    q_neg_scale · q_proj``, ``v_neg = v_neg_scale · v_proj`` (weights and biases) and ``α =
    0.5``; from DnA weights of a variant without ``Q-`` / ``V-`` (α), copies (1); a module
    without a negative branch drops one."""
    if module._qkv_same_embed_dim:
        return adapt_attentions(module, sd, neg_init, source=source)
    out = {k: v for k, v in sd.items() if k not in NEGATIVE_KEYS}
    if not isinstance(module, DnAAttention):
        return out, []
    from_softmax = not any(k in sd for k in NEGATIVE_KEYS)
    generated = []
    branches = (('q_neg', 'q_proj', neg_init.q_neg_scale), ('v_neg', 'v_proj', neg_init.v_neg_scale))
    for neg, pos, scale in branches:
        if getattr(module, neg) is None:
            continue
        for name in ('weight', 'bias'):
            key, src = f'{neg}.{name}', f'{pos}.{name}'
            if key in sd:
                out[key] = sd[key]
            elif src in sd:
                out[key] = sd[src] * (scale if from_softmax else 1.0)
                generated.append(key)
    if module.alpha is not None:
        if 'alpha' in sd:
            out['alpha'] = sd['alpha']
        else:
            dtype = sd['q_proj.weight'].dtype
            out['alpha'] = torch.full((module.num_heads,), 0.5 if from_softmax else 1.0, dtype=dtype)
            generated.append('alpha')
    return out, generated


# -- MMAction2 UniFormerV2 Extractor (global UniBlock) ----------------------------------------
class ExtractorAdapter(Extractor):
    """UniFormerV2's global UniBlock with its cross-attention through a family attention.

    MMAction2's ``Extractor.attention(x, y)`` slices its ``nn.MultiheadAttention``'s packed
    ``in_proj_weight`` by hand: ``Q`` from the query tokens ``x [1, N, C]`` (the temporal CLS
    token), ``K, V`` from ``y [T·L, N, C]`` (every token of the layer), ``softmax(s Q Kᵀ) V``,
    ``out_proj``: exactly ``nn.MultiheadAttention(x, y, y)``. Here ``attn`` is the family's
    ``nn.MultiheadAttention`` form and ``attention(x, y) = attn(x, y, y)``. The rest
    (``ln_1``, ``ln_2``, ``ln_3``, ``mlp``, ``drop_path``, the residuals) is the host's.
    """

    def __init__(self, host: nn.Module, attn: nn.Module) -> None:
        BaseModule.__init__(self, init_cfg=copy.deepcopy(host.init_cfg))
        self.drop_path = copy.deepcopy(host.drop_path)
        self.attn = attn
        for name in ('ln_1', 'mlp', 'ln_2', 'ln_3'):
            setattr(self, name, copy.deepcopy(getattr(host, name)))

    def attention(self, x: Tensor, y: Tensor) -> Tensor:
        return self.attn(x, y, y, need_weights=False)[0]  # [1, N, C]


def _build_extractor(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    return ExtractorAdapter(host, _torch_mha_form(host.attn, attn_cfg, layer_index, num_layers, host))


# -- MMAction2 MViTv2 MultiScaleAttention ---------------------------------------------------
def _build_mvit(host: nn.Module, attn_cfg, layer_index: int, num_layers: int) -> nn.Module:
    from ..layers.mvit_attention import build_mvit_attention

    if not isinstance(host.norm_q, nn.LayerNorm):
        _refuse(host, f'a pooling norm other than LayerNorm ({type(host.norm_q).__name__})')
    kernel = tuple(host.pool_q.kernel_size)
    if tuple(host.pool_q.padding) != tuple(k // 2 for k in kernel):
        _refuse(host, f'pooling padding {host.pool_q.padding} other than kernel // 2')
    lengths = None
    if host.rel_pos_embed:
        lengths = tuple(getattr(host, f'rel_pos_{a}').shape[0] for a in 'thw')
    family = build_mvit_attention(
        attn_cfg,
        host.out_dims,
        host.num_heads,
        layer_index,
        num_layers,
        in_dims=host.in_dims,
        pool_kernel=kernel,
        stride_q=tuple(host.pool_q.stride),
        stride_kv=tuple(host.pool_k.stride),
        norm_cfg=dict(type='LN', eps=host.norm_q.eps),
        rel_pos_lengths=lengths,
        residual_pooling=host.residual_pooling,
        with_cls_token=host.with_cls_token,
        qkv_bias=host.qkv.bias is not None,
        proj_bias=host.proj.bias is not None,
    )
    family.scale = host.scale
    return family


def _fit_mvit(
    module: nn.Module, sd: StateDict, neg_init: NegativeInit, source: str = 'checkpoint'
) -> tuple[StateDict, list[str]]:
    """DnA from softmax weights with the scales on the pooled ``Q-`` / ``V-``
    (:mod:`..layers.mvit_attention`): the pooling norms' affine scaled, the projections copied
    (:func:`adapt_attentions` with scales 1); from DnA weights of a variant without ``Q-`` /
    ``V-``, copies (exact). A softmax module drops a negative pooling."""
    from ..layers.mvit_attention import negative_pooling_from_positive

    from_softmax = not any(k in sd for k in NEGATIVE_KEYS)
    scales = neg_init if from_softmax and isinstance(module, DnAAttention) else NegativeInit(1.0, 1.0)
    sd, pooling = negative_pooling_from_positive(module, sd, scales)
    sd, generated = adapt_attentions(module, sd, NegativeInit(1.0, 1.0), source=source)
    return sd, generated + pooling


def _container_classes() -> tuple[type, ...]:
    from mmaction.models.backbones.uniformerv2 import ResidualAttentionBlock

    return (ResidualAttentionBlock,)


#: class names of blocks (OpenAI CLIP / OpenCLIP) that reach their ``attn``, an
#: ``nn.MultiheadAttention``, only by calling it
CONTAINER_NAMES = ('ResidualAttentionBlock', 'AttentionalPooler')


def is_container(module: nn.Module) -> bool:
    """A block whose class name looks like attention but which reaches its attention only by
    calling it, so the swap walks through it: MMAction2 UniFormerV2's
    ``ResidualAttentionBlock``, and any class named as in :data:`CONTAINER_NAMES` (CLIP's block,
    OpenCLIP's attentional pooler) whose ``attn`` is an ``nn.MultiheadAttention``."""
    if type(module) in _container_classes():
        return True
    return (
        type(module).__name__ in CONTAINER_NAMES
        and type(getattr(module, 'attn', None)) is nn.MultiheadAttention
    )


def host_specs() -> dict[type, HostSpec]:
    """Host class → spec, for the host classes importable in this environment."""
    from mmaction.models.backbones.mvit import MultiScaleAttention
    from mmaction.models.backbones.swin import WindowAttention3D
    from mmaction.models.backbones.vit_mae import Attention as VideoMAEAttention
    from mmcv.cnn.bricks.transformer import MultiheadAttention
    from timm.layers.attention import Attention as TimmAttention
    from timm.models.eva import EvaAttention

    return {
        TimmAttention: HostSpec('timm Attention', _build_timm, lambda sd: sd, ''),
        MultiheadAttention: HostSpec('mmcv MultiheadAttention', _build_mmcv_mha, _mha_keys, 'attn.'),
        VideoMAEAttention: HostSpec('MMAction2 VideoMAE Attention', _build_videomae, _videomae_to_family, ''),
        WindowAttention3D: HostSpec('MMAction2 WindowAttention3D', _build_swin, _swin_to_adapter, 'attn.'),
        EvaAttention: HostSpec('timm EvaAttention (no rope)', _build_eva, _eva_to_adapter, 'attn.'),
        nn.MultiheadAttention: HostSpec(
            'torch nn.MultiheadAttention', _build_torch_mha, _torch_mha_keys, '', _fit_torch_mha
        ),
        Extractor: HostSpec('MMAction2 UniFormerV2 Extractor', _build_extractor, _mha_keys, 'attn.'),
        MultiScaleAttention: HostSpec(
            'MMAction2 MViTv2 MultiScaleAttention', _build_mvit, lambda sd: sd, '', _fit_mvit
        ),
    }
