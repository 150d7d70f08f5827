"""``TokenAttention`` is an exact drop-in for mmcv's ``MultiheadAttention``.

The reference is mmcv's own module (built through the registry, its ``state_dict()`` mapped
by ``rename_mha`` and loaded strictly), called the way mmcv's layers call it."""

from __future__ import annotations

import pytest
import torch
from mmcv.cnn.bricks.transformer import MultiheadAttention
from mmengine.registry import MODELS
from tolerance import REORDERED, assert_close_as

import dna_mm  # noqa: F401  (registers TokenAttention)
from dna_mm.converters import rename_mha, softmax_to_dna

C, H, B, M, N = 32, 4, 2, 5, 7


def _pair(batch_first: bool, attn: str = 'softmax'):
    torch.manual_seed(0)
    theirs = MultiheadAttention(C, H, batch_first=batch_first).eval()
    ours = MODELS.build(
        dict(type='TokenAttention', embed_dims=C, num_heads=H, attn_cfg=attn, batch_first=batch_first)
    ).eval()
    sd = rename_mha(theirs.state_dict())
    if attn == 'dna':
        sd = softmax_to_dna(sd, num_heads=H)
    ours.load_state_dict(sd, strict=True)
    return theirs, ours


def _cases(batch_first: bool) -> dict[str, tuple[tuple, dict]]:
    g = torch.Generator().manual_seed(1)

    def t(n):  # tokens in the module's layout
        x = torch.randn(B, n, C, generator=g)
        return x if batch_first else x.transpose(0, 1)

    q, k, v, qp, kp = t(M), t(N), t(N), t(M), t(N)
    sq, sp = t(N), t(N)
    kpm = torch.zeros(B, N, dtype=torch.bool)
    kpm[0, -2:] = True
    float_mask = torch.randn(M, N, generator=g)
    bool_mask = torch.zeros(M, N, dtype=torch.bool)
    bool_mask[:, 1] = True
    return {
        'self': ((sq,), {}),
        'layer call (q, q, q, query_pos=p, key_pos=p)': ((sq, sq, sq), dict(query_pos=sp, key_pos=sp)),
        'query_pos only (key_pos defaults to it)': ((sq,), dict(query_pos=sp)),
        'cross with key_pos': ((q, k), dict(query_pos=qp, key_pos=kp)),
        'value differs from key': ((q, k, v), dict(query_pos=qp, key_pos=kp)),
        'key_padding_mask': ((q, k, v), dict(key_padding_mask=kpm)),
        'float attn_mask + key_padding_mask': ((q, k, v), dict(attn_mask=float_mask, key_padding_mask=kpm)),
        'bool attn_mask': ((q, k, v), dict(attn_mask=bool_mask)),
        '[B·H, M, N] float attn_mask': ((q, k, v), dict(attn_mask=torch.randn(B * H, M, N, generator=g))),
        'identity': ((q, k, v), dict(identity=t(M))),
    }


@pytest.mark.parametrize('batch_first', [True, False])
def test_softmax_inside_equals_mmcv(batch_first: bool) -> None:
    theirs, ours = _pair(batch_first)
    for name, (args, kwargs) in _cases(batch_first).items():
        with torch.no_grad():
            ref, out = theirs(*args, **kwargs), ours(*args, **kwargs)
        assert out.shape == ref.shape, name
        assert_close_as(out, ref, ulps=REORDERED, what=name)


@pytest.mark.parametrize('batch_first', [True, False])
def test_dna_initialised_from_mmcv_stays_close(batch_first: bool) -> None:
    theirs, ours = _pair(batch_first, attn='dna')
    for name, (args, kwargs) in _cases(batch_first).items():
        with torch.no_grad():
            out, ref = ours(*args, **kwargs), theirs(*args, **kwargs)
        diff = ((out - ref).abs().max() / ref.abs().max()).item()
        assert diff < 1e-3, (name, diff)  # relative to the output's magnitude


def test_in_a_detr_decoder_layer_equals_mmcv() -> None:
    """The whole mmcv ``BaseTransformerLayer`` (self- then cross-attention, DETR decoder
    order) with TokenAttention in both slots equals the stock layer on the same weights."""

    def layer(attn_type: str, **extra):
        return MODELS.build(
            dict(
                type='BaseTransformerLayer',
                attn_cfgs=[dict(type=attn_type, embed_dims=C, num_heads=H, **extra)] * 2,
                ffn_cfgs=dict(type='FFN', embed_dims=C, feedforward_channels=2 * C),
                operation_order=('self_attn', 'norm', 'cross_attn', 'norm', 'ffn', 'norm'),
            )
        ).eval()

    torch.manual_seed(0)
    theirs = layer('MultiheadAttention')
    ours = layer('TokenAttention', attn_cfg='softmax')
    ours.load_state_dict(rename_mha(theirs.state_dict()), strict=True)
    query, memory = torch.randn(M, B, C), torch.randn(N, B, C)  # batch_first=False (DETR)
    qpos, kpos = torch.randn(M, B, C), torch.randn(N, B, C)
    kpm = torch.zeros(B, N, dtype=torch.bool)
    kpm[1, -3:] = True
    kwargs = dict(query_pos=qpos, key_pos=kpos, key_padding_mask=kpm)
    with torch.no_grad():
        ref = theirs(query, memory, memory, **kwargs)
        out = ours(query, memory, memory, **kwargs)
    assert_close_as(out, ref, ulps=REORDERED)
