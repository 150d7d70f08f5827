"""ViTDet backbone with the attention family: reference equivalence, DnA rel-pos, windows,
positions, SimpleFPN / LN2d, layer decay, and every pretrained layout it reads."""

from __future__ import annotations

import math

import pytest
import timm
import torch
import torch.nn.functional as F
from authors_models import AuthorsDnAViT, AuthorsQQKVV
from mmengine.registry import init_default_scope
from tolerance import REORDERED, ROUNDING, SUMMED, assert_close_as
from vitdet_reference import (
    mmdet_vitdet_checkpoint,
    ref_get_rel_pos,
    ref_vit_forward,
    ref_window_partition,
    ref_window_unpartition,
)

import dna_mm  # noqa: F401  (registers the mmdet-scope modules)
from dna_mm.models.attention import DnAAttention, SoftmaxAttention
from dna_mm.models.backbones.vitdet import ViTDet, load_pretrained
from dna_mm.models.layers.positions import (
    abs_pos_grid,
    decomposed_rel_pos,
    get_rel_pos,
    resize_pos_embed,
    resize_rel_pos,
)
from dna_mm.models.layers.vitdet_attention import GridForm, vitdet_attention
from dna_mm.models.layers.window import window_partition, window_unpartition

# a tiny ViTDet: 4 blocks of 32 channels, 2 heads (d = 16), windows of 4 in blocks 0 and 2
TINY = dict(
    img_size=64,
    patch_size=16,
    embed_dim=32,
    depth=4,
    num_heads=2,
    window_size=4,
    window_block_indexes=(0, 2),
    use_rel_pos=True,
    pretrain_img_size=64,
)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def _randomise(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial values everywhere (rel-pos tables start at zero, α at 0.5)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'rel_pos' in name:
                p.normal_(0, 0.5)
            elif name.endswith('alpha'):
                p.uniform_(0.2, 1.0)
    return model


# -- windows and positions ---------------------------------------------------------------------
@pytest.mark.parametrize('hw', [(8, 8), (7, 6), (5, 9)])
def test_window_partition_pads_and_crops(hw) -> None:
    x = torch.randn(2, *hw, 3)
    windows, padded = window_partition(x, 4)
    ref_windows, ref_padded = ref_window_partition(x, 4)
    assert padded == ref_padded == (math.ceil(hw[0] / 4) * 4, math.ceil(hw[1] / 4) * 4)
    assert torch.equal(windows, ref_windows)
    assert windows.shape == (2 * (padded[0] // 4) * (padded[1] // 4), 4, 4, 3)
    # padded tokens are zeros (no mask: they act as keys in the attention)
    grid = windows.view(2, padded[0] // 4, padded[1] // 4, 4, 4, 3).permute(0, 1, 3, 2, 4, 5)
    grid = grid.reshape(2, *padded, 3)
    assert torch.equal(grid[:, : hw[0], : hw[1]], x)
    assert grid[:, hw[0] :].abs().sum() == 0 and grid[:, :, hw[1] :].abs().sum() == 0
    back = window_unpartition(windows, 4, padded, hw)
    assert torch.equal(back, x)
    assert torch.equal(back, ref_window_unpartition(ref_windows, 4, ref_padded, hw))


def test_rel_pos_lookup_and_resize() -> None:
    table = torch.randn(7, 5)  # made for a side of 4
    for q, k in [(4, 4), (6, 6), (3, 6), (6, 3), (2, 2)]:
        assert_close_as(
            get_rel_pos(q, k, table), ref_get_rel_pos(q, k, table), ulps=ROUNDING, what=f'{q}, {k}'
        )
    # same side: offsets i - j + (k - 1) index the table directly
    exact = get_rel_pos(4, 4, table)
    assert torch.equal(exact[0, 3], table[0]) and torch.equal(exact[3, 0], table[6])
    # a table linear in its row index stays linear when resized (align_corners=False interior)
    ramp = torch.arange(7.0).unsqueeze(1).repeat(1, 2)
    assert_close_as(
        resize_rel_pos(ramp, 13)[3:10, 0], (torch.arange(3, 10) + 0.5) * 7 / 13 - 0.5, ulps=ROUNDING
    )
    assert resize_rel_pos(table, 7) is table


def test_pos_embed_resize_cls_rows() -> None:
    pos = torch.randn(1, 1 + 16, 8)  # CLS + 4x4
    same = resize_pos_embed(pos, 4, with_cls=True)
    assert torch.equal(same, pos)
    no_cls = resize_pos_embed(pos, 4, with_cls=False)
    assert torch.equal(no_cls, pos[:, 1:])
    grown = resize_pos_embed(pos, 6, with_cls=True)
    expected = (
        F.interpolate(
            pos[:, 1:].reshape(1, 4, 4, 8).permute(0, 3, 1, 2),
            size=(6, 6),
            mode='bicubic',
            align_corners=False,
        )
        .permute(0, 2, 3, 1)
        .reshape(1, 36, 8)
    )
    assert torch.equal(grown[:, :1], pos[:, :1])
    assert_close_as(grown[:, 1:], expected, ulps=ROUNDING)
    authors = torch.randn(1, 16, 8)  # the authors' DnA ViT: no CLS row
    with_zero = resize_pos_embed(authors, 4, with_cls=True)
    assert with_zero[:, 0].abs().sum() == 0 and torch.equal(with_zero[:, 1:], authors)
    assert abs_pos_grid(with_zero, True, (4, 4)).shape == (1, 4, 4, 8)
    with pytest.raises(ValueError, match='square'):
        resize_pos_embed(torch.randn(1, 15, 8), 4, with_cls=True)


# -- the backbone against the reference --------------------------------------------------------
@pytest.mark.parametrize('size', [(64, 64), (112, 96)])  # 4x4 and 7x6 token grids
def test_softmax_vitdet_equals_reference_forward(size) -> None:
    model = _randomise(ViTDet(**TINY, attn_cfg='softmax')).eval()
    sd = model.state_dict()
    assert {
        'patch_embed.proj.weight',
        'pos_embed',
        'blocks.0.attn.rel_pos_h',
        'blocks.1.attn.qkv.weight',
        'blocks.3.mlp.fc2.bias',
    } <= set(sd)
    assert sd['blocks.0.attn.rel_pos_h'].shape == (7, 16)  # window 4
    assert sd['blocks.1.attn.rel_pos_h'].shape == (7, 16)  # global, 64 / 16 = 4
    x = torch.randn(2, 3, *size)
    with torch.no_grad():
        (out,) = model(x)
        ref = ref_vit_forward(
            sd,
            x,
            depth=4,
            num_heads=2,
            patch_size=16,
            window_size=4,
            window_block_indexes=(0, 2),
            use_rel_pos=True,
        )
    assert out.shape == (2, 32, size[0] // 16, size[1] // 16)
    assert_close_as(out, ref, ulps=REORDERED)


def _dna_rel_pos_formula(attn: DnAAttention, x: torch.Tensor) -> torch.Tensor:
    """``softmax(s Q+ Kᵀ + R(Q+)) V+ + α softmin(s Q- Kᵀ + R(Q-)) V-`` written out."""
    b, h, w, c = x.shape
    t = x.reshape(b, h * w, c)
    heads = attn.num_heads

    def split(y):
        return y.reshape(b, h * w, heads, -1).transpose(1, 2)

    q, k, v = (split(y) for y in attn.qkv(t).chunk(3, dim=-1))
    q_neg, v_neg = split(attn.q_neg(t)), split(attn.v_neg(t))
    s = attn.head_dim**-0.5
    r_pos = decomposed_rel_pos(q, attn.rel_pos_h, attn.rel_pos_w, (h, w), (h, w))
    r_neg = decomposed_rel_pos(q_neg, attn.rel_pos_h, attn.rel_pos_w, (h, w), (h, w))
    pos = torch.softmax(s * q @ k.transpose(-2, -1) + r_pos, -1) @ v
    neg = torch.softmax(-(s * q_neg @ k.transpose(-2, -1) + r_neg), -1) @ v_neg
    out = pos + attn.alpha.view(1, -1, 1, 1) * neg
    return attn.proj(out.transpose(1, 2).reshape(b, h * w, c)).reshape(b, h, w, c)


def test_dna_rel_pos_per_branch_fast_eager_formula() -> None:
    attn = _randomise(vitdet_attention('dna', 32, 2, 0, 4, use_rel_pos=True, input_size=(4, 4)))
    assert type(attn) is DnAAttention and isinstance(attn.host_form, GridForm)
    x = torch.randn(3, 4, 4, 32, requires_grad=True)
    fast = attn(x)
    eager, maps = attn(x, return_attn=True)
    formula = _dna_rel_pos_formula(attn, x)
    assert_close_as(fast, formula, ulps=REORDERED)
    assert_close_as(eager, formula, ulps=REORDERED)
    assert maps['pos'].shape == maps['neg'].shape == (3, 2, 16, 16)
    # the negative branch's bias comes from Q-: fast and eager agree on the gradients through it
    g_fast = torch.autograd.grad(fast.square().sum(), [x, attn.rel_pos_h, attn.q_neg.weight])
    g_eager = torch.autograd.grad(eager.square().sum(), [x, attn.rel_pos_h, attn.q_neg.weight])
    for a, b in zip(g_fast, g_eager, strict=True):
        assert_close_as(a, b, ulps=SUMMED)
    assert g_fast[1].abs().sum() > 0
    # R(Q-) differs from R(Q+): using R(Q+) in both branches gives another output
    heads = attn.project(x.detach().reshape(3, 16, 32))
    r_pos = decomposed_rel_pos(heads['q'], attn.rel_pos_h, attn.rel_pos_w, (4, 4), (4, 4))
    shared = attn.attend(heads, None, r_pos, False)[0]
    shared = attn.proj(attn.merge_heads(shared)).reshape(3, 4, 4, 32)
    assert _rel(shared, formula.detach()) > 1e-3


def test_attention_choices_and_refusals() -> None:
    m = ViTDet(**{**TINY, 'use_rel_pos': False}, attn_cfg='cog')
    kinds = [type(b.attn).__name__ for b in m.blocks]
    assert kinds == [
        'SoftmaxAttention',
        'CogAttention',
        'CogAttention',
        'SoftmaxAttention',
    ]  # the Cog authors' first / last softmax
    assert all(isinstance(b.attn.host_form, GridForm) for b in m.blocks)
    diff = ViTDet(**{**TINY, 'use_rel_pos': False}, attn_cfg='diff')
    assert [b.attn.lambda_init for b in diff.blocks][0] != diff.blocks[3].attn.lambda_init
    for attn in ('diff', 'cog'):
        with pytest.raises(ValueError, match='takes_position_bias = False.*set use_rel_pos=False'):
            ViTDet(**TINY, attn_cfg=attn)
    with pytest.raises(ValueError, match='not a self-attention'):
        ViTDet(**TINY, attn_cfg='SoftmaxCrossAttention')
    variant = ViTDet(**TINY, attn_cfg=dict(type='DnAAttention', variant='qpm_v'))
    assert variant.blocks[0].attn.v_neg is None and variant.blocks[0].attn.q_neg is not None
    with pytest.raises(ValueError, match='window_block_indexes'):
        ViTDet(**{**TINY, 'window_block_indexes': (0, 7)})
    assert type(ViTDet(**TINY, attn_cfg='softmax').blocks[0].attn) is SoftmaxAttention


def test_with_cp_same_gradients() -> None:
    torch.manual_seed(1)
    plain = _randomise(ViTDet(**TINY)).train()
    ckpt = ViTDet(**TINY, with_cp=True).train()
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 64, 64)
    grads, calls = [], []
    for m in (plain, ckpt):
        m.zero_grad()
        count = [0]
        handle = m.blocks[1].attn.register_forward_pre_hook(lambda *_, c=count: c.__setitem__(0, c[0] + 1))
        m(x)[0].square().mean().backward()
        handle.remove()
        calls.append(count[0])
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
    assert calls == [1, 2]  # with_cp recomputes the block's forward during backward
    for name, g in grads[0].items():
        assert_close_as(g, grads[1][name], ulps=ROUNDING, what=name)  # the same operations again


# -- SimpleFPN, LN2d -----------------------------------------------------------------------------
def test_simple_fpn_and_ln2d() -> None:
    from mmdet.registry import MODELS

    init_default_scope('mmdet')
    ln = MODELS.build(dict(type='LN2d', normalized_shape=8, eps=1e-6))
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = torch.randn(2, 8, 5, 3)
    expected = F.layer_norm(x.permute(0, 2, 3, 1), (8,), ln.weight, ln.bias, 1e-6).permute(0, 3, 1, 2)
    assert_close_as(ln(x), expected, ulps=REORDERED)
    fpn = MODELS.build(
        dict(
            type='SimpleFPN',
            backbone_channel=32,
            in_channels=[8, 16, 32, 32],
            out_channels=24,
            num_outs=5,
            norm_cfg=dict(type='LN2d', eps=1e-6),
        )
    )
    outs = fpn((torch.randn(2, 32, 8, 6),))
    assert [tuple(o.shape[2:]) for o in outs] == [(32, 24), (16, 12), (8, 6), (4, 3), (2, 2)]
    assert all(o.shape[:2] == (2, 24) for o in outs)
    names = set(fpn.state_dict())
    assert {
        'fpn1.0.weight',
        'fpn1.1.weight',
        'fpn1.3.weight',
        'fpn2.0.weight',
        'lateral_convs.0.conv.weight',
        'lateral_convs.0.norm_layer.weight',
        'fpn_convs.3.norm_layer.bias',
    } <= names
    assert 'lateral_convs.0.conv.bias' not in names  # ConvModule drops the bias before a norm
    assert fpn.fpn1[1].eps == 1e-6
    with pytest.raises(ValueError, match='in_channels must be'):
        MODELS.build(
            dict(
                type='SimpleFPN',
                backbone_channel=32,
                in_channels=[8, 16, 32],
                out_channels=24,
                num_outs=5,
                norm_cfg=dict(type='LN2d'),
            )
        )


# -- layer decay -------------------------------------------------------------------------------
def test_layer_decay_groups() -> None:
    from mmengine.optim import build_optim_wrapper

    init_default_scope('mmdet')
    model = torch.nn.Module()
    model.backbone = ViTDet(**TINY)
    model.neck = torch.nn.Conv2d(32, 8, 1)
    wrapper = build_optim_wrapper(
        model,
        dict(
            type='OptimWrapper',
            constructor='LayerDecayOptimizerConstructor',
            paramwise_cfg=dict(decay_rate=0.7, decay_type='layer_wise', num_layers=4),
            optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.1),
        ),
    )
    by_name = {}
    for group in wrapper.optimizer.param_groups:
        for name in group['param_names']:
            by_name[name] = (group['lr'], group['weight_decay'])
    assert len(by_name) == sum(1 for _ in model.parameters())

    def lr(layer_id):
        return pytest.approx(1e-3 * 0.7 ** (4 + 1 - layer_id))

    assert by_name['backbone.patch_embed.proj.weight'] == (lr(0), 0.1)
    assert by_name['backbone.pos_embed'] == (lr(0), 0.0)
    for i in range(4):
        p = f'backbone.blocks.{i}.'
        assert by_name[p + 'attn.qkv.weight'] == (lr(i + 1), 0.1)
        assert by_name[p + 'attn.qkv.bias'] == (lr(i + 1), 0.1)  # biases decayed (reference)
        assert by_name[p + 'attn.q_neg.weight'] == (lr(i + 1), 0.1)  # DnA: its block's id
        assert by_name[p + 'attn.v_neg.bias'] == (lr(i + 1), 0.1)
        assert by_name[p + 'attn.rel_pos_h'] == (lr(i + 1), 0.1)
        assert by_name[p + 'attn.alpha'] == (lr(i + 1), 0.0)  # per-head gain: no decay
        assert by_name[p + 'norm1.weight'] == (lr(i + 1), 0.0)
        assert by_name[p + 'norm2.bias'] == (lr(i + 1), 0.0)
    assert by_name['neck.weight'] == (pytest.approx(1e-3), 0.1)


def _layer_decay_groups(model: torch.nn.Module, **paramwise) -> dict[str, tuple[float, float]]:
    """Parameter name -> (lr, weight decay) under LayerDecayOptimizerConstructor (lr 1e-3, wd 0.1)."""
    from mmengine.optim import build_optim_wrapper

    wrapper = build_optim_wrapper(
        model,
        dict(
            type='OptimWrapper',
            constructor='LayerDecayOptimizerConstructor',
            paramwise_cfg={**dict(decay_rate=0.7, decay_type='layer_wise', num_layers=4), **paramwise},
            optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.1),
        ),
    )
    groups = wrapper.optimizer.param_groups
    return {name: (g['lr'], g['weight_decay']) for g in groups for name in g['param_names']}


def test_layer_decay_custom_keys_apply_on_top_of_the_layers_rate() -> None:
    """A key's ``lr_mult`` multiplies its parameters' layer-decayed lr (0 freezes them) and its
    ``decay_mult`` replaces the rule's weight decay, one key per parameter (the longest), as in
    mmengine's constructor; a key that gives the rule's settings changes no group."""
    init_default_scope('mmdet')
    model = torch.nn.Module()
    model.backbone = ViTDet(**TINY)
    keys = {
        'alpha': dict(lr_mult=10.0),
        'blocks.0.attn.alpha': dict(lr_mult=0.0),
        'qkv.bias': dict(decay_mult=0.0),
    }
    by_name = _layer_decay_groups(model, custom_keys=keys)

    def lr(layer_id):
        return pytest.approx(1e-3 * 0.7 ** (4 + 1 - layer_id))

    assert by_name['backbone.blocks.0.attn.alpha'] == (0.0, 0.0)  # the longer key: frozen
    for i in range(1, 4):
        assert by_name[f'backbone.blocks.{i}.attn.alpha'] == (pytest.approx(1e-2 * 0.7 ** (4 - i)), 0.0)
    for i in range(4):
        assert by_name[f'backbone.blocks.{i}.attn.qkv.bias'] == (lr(i + 1), 0.0)
        assert by_name[f'backbone.blocks.{i}.attn.qkv.weight'] == (lr(i + 1), 0.1)
    plain = _layer_decay_groups(model)
    same = _layer_decay_groups(model, custom_keys={'pos_embed': dict(decay_mult=0.0)})  # the rule's own
    assert list(same) == list(plain) and same == plain


@pytest.mark.parametrize(
    ('paramwise', 'message'),
    [
        (dict(decay_type='stage_wise'), r"decay_type must be 'layer_wise'"),
        (dict(num_layers=12), r"num_layers must be the backbone's depth, 4 \(backbone.blocks.0-3\), got 12"),
        (
            dict(bias_decay_mult=0.0),
            r'paramwise_cfg.bias_decay_mult is not a key LayerDecayOptimizerConstructor',
        ),
        (dict(decay_rat=0.7), r"decay_rat is not a key .*did you mean 'decay_rate'\?"),
        (dict(decay_rate=1.5), r'decay_rate must be a number in \(0, 1\], got 1.5'),
    ],
)
def test_layer_decay_settings_it_cannot_use_are_one_line(paramwise, message) -> None:
    from dna_mm.errors import ConfigError

    init_default_scope('mmdet')
    model = torch.nn.Module()
    model.backbone = ViTDet(**TINY)
    with pytest.raises(ConfigError, match=message):
        _layer_decay_groups(model, **paramwise)


# -- pretrained layouts --------------------------------------------------------------------------
def _load(model: ViTDet, checkpoint: dict, tmp_path, name: str = 'ckpt.pth') -> dict:
    path = tmp_path / name
    torch.save(checkpoint, path)
    return load_pretrained(model, str(path))


def _timm_vit(img_size: int = 64, **kw) -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    vit = VisionTransformer(
        img_size=img_size, patch_size=16, embed_dim=32, depth=4, num_heads=2, num_classes=10, **kw
    )
    with torch.no_grad():  # non-trivial biases / norms / pos_embed
        for p in vit.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return vit


def test_mae_timm_file_into_softmax_and_dna(tmp_path) -> None:
    vit = _timm_vit(global_pool='', class_token=True)
    mae = {'model': {k: v for k, v in vit.state_dict().items() if not k.startswith('head.')}}
    assert mae['model']['pos_embed'].shape == (1, 17, 32)  # CLS + 4x4, as MAE's 197 at 224
    cfg = {**TINY, 'window_size': 0, 'use_rel_pos': False}
    soft = ViTDet(**cfg, attn_cfg='softmax').eval()
    report = _load(soft, mae, tmp_path)
    assert report['unused'] == ['cls_token', 'norm.bias', 'norm.weight']
    assert not report['missing'] and not report['unexpected'] and not report['generated']
    dna = ViTDet(**cfg, attn_cfg='dna').eval()
    report = _load(dna, mae, tmp_path)
    assert len(report['generated']) == 4 * 5  # q_neg, v_neg (weight, bias), alpha per block
    sd = dna.state_dict()
    q, _, v = mae['model']['blocks.1.attn.qkv.weight'].chunk(3)
    assert torch.equal(sd['blocks.1.attn.q_neg.weight'], 1e-4 * q)
    assert torch.equal(sd['blocks.1.attn.v_neg.weight'], -1e-4 * v)
    assert torch.equal(sd['blocks.1.attn.alpha'], torch.full((2,), 0.5))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ref = ref_vit_forward(soft.state_dict(), x, 4, 2, 16, 0, (), False)
        assert_close_as(soft(x)[0], ref, ulps=REORDERED)
        assert _rel(dna(x)[0], ref) < 1e-3  # the ±1e-4 branch barely changes the function
    # with windows and rel-pos the tables are missing from an MAE file (zero init kept)
    rel = ViTDet(**TINY, attn_cfg='dna')
    report = _load(rel, mae, tmp_path)
    assert report['missing'] == sorted(f'blocks.{i}.attn.rel_pos_{a}' for i in range(4) for a in 'hw')


def test_timm_vit_other_resolution_resizes_pos_embed(tmp_path) -> None:
    vit = _timm_vit(img_size=96)  # 6x6 grid + CLS, and a classifier head
    model = ViTDet(**TINY, attn_cfg='softmax')
    report = _load(model, vit.state_dict(), tmp_path)
    assert report['resized'] == ['pos_embed [1, 37, 32] -> [1, 17, 32]']
    assert 'head.weight' in report['unused'] and 'cls_token' in report['unused']
    assert_close_as(model.pos_embed, resize_pos_embed(vit.pos_embed.detach(), 4, True), ulps=ROUNDING)
    assert torch.equal(model.pos_embed[:, 0], vit.pos_embed[:, 0].detach())
    # Differential attention from a softmax file: λ and the RMSNorm keep their init
    diff = ViTDet(**{**TINY, 'use_rel_pos': False}, attn_cfg='diff')
    report = _load(diff, vit.state_dict(), tmp_path)
    assert len(report['missing']) == 4 * 5 and all(
        k.split('.')[-1].startswith('lambda_') or 'sub_norm' in k for k in report['missing']
    )
    assert torch.equal(diff.blocks[0].attn.qkv.weight, vit.blocks[0].attn.qkv.weight)


def test_dna_vit_timm_model_file(tmp_path) -> None:
    src = timm.create_model(
        'dna_vit_tiny_patch16_224', img_size=64, embed_dim=32, depth=4, num_heads=2, num_classes=3
    )
    dna = ViTDet(**TINY, attn_cfg='dna')
    report = _load(dna, src.state_dict(), tmp_path)
    assert not report['generated'] and len(report['missing']) == 8  # rel-pos tables only
    assert torch.equal(dna.blocks[2].attn.v_neg.weight, src.blocks[2].attn.v_neg.weight)
    soft = ViTDet(**TINY, attn_cfg='softmax')
    report = _load(soft, src.state_dict(), tmp_path)
    assert not any('q_neg' in k for k in report['unexpected'])  # dropped, not left over
    assert torch.equal(soft.blocks[2].attn.qkv.weight, src.blocks[2].attn.qkv.weight)


def test_authors_dna_vit_file(tmp_path) -> None:
    authors = AuthorsDnAViT(
        img_size=64, patch=16, dim=32, depth=4, heads=2, attn_cls=AuthorsQQKVV, combine='add'
    ).eval()
    sd = authors.state_dict()
    assert sd['pos_embed'].shape == (1, 16, 32) and 'blocks.0.attn.qqkvv.weight' in sd
    model = ViTDet(**{**TINY, 'window_size': 0, 'use_rel_pos': False}, attn_cfg='dna').eval()
    report = _load(model, {'model': sd}, tmp_path)
    assert not report['generated'] and not report['missing'] and not report['unexpected']
    assert torch.equal(model.pos_embed[:, 1:], sd['pos_embed'])  # no CLS row in their file:
    assert model.pos_embed[:, 0].abs().sum() == 0  # zero row, i.e. no position
    assert torch.equal(model.blocks[0].attn.alpha, sd['blocks.0.attn.neg_scalers'])
    # their attention module and ours compute the same function on the same tokens
    tokens = torch.randn(2, 16, 32)
    with torch.no_grad():
        theirs = authors.blocks[1].attn(tokens)
        ours = model.blocks[1].attn(tokens.reshape(2, 4, 4, 32)).reshape(2, 16, 32)
    assert_close_as(ours, theirs, ulps=REORDERED)


def test_mmdet_vitdet_checkpoint_softmax_and_dna(tmp_path) -> None:
    # as MMDetection writes it: 'state_dict' with backbone.* / neck.* / rpn_head.*, 'meta';
    # windows of 2 in blocks 0 and 2 (rel-pos [3, d]), global blocks [2·4 − 1, d]
    ckpt = mmdet_vitdet_checkpoint(
        embed_dim=32,
        depth=4,
        num_heads=2,
        img_size=64,
        patch_size=16,
        window_size=2,
        window_block_indexes=(0, 2),
    )
    backbone = {k[len('backbone.') :]: v for k, v in ckpt['state_dict'].items() if k.startswith('backbone.')}
    same = ViTDet(**{**TINY, 'window_size': 2, 'pretrain_img_size': 224}, attn_cfg='softmax').eval()
    report = _load(same, ckpt, tmp_path)
    assert not report['missing'] and not report['unexpected'] and not report['resized']
    x = torch.randn(2, 3, 80, 64)  # 5x4 grid: window padding in blocks 0 and 2
    with torch.no_grad():
        ref = ref_vit_forward(backbone, x, 4, 2, 16, 2, (0, 2), True)
        assert_close_as(same(x)[0], ref, ulps=REORDERED)
    # DnA with windows of 4: negative branches generated, window tables resized 3 -> 7
    dna = ViTDet(**{**TINY, 'pretrain_img_size': 224}, attn_cfg='dna').eval()
    report = _load(dna, ckpt, tmp_path)
    assert len(report['generated']) == 20 and not report['missing']
    assert 'blocks.0.attn.rel_pos_h [3, 16] -> [7, 16]' in report['resized']
    assert not any(k.startswith('blocks.1.') for k in report['resized'])  # global: 7 already
    assert_close_as(
        dna.blocks[0].attn.rel_pos_h, resize_rel_pos(backbone['blocks.0.attn.rel_pos_h'], 7), ulps=ROUNDING
    )
    with torch.no_grad():
        ref4 = ref_vit_forward(dna.state_dict(), x, 4, 2, 16, 4, (0, 2), True)
        assert _rel(dna(x)[0], ref4) < 1e-3


def test_shape_mismatch_names_file_and_key(tmp_path) -> None:
    ckpt = mmdet_vitdet_checkpoint(
        embed_dim=32,
        depth=4,
        num_heads=2,
        img_size=64,
        patch_size=16,
        window_size=4,
        window_block_indexes=(0, 2),
    )
    ckpt['state_dict']['backbone.blocks.3.mlp.fc1.weight'] = torch.zeros(64, 32)
    with pytest.raises(ValueError, match=r'bad\.pth: shape mismatch for blocks\.3\.mlp\.fc1\.weight'):
        _load(ViTDet(**TINY), ckpt, tmp_path, 'bad.pth')
    partial = {
        'blocks.0.attn.qkv.weight': torch.zeros(96, 32),
        'blocks.0.attn.q_neg.weight': torch.zeros(32, 32),
    }
    with pytest.raises(ValueError, match='blocks.0.attn: missing'):
        _load(ViTDet(**TINY), partial, tmp_path, 'partial.pth')


def test_init_cfg_pretrained_goes_through_the_loader(tmp_path) -> None:
    vit = _timm_vit()
    path = tmp_path / 'mae.pth'
    torch.save({'model': vit.state_dict()}, path)
    model = ViTDet(**TINY, init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    model.init_weights()
    assert torch.equal(model.blocks[3].attn.qkv.weight, vit.blocks[3].attn.qkv.weight)
    with pytest.raises(ValueError, match='init_cfg must be'):
        ViTDet(**TINY, init_cfg=dict(type='Normal')).init_weights()


PROJECT_STANDIN = '''
# Registered as MMDetection's projects/ViTDet registers its modules (mmdet scope, force=False).
from mmdet.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.model import BaseModule
from mmengine.optim import DefaultOptimWrapperConstructor
from torch import nn


@MODELS.register_module()
class SimpleFPN(BaseModule):
    pass


@MODELS.register_module()
class LN2d(nn.Module):
    pass


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimizerConstructor(DefaultOptimWrapperConstructor):
    pass
'''


@pytest.mark.parametrize('order', ['dna_mm first', 'project first'])
@pytest.mark.integration
def test_registers_beside_mmdetections_vitdet_project(tmp_path, order: str) -> None:
    """dna_mm's ``SimpleFPN`` / ``LN2d`` / ``LayerDecayOptimizerConstructor`` live in MMEngine's
    root registries: importing MMDetection's ``projects/ViTDet`` (which registers the same names
    in the ``mmdet`` registries) works in either order; in the ``mmdet`` scope the project's
    classes are found first, dna_mm's stay reachable as ``mmengine.<name>``."""
    import subprocess
    import sys

    (tmp_path / 'vitdet_project.py').write_text(PROJECT_STANDIN)
    imports = ['import dna_mm', 'import vitdet_project']
    code = '\n'.join(
        (imports if order == 'dna_mm first' else imports[::-1])
        + [
            'from mmdet.registry import MODELS, OPTIM_WRAPPER_CONSTRUCTORS',
            'print(MODELS.get("SimpleFPN").__module__, MODELS.get("LN2d").__module__,',
            '      OPTIM_WRAPPER_CONSTRUCTORS.get("LayerDecayOptimizerConstructor").__module__,',
            '      MODELS.get("mmengine.SimpleFPN").__module__)',
        ]
    )
    out = subprocess.run(
        [sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ['vitdet_project'] * 3 + ['dna_mm.models.necks.simple_fpn']
