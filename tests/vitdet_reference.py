"""A plain, functional re-implementation of the reference ViTDet forward (MMDetection
``projects/ViTDet/vitdet/vit.py`` = detectron2 ``modeling/backbone/vit.py``), for tests.

Written from the reference's structure, independently of dna_mm's modules: it reads a state
dict with the reference's key names (``patch_embed.proj``, ``pos_embed``, ``blocks.{i}.norm1``,
``attn.qkv``, ``attn.proj``, ``attn.rel_pos_h/w``, ``norm2``, ``mlp.fc1/fc2``) and computes the
reference's output ``[B, C, H/p, W/p]``: explicit attention maps, ``(q·s)·kᵀ`` plus the
decomposed rel-pos terms of the unscaled ``q``, windows zero-padded after ``norm1``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def ref_get_rel_pos(q_size: int, k_size: int, rel_pos: torch.Tensor) -> torch.Tensor:
    max_rel_dist = int(2 * max(q_size, k_size) - 1)
    if rel_pos.shape[0] != max_rel_dist:
        resized = F.interpolate(
            rel_pos.reshape(1, rel_pos.shape[0], -1).permute(0, 2, 1), size=max_rel_dist, mode='linear'
        )
        resized = resized.reshape(-1, max_rel_dist).permute(1, 0)
    else:
        resized = rel_pos
    q_coords = torch.arange(q_size)[:, None] * max(k_size / q_size, 1.0)
    k_coords = torch.arange(k_size)[None, :] * max(q_size / k_size, 1.0)
    rel = (q_coords - k_coords) + (k_size - 1) * max(q_size / k_size, 1.0)
    return resized[rel.long()]


def ref_add_decomposed_rel_pos(attn, q, rel_pos_h, rel_pos_w, q_size, k_size):
    """``attn [B·heads, qN, kN]``, ``q [B·heads, qN, d]``."""
    q_h, q_w = q_size
    k_h, k_w = k_size
    rh = ref_get_rel_pos(q_h, k_h, rel_pos_h)
    rw = ref_get_rel_pos(q_w, k_w, rel_pos_w)
    b, _, dim = q.shape
    r_q = q.reshape(b, q_h, q_w, dim)
    rel_h = torch.einsum('bhwc,hkc->bhwk', r_q, rh)
    rel_w = torch.einsum('bhwc,wkc->bhwk', r_q, rw)
    return (attn.view(b, q_h, q_w, k_h, k_w) + rel_h[:, :, :, :, None] + rel_w[:, :, :, None, :]).view(
        b, q_h * q_w, k_h * k_w
    )


def ref_window_partition(x, window_size):
    b, h, w, c = x.shape
    pad_h = (window_size - h % window_size) % window_size
    pad_w = (window_size - w % window_size) % window_size
    if pad_h > 0 or pad_w > 0:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    hp, wp = h + pad_h, w + pad_w
    x = x.view(b, hp // window_size, window_size, wp // window_size, window_size, c)
    windows = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, c)
    return windows, (hp, wp)


def ref_window_unpartition(windows, window_size, pad_hw, hw):
    hp, wp = pad_hw
    h, w = hw
    b = windows.shape[0] // (hp * wp // window_size // window_size)
    x = windows.view(b, hp // window_size, wp // window_size, window_size, window_size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, hp, wp, -1)
    return x[:, :h, :w, :].contiguous() if hp > h or wp > w else x


def ref_attention(sd, p, x, num_heads, use_rel_pos):
    b, h, w, _ = x.shape
    qkv = F.linear(x, sd[p + 'qkv.weight'], sd[p + 'qkv.bias'])
    qkv = qkv.reshape(b, h * w, 3, num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.reshape(3, b * num_heads, h * w, -1).unbind(0)
    scale = q.shape[-1] ** -0.5
    attn = (q * scale) @ k.transpose(-2, -1)
    if use_rel_pos:
        attn = ref_add_decomposed_rel_pos(attn, q, sd[p + 'rel_pos_h'], sd[p + 'rel_pos_w'], (h, w), (h, w))
    attn = attn.softmax(dim=-1)
    x = (attn @ v).view(b, num_heads, h, w, -1).permute(0, 2, 3, 1, 4).reshape(b, h, w, -1)
    return F.linear(x, sd[p + 'proj.weight'], sd[p + 'proj.bias'])


def ref_get_abs_pos(abs_pos, has_cls_token, hw):
    h, w = hw
    if has_cls_token:
        abs_pos = abs_pos[:, 1:]
    size = int(math.sqrt(abs_pos.shape[1]))
    if size != h or size != w:
        new = F.interpolate(
            abs_pos.reshape(1, size, size, -1).permute(0, 3, 1, 2),
            size=(h, w),
            mode='bicubic',
            align_corners=False,
        )
        return new.permute(0, 2, 3, 1)
    return abs_pos.reshape(1, h, w, -1)


def ref_vit_forward(
    sd,
    x,
    depth,
    num_heads,
    patch_size,
    window_size,
    window_block_indexes,
    use_rel_pos,
    eps=1e-6,
    has_cls_token=True,
):
    """The reference ``ViT.forward`` on state dict ``sd`` (GELU MLP, LayerNorm ``eps``)."""
    x = F.conv2d(x, sd['patch_embed.proj.weight'], sd['patch_embed.proj.bias'], stride=patch_size).permute(
        0, 2, 3, 1
    )
    if 'pos_embed' in sd:
        x = x + ref_get_abs_pos(sd['pos_embed'], has_cls_token, (x.shape[1], x.shape[2]))
    c = x.shape[-1]
    for i in range(depth):
        p = f'blocks.{i}.'
        shortcut = x
        x = F.layer_norm(x, (c,), sd[p + 'norm1.weight'], sd[p + 'norm1.bias'], eps)
        win = window_size if i in window_block_indexes else 0
        if win > 0:
            h, w = x.shape[1], x.shape[2]
            x, pad_hw = ref_window_partition(x, win)
        x = ref_attention(sd, p + 'attn.', x, num_heads, use_rel_pos)
        if win > 0:
            x = ref_window_unpartition(x, win, pad_hw, (h, w))
        x = shortcut + x
        y = F.layer_norm(x, (c,), sd[p + 'norm2.weight'], sd[p + 'norm2.bias'], eps)
        y = F.linear(
            F.gelu(F.linear(y, sd[p + 'mlp.fc1.weight'], sd[p + 'mlp.fc1.bias'])),
            sd[p + 'mlp.fc2.weight'],
            sd[p + 'mlp.fc2.bias'],
        )
        x = x + y
    return x.permute(0, 3, 1, 2)


def mmdet_vitdet_checkpoint(
    embed_dim: int,
    depth: int,
    num_heads: int,
    img_size: int,
    patch_size: int,
    window_size: int,
    window_block_indexes,
    pretrain_img_size: int = 224,
    seed: int = 0,
) -> dict:
    """A checkpoint as MMDetection's ViTDet Mask R-CNN writes it (``state_dict`` with
    ``backbone.*`` in the reference ``ViT``'s names and shapes, ``neck.*`` / heads beside it,
    ``meta``), with random values: ``pos_embed [1, 1 + (pretrain/p)², C]``, rel-pos tables
    ``[2·window − 1, d]`` in window blocks and ``[2·img/p − 1, d]`` in global ones."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g) * 0.05

    c, d, hidden = embed_dim, embed_dim // num_heads, 4 * embed_dim
    grid = img_size // patch_size
    sd = {
        'backbone.patch_embed.proj.weight': rnd(c, 3, patch_size, patch_size),
        'backbone.patch_embed.proj.bias': rnd(c),
        'backbone.pos_embed': rnd(1, (pretrain_img_size // patch_size) ** 2 + 1, c),
    }
    for i in range(depth):
        p = f'backbone.blocks.{i}.'
        size = window_size if i in window_block_indexes else grid
        sd.update(
            {
                p + 'norm1.weight': 1 + rnd(c),
                p + 'norm1.bias': rnd(c),
                p + 'attn.qkv.weight': rnd(3 * c, c),
                p + 'attn.qkv.bias': rnd(3 * c),
                p + 'attn.proj.weight': rnd(c, c),
                p + 'attn.proj.bias': rnd(c),
                p + 'attn.rel_pos_h': rnd(2 * size - 1, d) * 10,
                p + 'attn.rel_pos_w': rnd(2 * size - 1, d) * 10,
                p + 'norm2.weight': 1 + rnd(c),
                p + 'norm2.bias': rnd(c),
                p + 'mlp.fc1.weight': rnd(hidden, c),
                p + 'mlp.fc1.bias': rnd(hidden),
                p + 'mlp.fc2.weight': rnd(c, hidden),
                p + 'mlp.fc2.bias': rnd(c),
            }
        )
    sd.update(
        {
            'neck.fpn1.0.weight': rnd(c, c // 2, 2, 2),
            'neck.fpn1.1.weight': rnd(c // 2),
            'neck.lateral_convs.0.conv.weight': rnd(256, c // 4, 1, 1),
            'rpn_head.rpn_conv.0.conv.weight': rnd(256, 256, 3, 3),
        }
    )
    return dict(meta=dict(mmdet_version='3.3.0', epoch=100), state_dict=sd)
