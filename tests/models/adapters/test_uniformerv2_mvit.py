"""MMAction2's UniFormerV2 and MViTv2 with DnA: the shipped examples build offline, a checkpoint
written by MMAction2's own (softmax) recognizer loads strictly and gives its output, two train
iterations on the demo clips; what is swapped where, MViTv2's negative pooling and per-branch
relative positions. (Softmax-inside exactness and the host checkpoint's strict load run in the
shared host tests of ``test_with_attention.py``.)"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from conftest import run_main
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from test_with_attention import EXAMPLES, HOSTS, TINY_MVIT, TINY_RUN, TINY_UNIFORMERV2
from tolerance import REORDERED, ROUNDING, assert_close_as

from dna_mm.checkpoint import load_whole_model, weights_only_loads
from dna_mm.errors import UnsupportedModelError
from dna_mm.models import DnAAttention
from dna_mm.models.adapters import swap_attention
from dna_mm.models.layers.mha_attention import MultiheadForm
from dna_mm.models.layers.mvit_attention import PoolingForm
from dna_mm.models.layers.uniformerv2_attention import ExtractorAdapter

#: example → (tiny backbone overrides, head width, DnA attentions of the tiny / the full model)
EXAMPLE_MODELS = {
    'uniformerv2-b16_dna_k400.py': (
        {k: v for k, v in TINY_UNIFORMERV2.items() if k not in ('type', 'clip_pretrained')}
        | dict(init_cfg=None),
        32,
        4,
        16,
    ),
    'mvit-s_dna_k400.py': (
        {k: v for k, v in TINY_MVIT.items() if k != 'type'}
        | dict(arch=dict(_delete_=True, **TINY_MVIT['arch'])),
        32,
        3,
        16,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize('example', list(EXAMPLE_MODELS))
def test_the_example_builds_offline_with_dna(example: str) -> None:
    """At full size (the tiny versions below build from the same files in every run)."""
    cfg = Config.fromfile(str(EXAMPLES / example))
    init_default_scope('mmaction')
    model = MODELS.build(cfg.model)  # no weights are fetched at build
    assert sum(isinstance(m, DnAAttention) for m in model.modules()) == EXAMPLE_MODELS[example][3]


def test_uniformerv2_dna_sits_in_the_clip_blocks_and_the_global_blocks() -> None:
    """Every CLIP block's ``nn.MultiheadAttention`` and every global UniBlock (``Extractor``),
    whose own ``attention`` slices the packed weights by hand, so the block itself is replaced."""
    build, _ = HOSTS['UniFormerV2']
    model = build()
    names = swap_attention(model, 'dna')
    assert names == [
        'transformer.resblocks.0.attn',
        'transformer.resblocks.1.attn',
        'transformer.dec.0',
        'transformer.dec.1',
    ]
    for i in range(2):
        attn = model.transformer.resblocks[i].attn
        assert type(attn) is DnAAttention and isinstance(attn.host_form, MultiheadForm)
        assert isinstance(model.transformer.dec[i], ExtractorAdapter)
        attn = model.transformer.dec[i].attn
        assert type(attn) is DnAAttention and isinstance(attn.host_form, MultiheadForm)


def _tiny_config(tmp_path, example: str, root) -> str:
    """A tiny version of an example (a file inheriting it, as a user would): 2 train iterations
    on the demo clips, nothing fetched (UniFormerV2's head: initialised, not the zoo's K710 head)."""
    backbone, width, _, _ = EXAMPLE_MODELS[example]
    head = dict(in_channels=width, num_classes=4)
    if 'uniformerv2' in example:
        head['init_cfg'] = dict(_delete_=True, type='TruncNormal', layer='Linear', std=0.02)
    text = (
        f"""_base_ = ['{EXAMPLES / example}']
model = dict(backbone=dict(model={backbone!r}), cls_head={head!r}, data_preprocessor=dict(blending=None))
train_dataloader = dict(  # the base's dataset class (MViTv2: RepeatAugDataset); 4 clips
    batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=True), dataset=dict(indices=4,
    ann_file='{root}/train.txt', data_prefix=dict(video='{root}/videos'), pipeline=[
        dict(type='DecordInit'), dict(type='SampleFrames', clip_len=4, frame_interval=1, num_clips=1),
        dict(type='DecordDecode'), dict(type='Resize', scale=(32, 32), keep_ratio=False),
        dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]))
"""
        + TINY_RUN
    )
    path = tmp_path / f'tiny_{example}'
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize('example', list(EXAMPLE_MODELS))
def test_mmaction_checkpoint_loads_and_the_example_trains(example: str, tiny_video_set, tmp_path) -> None:
    """A checkpoint of MMAction2's own recognizer (the base config without the swap, random
    weights, mmengine's ``{'meta', 'state_dict'}``): strictly into the DnA example with the
    negative branch generated, the same output within 1e-3 relative; then ``tools/train.py``
    starts from it (``load_from``) and trains two iterations on the demo clips."""
    cfg_path = _tiny_config(tmp_path, example, tiny_video_set)
    cfg = Config.fromfile(cfg_path)
    init_default_scope('mmaction')
    host_cfg = copy.deepcopy(cfg.model)
    host_cfg.backbone = host_cfg.backbone.model
    torch.manual_seed(0)
    host = MODELS.build(host_cfg).eval()
    with torch.no_grad():  # where MMAction2 initialises zeros (identity global blocks, tables)
        for name, p in host.named_parameters():
            if (
                name.startswith(('backbone.transformer.dec.', 'backbone.transformer.balance'))
                or 'rel_pos' in name
            ):
                p.normal_(std=0.3)
    ckpt = tmp_path / 'mmaction_softmax.pth'
    torch.save({'meta': {'epoch': 1}, 'state_dict': host.state_dict()}, ckpt)

    dna = MODELS.build(cfg.model).eval()
    n = EXAMPLE_MODELS[example][2]
    assert sum(isinstance(m, DnAAttention) for m in dna.modules()) == n
    report = load_whole_model(dna, str(ckpt), strict=True)
    assert report.complete, report.describe()
    x = torch.randn(2, 1, 3, 4, 32, 32)  # [N, clips, C, T, H, W]
    with torch.no_grad():
        ref, out = host.extract_feat(x)[0], dna.extract_feat(x)[0]
    ref, out = (torch.cat([t.flatten(1) for t in torch.utils._pytree.tree_leaves(o)], 1) for o in (ref, out))
    assert ((out - ref).norm() / ref.norm()).item() < 1e-3

    work = tmp_path / 'work'
    train = run_main(
        ['tools/train.py', cfg_path, '--work-dir', str(work), '--cfg-options', f'load_from={ckpt}']
    )
    log = train.stdout + train.stderr + ''.join(p.read_text() for p in work.rglob('*.log'))
    assert (
        f'with_attention (dna): {0 if "mvit" in example else n} attention(s) read from the host layout' in log
    )
    logged = [json.loads(line) for line in next(work.rglob('scalars.json')).read_text().splitlines()]
    losses = [entry['loss'] for entry in logged if 'loss' in entry]
    assert len(losses) == 2 and all(np.isfinite(losses))
    with weights_only_loads():
        saved = torch.load(work / 'epoch_1.pth', map_location='cpu')['state_dict']
    assert any(k.endswith('.q_neg.weight') for k in saved)


# -- MViTv2 -----------------------------------------------------------------------------------
def _mvit_dna():
    build, _ = HOSTS['MViTv2']
    model = build()
    swap_attention(model, 'dna')
    return model


def test_mvit_negative_pooling_starts_at_the_scaled_positive_one() -> None:
    """From softmax weights: ``W_q- = W_q``, ``W_v- = W_v``, the negative pooling convolutions
    copied and its norms' affine scaled (``+1e-4`` / ``-1e-4``), so the pooled ``Q-`` and ``V-``
    that enter the attention are exactly ``1e-4·Q`` and ``-1e-4·V``."""
    model = _mvit_dna()
    attn = model.mvit.blocks[1].attn  # the stage change: in_dims 16 → 32, pooled queries
    assert isinstance(attn, DnAAttention) and attn.host_form.in_dims == 16 and attn.embed_dims == 32
    q_w, _, v_w = attn.qkv.weight.chunk(3)
    assert torch.equal(attn.q_neg.weight, q_w) and torch.equal(attn.v_neg.weight, v_w)  # copies
    assert torch.equal(attn.pool_q_neg.weight, attn.pool_q.weight)
    assert_close_as(attn.norm_v_neg.bias, -1e-4 * attn.norm_v.bias, ulps=ROUNDING)
    pooled = {}
    attend = attn.attend

    def spy(heads, attn_mask, attn_bias, eager):
        pooled.update(heads, bias=attn_bias)
        return attend(heads, attn_mask, attn_bias, eager)

    attn.attend = spy
    with torch.no_grad():
        model(torch.randn(1, 3, 4, 32, 32, dtype=torch.float64))
    assert_close_as(pooled['q_neg'], 1e-4 * pooled['q'], ulps=ROUNDING)
    assert_close_as(pooled['v_neg'], -1e-4 * pooled['v'], ulps=ROUNDING)
    b_pos, b_neg = pooled['bias']  # each branch's rel-pos term from its own queries
    assert b_pos.abs().max() > 1e-2
    assert_close_as(b_neg, 1e-4 * b_pos, ulps=REORDERED)
    cls_terms = b_pos[:, :, 0].abs().max() + b_pos[:, :, :, 0].abs().max()
    assert cls_terms.item() == 0  # no rel-pos term on the CLS token


def _assert_mvit_negative_start(attn: DnAAttention) -> None:
    """The negative branch of ``attn`` where docs/adding_dna.md puts it: ``W_q- = W_q``, ``W_v- =
    W_v``, the pooling convolutions copied, the norms' affine ``±1e-4 ×`` the positive ones',
    ``α = 0.5``."""
    q_w, _, v_w = attn.qkv.weight.chunk(3)
    assert torch.equal(attn.q_neg.weight, q_w) and torch.equal(attn.v_neg.weight, v_w)  # copies
    for name, scale in (('q', 1e-4), ('v', -1e-4)):
        pos_pool, neg_pool = getattr(attn, f'pool_{name}'), getattr(attn, f'pool_{name}_neg')
        pos_norm, neg_norm = getattr(attn, f'norm_{name}'), getattr(attn, f'norm_{name}_neg')
        assert torch.equal(neg_pool.weight, pos_pool.weight)
        assert_close_as(neg_norm.weight, scale * pos_norm.weight, ulps=ROUNDING)
        assert_close_as(neg_norm.bias, scale * pos_norm.bias, ulps=ROUNDING)
    assert torch.equal(attn.alpha, torch.full_like(attn.alpha, 0.5))


def test_mvit_from_scratch_starts_as_documented_after_init_weights() -> None:
    """MMAction2's MViT built through its registry with DnA swapped in (``with_attention``):
    ``init_weights()`` (its ``init_cfg``: truncated-normal projections, norms set to 1 / 0.02)
    re-draws the positive branch and would reset the negative norms to 1; the negative branch is
    then regenerated from the positive one, so the model starts as one swapped from softmax
    weights does."""
    init_default_scope('mmaction')
    model = MODELS.build(dict(type='with_attention', model=dict(TINY_MVIT), attn_cfg='dna'))
    before = model.blocks[1].attn.qkv.weight.detach().clone()
    model.init_weights()
    for block in model.blocks:
        attn = block.attn
        assert isinstance(attn, DnAAttention) and isinstance(attn.host_form, PoolingForm)
        _assert_mvit_negative_start(attn)
    assert not torch.equal(model.blocks[1].attn.qkv.weight, before)  # init_weights ran
    assert model.blocks[1].attn.norm_q.bias.abs().max() > 0  # the host's init (bias 0.02)


def test_mvit_rel_pos_tables_train_through_the_negative_branch() -> None:
    """The rel-pos term enters the softmin branch's logits: a gradient reaching the negative
    branch's output alone reaches the shared tables."""
    model = _mvit_dna()
    attn = model.mvit.blocks[2].attn
    with torch.no_grad():  # away from the near-uniform start
        attn.norm_q_neg.weight.fill_(1.0)
    outputs = {}
    attend = attn.attend

    def spy(heads, attn_mask, attn_bias, eager):
        out, maps = attend(heads, attn_mask, attn_bias, True)
        outputs.update(maps)
        return out, maps

    attn.attend = spy
    model(torch.randn(1, 3, 4, 32, 32, dtype=torch.float64))
    (outputs['neg'] * torch.randn_like(outputs['neg'])).sum().backward()
    for table in (attn.rel_pos_h, attn.rel_pos_w, attn.rel_pos_t):
        assert table.grad is not None and table.grad.abs().max() > 1e-6


@pytest.mark.parametrize('attn_cfg', ['diff', 'cog'])
def test_mvit_relative_positions_refuse_a_member_without_position_bias(attn_cfg: str) -> None:
    """Diff and Cog declare ``takes_position_bias = False``: refused where MViTv2 has relative
    positions, run where it is built without them (pooled queries, keys and values)."""
    build, _ = HOSTS['MViTv2']
    with pytest.raises(
        UnsupportedModelError,
        match=r'mvit\.MultiScaleAttention: the member (Diff|Cog)Attention declares takes_position_bias = '
        r'False, .*; set rel_pos_embed=False, or use a member that takes a position bias$',
    ):
        swap_attention(build(), attn_cfg)
    init_default_scope('mmaction')
    model = MODELS.build(dict(TINY_MVIT, rel_pos_embed=False))
    swap_attention(model, attn_cfg)
    model(torch.randn(1, 3, 4, 32, 32))[-1][0].square().mean().backward()
