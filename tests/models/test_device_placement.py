"""Device placement of every model dna_mm ships, checked without a GPU.

* ``meta``: parameters, buffers and inputs on the ``meta`` device, forward and backward under
  :class:`DeviceGuard`, which fails on the first operation whose result lies on another device
  (a tensor made in a forward without ``device=``, e.g. ``torch.arange(n)``: on a GPU that is a
  host tensor, a copy and a sync, or a device-mismatch error; indexing a GPU tensor with it even
  runs silently, so a plain meta run alone would not catch every case).
* fake CUDA: the same models as ``FakeTensorMode`` CUDA tensors, a forward under bf16 autocast
  (set by ``torch.set_autocast_*``: ``torch.autocast('cuda')`` disables itself without a GPU),
  the same guard, and every ``scaled_dot_product_attention`` call checked by
  :func:`sdpa_problems`: ``q``, ``k``, ``v`` share a dtype (bf16 here) and have a unit last
  stride, and a mask is ``bool`` or ``q``'s dtype, so the fused SDPA kernels stay eligible.

Models: the attention family (every type and DnA variant, self and cross, masks, biases, the
eager ``return_attn`` path), ``DnATimeSformer`` (divided, joint, space-only), the ViTDet
backbone + SimpleFPN (padded windows, rel-pos, ``with_cp``), ``dna_vit_*`` and the models
``with_attention`` swaps (timm ViT / EVA, VideoMAE, Video Swin, DETR layers, MMAction2's joint
and space-only TimeSformer, torchvision's ViT, MMAction2's UniFormerV2 and MViTv2). Tiny
configurations throughout.
"""

from __future__ import annotations

import contextlib
import functools
import os
import traceback
from typing import Callable, Iterator, Optional

import pytest
import timm
import torch
import torch.nn.functional as F
from conftest import tiny_backbone
from mmengine.registry import MODELS, init_default_scope
from torch import Tensor, nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import dna_mm  # noqa: F401  (registers the models)
from dna_mm.models import attention as family
from dna_mm.models.adapters import swap_attention
from dna_mm.models.attention import DNA_VARIANTS, AttentionBase

B, M, N, C, HEADS = 2, 5, 7, 16, 2
_TORCH_DIR = os.path.dirname(torch.__file__)


# -- the checks -------------------------------------------------------------------------------
def _caller() -> str:
    """``file:line (code)`` of the innermost frame outside torch and this file."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not frame.filename.startswith(_TORCH_DIR) and frame.filename != __file__:
            return f'{frame.filename}:{frame.lineno} ({frame.line})'
    return '<unknown>'


class DeviceGuard(TorchDispatchMode):
    """Fails on the first operation whose tensor result is not on ``device_type``."""

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self.device_type = device_type
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        for t in tree_leaves(out):
            if isinstance(t, Tensor) and t.device.type != self.device_type:
                raise AssertionError(
                    f'{func} made a {t.device.type} tensor {list(t.shape)} in a '
                    f'{self.device_type} model, at {_caller()}'
                )
        return out


def sdpa_problems(q: Tensor, k: Tensor, v: Tensor, attn_mask: Optional[Tensor]) -> list[str]:
    """What would keep one SDPA call off the fused kernels (empty: nothing)."""
    problems = []
    if not q.dtype == k.dtype == v.dtype:
        problems.append(f'q / k / v dtypes {q.dtype} / {k.dtype} / {v.dtype}')
    problems += [
        f'{name} has last stride {t.stride(-1)}'
        for name, t in zip('qkv', (q, k, v), strict=True)
        if t.stride(-1) != 1
    ]
    if attn_mask is not None and attn_mask.dtype not in (torch.bool, q.dtype):
        problems.append(f'mask of dtype {attn_mask.dtype} with {q.dtype} queries')
    devices = {t.device for t in (q, k, v, attn_mask) if t is not None}
    if len(devices) > 1:
        problems.append(f'inputs on {sorted(map(str, devices))}')
    return problems


@contextlib.contextmanager
def sdpa_recorder(monkeypatch) -> Iterator[list[tuple[str, Tensor, list[str]]]]:
    """Wrap ``F.scaled_dot_product_attention``: every call is recorded as ``(caller, q,
    problems)`` and then run."""
    calls: list[tuple[str, Tensor, list[str]]] = []
    real = F.scaled_dot_product_attention

    def checked(q, k, v, attn_mask=None, *args, **kwargs):
        calls.append((_caller(), q, sdpa_problems(q, k, v, attn_mask)))
        return real(q, k, v, attn_mask, *args, **kwargs)

    monkeypatch.setattr(F, 'scaled_dot_product_attention', checked)
    yield calls


@contextlib.contextmanager
def cuda_bf16_autocast() -> Iterator[None]:
    """bf16 autocast for CUDA tensors, also where no GPU is present."""
    enabled, dtype = torch.is_autocast_enabled('cuda'), torch.get_autocast_dtype('cuda')
    torch.set_autocast_dtype('cuda', torch.bfloat16)
    torch.set_autocast_enabled('cuda', True)
    try:
        yield
    finally:
        torch.set_autocast_enabled('cuda', enabled)
        torch.set_autocast_dtype('cuda', dtype)


# -- the models ----------------------------------------------------------------------------------
# A case: (build, inputs, run). ``build()`` makes the model on the CPU; ``inputs(device)`` the
# input tensors on ``device``; ``run(model, inputs)`` the forward, a tensor or a tuple of them.
Case = tuple[Callable[[], nn.Module], Callable[[str], tuple], Callable]


def _call(model: nn.Module, inputs: tuple):
    return model(*inputs)


def _attention_calls(model: AttentionBase, inputs: tuple) -> list[Tensor]:
    """Every way the family is called: plain, bool / float masks, causal, biases (a pair for
    DnA), values apart from keys (cross), and the eager path (``return_attn``)."""
    x, ctx, val, bool_mask, bias = inputs
    cross = isinstance(model, family.base.CrossAttentionMixin)
    one_map = not isinstance(model, family.DnAAttention)
    args = (x, ctx) if cross else (x,)
    n = ctx.shape[1] if cross else x.shape[1]
    bool_mask, bias = bool_mask[..., :n], bias[..., :n]
    float_mask = torch.zeros_like(bias).masked_fill(~bool_mask, -1e4)
    outs = [
        model(*args),
        model(*args, attn_mask=bool_mask),
        model(*args, attn_mask=float_mask),
        model(*args, attn_bias=bias, attn_mask=bool_mask),
        model(*args, attn_bias=bias if one_map else (bias, -bias)),
        model(*args, return_attn=True, attn_mask=bool_mask, attn_bias=bias)[0],
    ]
    if cross:
        outs.append(model(x, ctx, value=val))
    else:
        outs.append(model(x, is_causal=True))
    return outs


def _attention_inputs(device: str) -> tuple:
    bool_mask = torch.ones(B, 1, M, N, dtype=torch.bool, device=device)
    bool_mask[0, :, :, -2:] = False  # the last two keys of the first sample left out
    return (
        torch.randn(B, M, C, device=device),
        torch.randn(B, N, C, device=device),
        torch.randn(B, N, C, device=device),
        bool_mask,
        torch.randn(B, HEADS, M, N, device=device),
    )


ATTENTIONS = {
    'softmax': dict(type='SoftmaxAttention'),
    **{f'dna_{v}': dict(type='DnAAttention', variant=v) for v in DNA_VARIANTS},
    'diff_paper': dict(type='DiffAttention', layer_index=1),
    'diff_official': dict(type='DiffAttention', diff_heads='official', num_heads=4),
    'cog': dict(type='CogAttention'),
}


def _attention_case(cfg: dict, cross: bool) -> Case:
    def build() -> nn.Module:
        kind = cfg['type'].replace('Attention', 'CrossAttention') if cross else cfg['type']
        return MODELS.build({'embed_dims': C, 'num_heads': HEADS, 'attn_drop': 0.1, **cfg, 'type': kind})

    return build, _attention_inputs, _attention_calls


def _timesformer(attention_type: str, attn: str) -> Case:
    def build() -> nn.Module:
        init_default_scope('mmaction')
        return MODELS.build(
            tiny_backbone(
                'DnATimeSformer',
                num_frames=2,
                patch_size=16,
                embed_dims=C,
                num_heads=HEADS,
                num_transformer_layers=3,  # Cog: softmax, Cog, softmax
                attention_type=attention_type,
                attn_cfg=attn,
                attn_drop=0.1,
            )
        )

    return build, _clip, _call


def _clip(d: str) -> tuple:
    return (torch.randn(B, 3, 2, 32, 32, device=d),)


class _ViTDetWithNeck(nn.Module):
    """ViTDet backbone + SimpleFPN, as the detectors' configs put them together."""

    def __init__(self, attn, rel_pos: bool, with_cp: bool) -> None:
        super().__init__()
        init_default_scope('mmdet')
        self.backbone = MODELS.build(
            dict(
                type='ViTDet',
                attn_cfg=attn,
                img_size=64,
                patch_size=16,
                embed_dim=C,
                depth=3,
                num_heads=HEADS,
                drop_path_rate=0.1,
                window_size=3,  # a 4 x 4 grid: padded to 6 x 6
                window_block_indexes=(0, 2),
                use_rel_pos=rel_pos,
                rel_pos_zero_init=False,
                pretrain_img_size=32,
                with_cp=with_cp,
            )
        )
        self.neck = MODELS.build(
            dict(
                type='SimpleFPN',
                backbone_channel=C,
                in_channels=[C // 4, C // 2, C, C],
                out_channels=8,
                num_outs=5,
                norm_cfg=dict(type='LN2d', eps=1e-6),
            )
        )

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        return self.neck(self.backbone(x))


def _vitdet(attn, rel_pos: bool = False, with_cp: bool = False) -> Case:
    # an 80 x 64 input: a 5 x 4 grid (global tables made for 4 x 4 resized; windows of 3 padded
    # to 6 x 6 on both sides)
    return (
        lambda: _ViTDetWithNeck(attn, rel_pos, with_cp),
        lambda d: (torch.randn(B, 3, 80, 64, device=d),),
        _call,
    )


def _dna_vit(variant: str) -> Case:
    def build() -> nn.Module:
        return timm.create_model(
            'dna_vit_tiny_patch16_224',
            img_size=32,
            embed_dim=C,
            num_heads=HEADS,
            depth=2,
            num_classes=3,
            attn_cfg=dict(type='DnAAttention', variant=variant),
            drop_rate=0.1,
        )

    return build, lambda d: (torch.randn(B, 3, 48, 32, device=d),), _call  # dynamic size: pos_embed resampled


# hosts of with_attention, tiny
def _timm_vit() -> nn.Module:
    return timm.create_model(
        'vit_tiny_patch16_224',
        img_size=32,
        patch_size=8,
        embed_dim=C,
        num_heads=HEADS,
        depth=2,
        num_classes=3,
    )


def _timm_eva() -> nn.Module:
    from timm.models.eva import Eva

    return Eva(
        img_size=32, patch_size=8, embed_dim=C, depth=2, num_heads=HEADS, num_classes=3, use_rot_pos_emb=False
    )


def _videomae() -> nn.Module:
    init_default_scope('mmaction')
    return MODELS.build(
        tiny_backbone('VisionTransformer', patch_size=16, embed_dims=C, num_heads=HEADS, qkv_bias=True)
    )


def _swin() -> nn.Module:
    init_default_scope('mmaction')
    return MODELS.build(
        dict(
            type='SwinTransformer3D',
            arch=dict(embed_dims=8, depths=[2, 2], num_heads=[2, 2]),
            patch_size=(2, 4, 4),
            window_size=(2, 4, 4),  # shifted windows: the -100 mask and the bias table
            out_indices=(1,),
            pretrained=None,
        )
    )


def _mmaction_timesformer(attention_type: str) -> nn.Module:
    init_default_scope('mmaction')
    return MODELS.build(
        dict(
            type='TimeSformer',
            num_frames=2,
            img_size=32,
            patch_size=16,
            embed_dims=C,
            num_heads=HEADS,
            num_transformer_layers=2,
            attention_type=attention_type,
            pretrained=None,
        )
    )


def _torchvision_vit() -> nn.Module:
    from torchvision.models import VisionTransformer

    return VisionTransformer(
        image_size=32,
        patch_size=16,
        num_layers=2,
        num_heads=HEADS,
        hidden_dim=C,
        mlp_dim=2 * C,
        num_classes=3,
    )


def _uniformerv2() -> nn.Module:
    init_default_scope('mmaction')
    return MODELS.build(
        dict(
            type='UniFormerV2',
            input_resolution=32,
            patch_size=16,
            width=C,
            layers=2,
            heads=HEADS,
            t_size=2,
            no_lmhra=False,
            return_list=[0, 1],
            n_layers=2,
            n_dim=C,
            n_head=HEADS,
            mlp_dropout=[0.5, 0.5],
            clip_pretrained=False,
        )
    )


def _mvit() -> nn.Module:
    init_default_scope('mmaction')
    return MODELS.build(
        dict(
            type='MViT',
            arch=dict(embed_dims=8, num_layers=2, num_heads=1, downscale_indices=[1]),
            spatial_size=32,
            temporal_size=4,
            adaptive_kv_stride=(1, 4, 4),
        )
    )


class _DetrLayers(nn.Module):
    """MMDetection's DETR encoder + decoder (mmcv ``MultiheadAttention``: self and cross,
    ``key_padding_mask``), called as ``DETR.forward_transformer`` calls them."""

    def __init__(self) -> None:
        super().__init__()
        from mmdet.models.layers import DetrTransformerDecoder, DetrTransformerEncoder

        init_default_scope('mmdet')
        attn = dict(embed_dims=C, num_heads=HEADS, dropout=0.1, batch_first=True)
        ffn = dict(embed_dims=C, feedforward_channels=2 * C, num_fcs=2, ffn_drop=0.1)
        self.encoder = DetrTransformerEncoder(num_layers=1, layer_cfg=dict(self_attn_cfg=attn, ffn_cfg=ffn))
        self.decoder = DetrTransformerDecoder(
            num_layers=1,
            layer_cfg=dict(self_attn_cfg=attn, cross_attn_cfg=attn, ffn_cfg=ffn),
            return_intermediate=False,
        )

    def forward(self, feat, pos, mask, query, query_pos):
        memory = self.encoder(query=feat, query_pos=pos, key_padding_mask=mask)
        return self.decoder(
            query=query, key=memory, value=memory, query_pos=query_pos, key_pos=pos, key_padding_mask=mask
        )


def _detr_inputs(device: str) -> tuple:
    mask = torch.zeros(B, N, dtype=torch.bool, device=device)
    mask[1, -3:] = True  # a padded image
    return (
        torch.randn(B, N, C, device=device),
        torch.randn(B, N, C, device=device),
        mask,
        torch.randn(B, M, C, device=device),
        torch.randn(B, M, C, device=device),
    )


def _swapped(host: Callable[[], nn.Module], attn: str, inputs: Callable[[str], tuple]) -> Case:
    def build() -> nn.Module:
        model = host()
        swap_attention(model, attn)
        return model

    return build, inputs, _call


def _image(d: str) -> tuple:
    return (torch.randn(B, 3, 32, 32, device=d),)


def _video(d: str) -> tuple:
    return (torch.randn(B, 3, 4, 32, 32, device=d),)


CASES: dict[str, Case] = {
    **{f'{name}_self': _attention_case(cfg, False) for name, cfg in ATTENTIONS.items()},
    **{f'{name}_cross': _attention_case(cfg, True) for name, cfg in ATTENTIONS.items()},
    **{
        f'timesformer_divided_{a}': _timesformer('divided_space_time', a)
        for a in ('dna', 'softmax', 'diff', 'cog')
    },
    'timesformer_joint_dna': _timesformer('joint_space_time', 'dna'),
    'timesformer_space_only_dna': _timesformer('space_only', 'dna'),
    'vitdet_dna_relpos_cp': _vitdet('dna', rel_pos=True, with_cp=True),
    'vitdet_dna': _vitdet('dna'),
    'vitdet_softmax_relpos': _vitdet('softmax', rel_pos=True),
    'vitdet_diff': _vitdet('diff'),
    'vitdet_cog': _vitdet('cog'),
    'vitdet_dna_qpm_v_relpos': _vitdet(dict(type='DnAAttention', variant='qpm_v'), rel_pos=True),
    'dna_vit_qpm_vpm': _dna_vit('qpm_vpm'),
    'dna_vit_apm': _dna_vit('apm'),
    'with_attention_timm_vit_dna': _swapped(_timm_vit, 'dna', _image),
    'with_attention_timm_eva_diff': _swapped(_timm_eva, 'diff', _image),
    'with_attention_videomae_dna': _swapped(_videomae, 'dna', _video),
    'with_attention_swin_dna': _swapped(_swin, 'dna', _video),
    'with_attention_detr_dna': _swapped(_DetrLayers, 'dna', _detr_inputs),
    'with_attention_timesformer_joint_dna': _swapped(
        functools.partial(_mmaction_timesformer, 'joint_space_time'), 'dna', _clip
    ),
    'with_attention_timesformer_space_only_cog': _swapped(
        functools.partial(_mmaction_timesformer, 'space_only'), 'cog', _clip
    ),
    'with_attention_torchvision_vit_dna': _swapped(_torchvision_vit, 'dna', _image),
    'with_attention_uniformerv2_dna': _swapped(_uniformerv2, 'dna', _video),
    'with_attention_mvit_dna': _swapped(_mvit, 'dna', _video),
}
#: cases whose every attention is Cog's (no SDPA call at all)
NO_SDPA: set[str] = {'cog_self', 'cog_cross'}


def _family_modules(model: nn.Module) -> list[AttentionBase]:
    return [m for m in model.modules() if isinstance(m, AttentionBase)]


def _loss(out) -> Tensor:
    return sum(t.float().sum() for t in tree_leaves(out) if isinstance(t, Tensor) and t.is_floating_point())


# -- the tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize('case', list(CASES))
def test_forward_and_backward_on_meta(case: str) -> None:
    build, inputs, run = CASES[case]
    model = build().to('meta')
    model.train()  # (Video Swin's train() returns None)
    assert _family_modules(model), 'no attention of the family in the model'
    guard = DeviceGuard('meta')
    with guard:
        loss = _loss(run(model, inputs('meta')))
        loss.backward()
    assert loss.device.type == 'meta' and guard.ops > 0
    for attn in _family_modules(model):
        for name, p in attn.named_parameters():
            assert p.grad is not None and p.grad.device.type == 'meta', f'{type(attn).__name__}.{name}'


@pytest.mark.parametrize('case', list(CASES))
def test_bf16_forward_on_fake_cuda_keeps_sdpa_fused(case: str, monkeypatch) -> None:
    build, inputs, run = CASES[case]
    model = build()
    model.eval()
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode, sdpa_recorder(monkeypatch) as calls:
        model = model.to('cuda')
        args = inputs('cuda')
        with cuda_bf16_autocast(), DeviceGuard('cuda'):
            out = run(model, args)
    assert all(t.device.type == 'cuda' for t in tree_leaves(out) if isinstance(t, Tensor))
    assert bool(calls) != (case in NO_SDPA), f'{len(calls)} SDPA calls'
    bad = [f'{where}: {"; ".join(problems)}' for where, _, problems in calls if problems]
    assert not bad, '\n'.join(bad)
    dtypes = {q.dtype for _, q, _ in calls}
    assert dtypes <= {torch.bfloat16}, f'SDPA saw {dtypes} under bf16 autocast'
