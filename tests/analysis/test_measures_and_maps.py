"""dna_mm.analysis: each measure against an independent computation on crafted inputs, the
collector on registry-built models, relevance against a hand-written forward."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import timm
import torch
from conftest import DEMO_CONFIG, REPO, tiny_backbone, tiny_run_options
from mmengine.config import Config, DictAction
from scipy.spatial.distance import pdist
from scipy.stats import entropy as scipy_entropy
from tolerance import REORDERED, ROUNDING, SUMMED, assert_close_as

import dna_mm  # noqa: F401
from dna_mm.analysis import (
    AttentionCollector,
    TokenDistanceCollector,
    attention_entropy,
    aurra,
    branch_cosine,
    eager_attention,
    find_attention_sites,
    head_redundancy,
    intruder_dimensions,
    ood_measures,
    relevance_maps,
    rms_calibration_error,
    token_distance,
    value_alignment,
)
from dna_mm.analysis.models import load_timm_model
from dna_mm.analysis.relevance import spatial_to_tokens, temporal_to_tokens
from dna_mm.analysis.report import SCHEMA, analyze
from dna_mm.evaluation.calibration import fpr_at_recall


def _softmax_rows(b, h, m, n):
    return torch.randn(b, h, m, n).softmax(-1)


# -- measures --------------------------------------------------------------------------------
def test_entropy_uniform_onehot_and_scipy() -> None:
    n = 7
    uniform = torch.full((2, 3, 5, n), 1 / n)
    assert_close_as(attention_entropy(uniform), torch.full((3,), math.log(n)), ulps=REORDERED)
    onehot = torch.eye(n)[:5].expand(2, 3, 5, n)
    assert_close_as(attention_entropy(onehot), torch.zeros(3), ulps=REORDERED, magnitude=math.log(n))
    a = _softmax_rows(2, 3, 10, n)
    ent = scipy_entropy(a.numpy(), axis=-1)  # [B, H, M], per row
    assert_close_as(attention_entropy(a), ent.mean(axis=(0, 2)), ulps=REORDERED)
    top = np.sort(ent, axis=-1)[..., ::-1][..., : math.ceil(0.3 * 10)].mean(axis=-1).mean(axis=0)
    assert_close_as(attention_entropy(a, top_k_percent=30), top, ulps=REORDERED)
    half = torch.cat([uniform[:, :, :5], onehot], dim=2)  # 5 uniform rows, 5 one-hot rows
    assert_close_as(attention_entropy(half, top_k_percent=50), torch.full((3,), math.log(n)), ulps=REORDERED)
    assert_close_as(attention_entropy(half), torch.full((3,), math.log(n) / 2), ulps=REORDERED)


def test_head_redundancy_identical_disjoint_and_scipy() -> None:
    a = _softmax_rows(2, 1, 4, 6)
    assert_close_as(head_redundancy(a.expand(2, 4, 4, 6)), 0.0, ulps=REORDERED, magnitude=1.0)  # 1 - cos
    disjoint = torch.zeros(1, 2, 3, 6)
    disjoint[0, 0, :, :3], disjoint[0, 1, :, 3:] = 1 / 3, 1 / 3
    assert float(head_redundancy(disjoint)) == pytest.approx(1.0)
    a = _softmax_rows(3, 4, 5, 6)
    ref = np.mean([pdist(a[b].reshape(4, -1).numpy(), 'cosine').mean() for b in range(3)])
    assert_close_as(head_redundancy(a), ref, ulps=REORDERED)
    with pytest.raises(ValueError, match='at least 2 heads'):
        head_redundancy(a[:, :1])


def test_value_alignment_orthogonal_parallel_and_trace() -> None:
    v = torch.randn(2, 3, 9, 8)
    half = torch.zeros_like(v)
    vp, vn = half.clone(), half.clone()
    vp[..., :4], vn[..., 4:] = v[..., :4], v[..., 4:]  # disjoint columns: V+ᵀV- = 0
    assert_close_as(value_alignment(vp, vn), torch.zeros(2, 3), ulps=REORDERED, magnitude=1.0)  # a cosine
    assert_close_as(value_alignment(v, 2 * v), torch.ones(2, 3), ulps=REORDERED)
    assert_close_as(value_alignment(v, -v), -torch.ones(2, 3), ulps=REORDERED)
    w = torch.randn(2, 3, 9, 8)
    ref = [
        [
            np.trace(v[b, h].numpy().T @ w[b, h].numpy())
            / (np.linalg.norm(v[b, h].numpy()) * np.linalg.norm(w[b, h].numpy()))
            for h in range(3)
        ]
        for b in range(2)
    ]
    assert_close_as(value_alignment(v, w), ref, ulps=REORDERED)
    assert torch.equal(branch_cosine(v, w), value_alignment(v, w))


def _orthonormal(n: int, k: int) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(n, k, dtype=torch.float64))[0]


def test_intruder_dimensions_crafted_subspaces() -> None:
    n, d, k = 40, 24, 10
    u = _orthonormal(n, d)  # left singular vectors of a
    a = u @ torch.diag(torch.linspace(10, 1, d, dtype=torch.float64)) @ _orthonormal(d, d).T

    def branch(cols):  # top-10 left SVs = the given columns
        s = torch.diag(torch.linspace(5, 2, len(cols), dtype=torch.float64))
        return u[:, cols] @ s @ _orthonormal(d, len(cols)).T

    same = branch(list(range(9, -1, -1)))  # a's top-10, in another order
    other = branch(list(range(10, 20)))  # orthogonal to a's top-10
    mixed = branch([0, 4, 7] + list(range(10, 17)))  # shares 3 directions
    for b, expected in ((same, 0), (other, 10), (mixed, 7)):
        got = intruder_dimensions(a[None, None], b[None, None], k=k, eps=0.5)
        assert got.tolist() == [[expected]]
    # k is clipped to min(N, d)
    small = torch.randn(1, 2, 6, 8)
    assert int(intruder_dimensions(small, small, k=10).max()) == 0
    assert int(intruder_dimensions(small, -small, k=10).max()) == 0


def test_token_distance_against_pdist() -> None:
    t = torch.randn(2, 12, 8)
    for center, ref_tokens in (
        ('feature', t - t.mean(-1, keepdim=True)),
        ('token', t - t.mean(1, keepdim=True)),
        (None, t),
    ):
        ref = [pdist(ref_tokens[b].numpy(), 'cosine').mean() for b in range(2)]
        assert_close_as(token_distance(t, center), ref, ulps=REORDERED, what=str(center))
    same = torch.randn(1, 1, 8).expand(1, 5, 8)
    assert_close_as(token_distance(same), [0.0], ulps=REORDERED, magnitude=1.0)  # 1 - cos


# -- calibration / OOD ----------------------------------------------------------------------
def _bins(spec):
    """[(confidence, accuracy)] → 100 samples each."""
    conf = np.concatenate([np.full(100, c) for c, _ in spec])
    corr = np.concatenate([np.r_[np.ones(round(100 * a)), np.zeros(100 - round(100 * a))] for _, a in spec])
    return conf, corr


def test_rmsce_calibrated_known_and_last_bin() -> None:
    conf, corr = _bins([(0.3, 0.3), (0.6, 0.6), (0.9, 0.9)])
    assert_close_as(rms_calibration_error(conf, corr), 0.0, ulps=REORDERED, magnitude=1.0)
    conf, corr = _bins([(0.3, 0.5), (0.6, 0.6), (0.9, 0.5)])
    # dropped last (most confident) bin: sqrt(1/3 · 0.2²); all bins: sqrt((0.2² + 0.4²) / 3)
    assert rms_calibration_error(conf, corr) == pytest.approx(math.sqrt(0.04 / 3))
    assert rms_calibration_error(conf, corr, drop_last_bin=False) == pytest.approx(math.sqrt(0.2 / 3))
    perm = np.random.default_rng(0).permutation(300)  # input order does not matter
    assert rms_calibration_error(conf[perm], corr[perm]) == pytest.approx(math.sqrt(0.04 / 3))
    with pytest.raises(ValueError, match='need at least 200 samples'):
        rms_calibration_error(conf[:150], corr[:150])


def test_rmsce_equals_torchmetrics_l2_when_the_bins_coincide() -> None:
    from torchmetrics.functional.classification import binary_calibration_error

    conf, corr = _bins([(0.2, 0.5), (0.5, 0.1), (0.8, 0.7)])
    conf = conf + np.random.default_rng(0).uniform(-0.1, 0.1, conf.size)  # still one bin each
    ref = float(binary_calibration_error(torch.tensor(conf), torch.tensor(corr).long(), n_bins=3, norm='l2'))
    assert_close_as(rms_calibration_error(conf, corr, drop_last_bin=False), ref, ulps=REORDERED)
    # equal-width and equal-count bins differ once the counts are unequal
    ref15 = float(
        binary_calibration_error(torch.tensor(conf), torch.tensor(corr).long(), n_bins=15, norm='l2')
    )
    assert abs(rms_calibration_error(conf, corr, drop_last_bin=False) - ref15) > 1e-3


def test_aurra_known_value() -> None:
    assert aurra([0.7, 0.9, 0.8], [1, 1, 0]) == pytest.approx((1 + 1 / 2 + 2 / 3) / 3)
    assert aurra([0.9, 0.1], [1, 1]) == 1.0


def test_ood_measures_known_values_and_pair_count() -> None:
    m = ood_measures(conf_in=[0.9, 0.8, 0.7], conf_out=[0.6, 0.85])
    # AUROC: P(conf_out < conf_in) = 4 of 6 pairs; AP of OOD: ranks 1 and 4 -> (1 + 2/4) / 2;
    # catching both OOD needs the threshold at 0.85, which flags 0.8 and 0.7: FPR 2/3
    assert m == pytest.approx(dict(auroc=4 / 6, aupr=0.75, fpr=2 / 3))
    rng = np.random.default_rng(0)
    c_in, c_out = rng.uniform(size=50).round(2), rng.uniform(size=30).round(2) * 0.8
    pairs = (c_out[:, None] < c_in[None]).mean() + 0.5 * (c_out[:, None] == c_in[None]).mean()
    assert ood_measures(c_in, c_out)['auroc'] == pytest.approx(pairs)
    # FPR at the recall closest to the target. Positives 39..21 and 15, negatives 5, 10..18:
    # recall 19/20 = 0.95 holds for every threshold from 21 down to 16; the reference's scan
    # takes the lowest of them, flagging the negatives 16, 17, 18 -> 3/10. Recall 1 needs the
    # threshold 15, where a negative ties with the last positive -> 15..18 flagged, 4/10.
    labels = np.r_[np.ones(20), np.zeros(10)]
    scores = np.r_[np.arange(21, 40)[::-1], 15, 5, np.arange(10, 19)]
    assert fpr_at_recall(labels, scores, 0.95) == pytest.approx(3 / 10)
    assert fpr_at_recall(labels, scores, 1.0) == pytest.approx(4 / 10)


# -- collector on real models --------------------------------------------------------------------
def _timesformer(attn: str):
    from mmaction.registry import MODELS
    from mmengine.registry import init_default_scope

    parser = __import__('argparse').ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options('/none', attn)]).o)
    cfg.model.backbone.num_transformer_layers = 2
    init_default_scope('mmaction')
    model = MODELS.build(cfg.model).eval()
    for m in model.modules():  # non-zero temporal_fc, random α: every path counts
        if hasattr(m, 'temporal_fc'):
            torch.nn.init.normal_(m.temporal_fc.weight, std=0.3)
        if getattr(m, 'alpha', None) is not None:
            m.alpha.data.uniform_(-1, 1)
    return model


def _inputs_of(sites):
    seen = {}

    def keep(name: str, module, args) -> None:  # returns None: the call's arguments unchanged
        seen.setdefault(name, args[0].detach())

    hooks = [s.module.register_forward_pre_hook(functools.partial(keep, s.name)) for s in sites]
    return seen, hooks


@pytest.mark.parametrize('attn', ['dna', 'diff', 'softmax'])
def test_collector_on_timesformer_matches_the_modules_own_maps(attn: str) -> None:
    model = _timesformer(attn)
    x = torch.randn(2, 1, 3, 8, 32, 32)
    with torch.no_grad():
        ref = model(x, mode='tensor', stage='head')
        collector = AttentionCollector(model)
        seen, hooks = _inputs_of(collector.sites)
        with collector:
            out = model(x, mode='tensor', stage='head')
        for h in hooks:
            h.remove()
    assert_close_as(out, ref, ulps=REORDERED)  # eager path inside, same function
    assert all(s.module.fused_attn and 'attend' not in vars(s.module) for s in collector.sites)
    assert [(s.layer, s.group) for s in collector.sites] == [
        (0, 'temporal'),
        (0, 'spatial'),
        (1, 'temporal'),
        (1, 'spatial'),
    ]
    rec = collector.records()
    for site in collector.sites:
        with torch.no_grad():
            x = seen[site.name].transpose(0, 1)  # the steps call nn.MultiheadAttention's way, tokens first
            _, maps = type(site.module).forward(site.module, x, return_attn=True)  # the member's own call
            heads = site.module.project(x)
        for branch, a in maps.items():
            r = next(e for e in rec['entropy'] if e['site'] == site.name and e['branch'] == branch)
            ent = scipy_entropy(a.numpy(), axis=-1)  # [B, H, M]
            assert_close_as(r['per_head'], ent.mean(axis=(0, 2)), ulps=REORDERED, dtype=torch.float32)
            assert r['num_maps'] == a.shape[0]  # temporal: 2 clips × 16 patches, spatial: 2 × 8 frames
            assert r['num_keys'] == a.shape[-1] == (8 if site.group == 'temporal' else 17)  # max: log N
        if attn == 'softmax':
            assert 'cvv' not in rec and 'branch_cosine' not in rec
            continue
        pos = maps['pos'] @ heads['v']
        neg = maps['neg'] @ heads.get('v_neg', heads['v'])
        cos = next(e for e in rec['branch_cosine'] if e['site'] == site.name)
        ref_cos = [
            [
                np.dot(p.flatten(), q.flatten()) / (np.linalg.norm(p) * np.linalg.norm(q))
                for p, q in zip(pb.numpy(), qb.numpy(), strict=True)
            ]
            for pb, qb in zip(pos, neg, strict=True)
        ]
        assert_close_as(cos['mean'], np.mean(ref_cos), ulps=REORDERED, dtype=torch.float32)
        if attn == 'dna':
            c = next(e for e in rec['cvv'] if e['site'] == site.name)
            v, vn = heads['v'].numpy(), heads['v_neg'].numpy()
            ref_c = [
                [
                    np.trace(v[b, h].T @ vn[b, h]) / (np.linalg.norm(v[b, h]) * np.linalg.norm(vn[b, h]))
                    for h in range(v.shape[1])
                ]
                for b in range(v.shape[0])
            ]
            assert_close_as(c['per_head_mean'], np.mean(ref_c, axis=0), ulps=REORDERED, dtype=torch.float32)
            mid = np.sort(np.ravel(ref_c))[[len(np.ravel(ref_c)) // 2 - 1, len(np.ravel(ref_c)) // 2]]
            assert mid[0] - 2 / 400 <= c['median'] <= mid[1] + 2 / 400  # a median, to one bin
        intr = next(e for e in rec['intruders'] if e['site'] == site.name)
        assert sum(intr['histogram']) == pos.shape[0] * pos.shape[1]
        ref_counts = intruder_dimensions(pos, neg, k=10, eps=0.5).double()  # [B, H], the function as is
        assert np.allclose(intr['per_head_mean'], ref_counts.mean(0).numpy())
        assert intr['mean'] == pytest.approx(float(ref_counts.mean()))


def test_collector_on_a_vitdet_backbone_with_windows_and_rel_pos() -> None:
    """ViTDet blocks take [B, H, W, C] grids, window blocks attend per window and DnA adds each
    branch's relative-position bias: the collector still sees the maps the module computes."""
    from mmdet.registry import MODELS as DET_MODELS
    from mmengine.registry import init_default_scope

    init_default_scope('mmdet')
    model = DET_MODELS.build(
        tiny_backbone('ViTDet', window_size=2, window_block_indexes=[0], use_rel_pos=True)
    ).eval()
    for name, p in model.named_parameters():
        if 'rel_pos' in name:
            torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(2, 3, 32, 32)
    collector = AttentionCollector(model, ['entropy'])
    seen, hooks = _inputs_of(collector.sites)
    with torch.no_grad(), collector, TokenDistanceCollector(model) as tokens:
        model(x)
    for h in hooks:
        h.remove()
    assert [(s.name, s.layer, s.group) for s in collector.sites] == [
        ('blocks.0.attn', 0, 'attn'),
        ('blocks.1.attn', 1, 'attn'),
    ]
    rec = collector.records()['entropy']
    for site in collector.sites:
        with torch.no_grad():
            _, maps = site.module(seen[site.name], return_attn=True)
        windows = 8 if site.layer == 0 else 2  # 2 images × (2×2 windows of 2×2 | 1 global 4×4)
        assert maps['pos'].shape[0] == windows
        for branch in ('pos', 'neg'):
            r = next(e for e in rec if e['site'] == site.name and e['branch'] == branch)
            ref = scipy_entropy(maps[branch].numpy(), axis=-1).mean(axis=(0, 2))
            assert_close_as(r['per_head'], ref, ulps=REORDERED, dtype=torch.float32)
            assert r['num_maps'] == windows
    assert sorted(tokens.distances()[0.0]) == [0, 1]


def test_eager_attention_restores_the_fast_path_after_an_error() -> None:
    model = _timesformer('dna')
    sites = find_attention_sites(model)
    with pytest.raises(RuntimeError, match='boom'):
        with eager_attention(sites, lambda *a: (_ for _ in ()).throw(RuntimeError('boom'))):
            model(torch.randn(1, 1, 3, 8, 32, 32), mode='tensor', stage='head')
    assert all(s.module.fused_attn and not s.module._attend_hooks for s in sites)


def _tiny_vit(depth: int = 2, **kw):
    return timm.create_model(
        'dna_vit_tiny_patch16_224',
        img_size=32,
        patch_size=8,
        depth=depth,
        embed_dim=32,
        num_heads=2,
        num_classes=3,
        **kw,
    ).eval()


def test_token_distance_collector_hooks_the_blocks_without_cls() -> None:
    model = _tiny_vit()
    x = torch.randn(3, 3, 32, 32)
    outs = []
    hooks = [b.register_forward_hook(lambda m, a, o: outs.append(o)) for b in model.blocks]
    with torch.no_grad(), TokenDistanceCollector(model) as col:
        model(x)
    for h in hooks:
        h.remove()
    got = col.distances()[0.0]
    for layer, o in enumerate(outs):
        patches = o[:, 1:] - o[:, 1:].mean(-1, keepdim=True)  # no CLS, feature-centred
        ref = np.mean([pdist(p.numpy(), 'cosine').mean() for p in patches])
        assert_close_as(got[layer], ref, ulps=REORDERED, dtype=torch.float32, what=str(layer))


def test_analyze_report_on_a_timm_image_folder(tmp_path) -> None:
    from PIL import Image

    model = _tiny_vit()
    torch.save(model.state_dict(), tmp_path / 'vit.pth')
    (tmp_path / 'img').mkdir()
    for i in range(3):
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (40, 36, 3), dtype=np.uint8)).save(
            tmp_path / 'img' / f'{i}.png'
        )
    am = load_timm_model(
        'dna_vit_tiny_patch16_224',
        str(tmp_path / 'vit.pth'),
        dict(img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2, num_classes=3),
        str(tmp_path / 'img'),
        batch_size=2,
    )
    rep = analyze(am, sigmas=[0.5, 1.0])
    assert rep['schema'] == SCHEMA and rep['num_samples'] == 3
    assert [r['layer'] for r in rep['alpha']] == [0, 1]
    assert {(r['layer'], r['branch']) for r in rep['entropy']} == {
        (i, b) for i in (0, 1) for b in ('pos', 'neg')
    }
    assert [e['sigma'] for e in rep['robustness']] == [0.0, 0.5, 1.0]
    assert rep['robustness'][1]['psnr'] > rep['robustness'][2]['psnr']
    assert sum(rep['summary']['intruders']['histogram']) == 3 * 2 * 2  # samples × heads × layers
    with pytest.raises(Exception, match='does not match the model'):
        load_timm_model(
            'dna_vit_tiny_patch16_224',
            str(tmp_path / 'vit.pth'),
            dict(img_size=32, patch_size=8, depth=3, embed_dim=32, num_heads=2, num_classes=3),
            str(tmp_path / 'img'),
        )


# -- relevance -----------------------------------------------------------------------------------
def test_relevance_equals_the_rule_on_a_hand_written_forward() -> None:
    """One DnA block: R = I + cam, so R[CLS, patches] = cam[CLS, patches]; the maps and their
    gradients are recomputed here from the formula, outside the module."""
    model = _tiny_vit(depth=1)
    attn = model.blocks[0].attn
    attn.alpha.data = torch.tensor([0.7, -0.4])
    x = torch.randn(1, 3, 32, 32)
    am = type('AM', (), dict(model=model, forward=model, is_classifier=True, name='vit'))()
    rel = relevance_maps(am, x)
    with torch.no_grad():
        tokens = model.norm_pre(model._pos_embed(model.patch_embed(x)))  # [1, 17, 32]
        heads = attn.project(model.blocks[0].norm1(tokens))
    s = attn.scale
    a_pos = (s * heads['q'] @ heads['k'].transpose(-2, -1)).softmax(-1).requires_grad_()
    a_neg = (-s * heads['q_neg'] @ heads['k'].transpose(-2, -1)).softmax(-1).requires_grad_()
    o = a_pos @ heads['v'] + attn.alpha.view(1, -1, 1, 1) * (a_neg @ heads['v_neg'])
    blk = model.blocks[0]
    h = tokens + attn.proj(o.transpose(1, 2).reshape(1, 17, 32))
    h = h + blk.mlp(blk.norm2(h))
    logits = model.forward_head(model.norm(h))
    y = logits[0, int(logits.argmax())]
    g_pos, g_neg = torch.autograd.grad(y, [a_pos, a_neg])
    for chain, a, g in (('pos', a_pos, g_pos), ('neg', a_neg, g_neg)):
        cam = (g * a).clamp(min=0).mean(1)[0]  # [17, 17]
        assert_close_as(rel.raw[chain].flatten(), cam[0, 1:], ulps=SUMMED, what=chain)  # gradients
        assert rel.maps[chain].shape == (1, 32, 32)
    assert rel.target == int(logits.argmax())


def test_divided_layouts_place_each_map_on_the_right_tokens() -> None:
    """Token (p, t) sits at 1 + p·T + t; derived here from the wrappers' own rearrangement."""
    from einops import rearrange

    p, t = 3, 2
    idx = torch.arange(1, 1 + p * t)[None, :, None]  # the [B, P·T, 1] token ids
    spatial_ids = rearrange(idx, 'b (p t) m -> (b t) p m', p=p, t=t)[..., 0]  # [T, P]
    temporal_ids = idx.reshape(p, t)  # [(B·P), T]
    cam_t = torch.rand(p, t, t)
    full = temporal_to_tokens(cam_t)
    for q in range(p):
        for i in range(t):
            for j in range(t):
                assert full[temporal_ids[q, i], temporal_ids[q, j]] == cam_t[q, i, j]
    assert full[0].abs().sum() == 0 and full[:, 0].abs().sum() == 0
    assert (full != 0).sum() == p * t * t
    cam_s = torch.rand(t, 1 + p, 1 + p)
    full = spatial_to_tokens(cam_s)
    for f in range(t):
        for i in range(p):
            assert full[spatial_ids[f, i], 0] == cam_s[f, 1 + i, 0]
            assert_close_as(full[0, spatial_ids[f, i]], cam_s[f, 0, 1 + i] / t, ulps=ROUNDING)
            for j in range(p):
                assert full[spatial_ids[f, i], spatial_ids[f, j]] == cam_s[f, 1 + i, 1 + j]
    assert_close_as(full[0, 0], cam_s[:, 0, 0].mean(), ulps=ROUNDING)
    assert (full != 0).sum() == t * (p * p + 2 * p) + 1


def test_relevance_on_a_timesformer_clip_gives_one_map_per_frame() -> None:
    model = _timesformer('dna')
    am = type(
        'AM',
        (),
        dict(
            model=model,
            is_classifier=True,
            name='tsf',
            forward=lambda self, x: model(x, mode='tensor', stage='head'),
        ),
    )()
    rel = relevance_maps(am, torch.randn(1, 1, 3, 8, 32, 32), target=2)
    assert rel.target == 2 and set(rel.maps) == {'pos', 'neg'}
    for chain in ('pos', 'neg'):
        assert rel.raw[chain].shape == (8, 4, 4)  # frames × patch grid
        m = rel.maps[chain]
        assert m.shape == (8, 32, 32) and float(m.min()) == 0 and float(m.max()) == pytest.approx(1)
    assert not torch.allclose(rel.raw['pos'], rel.raw['neg'])


def test_cli_errors_name_the_file(tmp_path, capsys) -> None:
    from conftest import load_tool

    def tool(name):
        return load_tool(f'tools/analysis/{name}.py')

    from PIL import Image

    torch.save(_tiny_vit().state_dict(), tmp_path / 'vit.pth')
    Image.new('RGB', (32, 32)).save(tmp_path / 'img.png')
    (tmp_path / 'notes.txt').write_text('not an image')
    args = [
        'timm:dna_vit_tiny_patch16_224',
        str(tmp_path / 'vit.pth'),
        '--out',
        str(tmp_path),
        '--cfg-options',
        'img_size=32',
        'patch_size=8',
        'depth=2',
        'embed_dim=32',
        'num_heads=2',
        'num_classes=3',
    ]
    cases = [
        ('relevance_maps', [*args, '--input', str(tmp_path / 'nope.png')], 'nope.png does not exist'),
        ('relevance_maps', [*args, '--input', str(tmp_path / 'notes.txt')], '--input must be an image'),
        ('relevance_maps', [*args, '--input', f'{tmp_path}/img.png', '--target', '7'], 'target 7 outside'),
        ('analyze_attention', [*args, '--input-dir', str(tmp_path / 'none')], 'not a directory'),
        ('analyze_attention', args, 'pass an image folder (--input-dir)'),
        (
            'analyze_attention',
            ['timm:dna_vit_tiny_patch16_224', str(tmp_path / 'missing.pth'), '--out', str(tmp_path / 'new')],
            'missing.pth does not exist',
        ),
        (  # every run's files are checked before the first run starts
            'analyze_attention',
            [*args, '--compare', 'b', 'timm:dna_vit_tiny_patch16_224', str(tmp_path / 'gone.pth')],
            'gone.pth does not exist',
        ),
    ]
    for name, argv, message in cases:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            tool(name).main(argv)
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(f'{name}.py: ')]
        assert exit_info.value.code == 2 and err[0].startswith(f'{name}.py: error: ') and message in err[0]
        assert err[1:] == [f'{name}.py: (--debug prints the traceback)']
    assert not (tmp_path / 'new').exists()  # nothing written for a run that cannot start
    with pytest.raises(FileNotFoundError, match='nope.png'):  # --debug: the exception itself
        tool('relevance_maps').main([*args, '--input', str(tmp_path / 'nope.png'), '--debug'])
    # an input that cannot be decoded is named and skipped, the others explained; status 1
    (tmp_path / 'broken.png').write_bytes(b'\x00not an image' * 8)
    inputs = [str(tmp_path / 'broken.png'), str(tmp_path / 'img.png')]
    with pytest.raises(SystemExit) as exit_info:
        tool('relevance_maps').main([*args, '--input', *inputs])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and f'{inputs[0]}\n  cannot be read: ' in err
    assert '1 of 2 inputs could not be read' in err
    assert (tmp_path / 'img_relevance.png').exists() and not (tmp_path / 'broken_relevance.json').exists()


# -- figures -------------------------------------------------------------------------------------
def _report(attn: str, label: str) -> dict:
    """A real analysis of a tiny 2-layer TimeSformer on random clips (2 batches of 2)."""
    from dna_mm.analysis.models import AnalysisModel, Batch

    model = _timesformer(attn)

    def batches(num_samples):
        gen = torch.Generator().manual_seed(0)
        for _ in range(2):
            yield Batch(torch.randn(2, 1, 3, 8, 32, 32, generator=gen), torch.tensor([0, 1]), dict(total=4))

    one = torch.ones(1, 1, 3, 1, 1, 1)
    am = AnalysisModel(
        model, lambda x: model(x, mode='tensor', stage='head'), batches, 0 * one, one, 1.0, True, attn, None
    )
    return analyze(am, sigmas=[0.5, 1.0], label=label, progress=True)


@pytest.fixture(scope='module')
def three_reports() -> list[dict]:
    from mmengine.registry import init_default_scope

    init_default_scope('mmaction')
    torch.manual_seed(0)
    return [_report('dna', 'DnA'), _report('softmax', 'softmax'), _report('diff', 'Diff')]


def _saved_figures(monkeypatch) -> list:
    """The figures saved from now on (``Figure.savefig`` still writes them)."""
    from matplotlib.figure import Figure

    kept, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, 'savefig', lambda fig, *a, **k: (kept.append(fig), savefig(fig, *a, **k))[1])
    return kept


def _drawn(monkeypatch, plot, reports, path) -> 'matplotlib.figure.Figure':  # noqa: F821
    """Call ``plot`` and keep the figure it saves."""
    kept = _saved_figures(monkeypatch)
    assert plot(reports, str(path)) == str(path)
    assert path.read_bytes()[:4] == b'\x89PNG'
    (fig,) = kept
    return fig


def _hlines(ax) -> set[float]:
    return {round(float(ln.get_ydata()[0]), 4) for ln in ax.get_lines() if len(set(ln.get_ydata())) == 1}


def _one_legend_off_the_data(fig) -> list[str]:
    """One figure legend, no axes legend, and the legend overlaps no panel; its labels."""
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)
    return [t.get_text() for t in legend.get_texts()]


def test_histogram_quantiles_match_numpy() -> None:
    from dna_mm.analysis.collector import histogram_quantiles

    values = np.random.default_rng(0).normal(0.1, 0.3, 20000).clip(-1, 1)
    edges = np.linspace(-1, 1, 401)
    counts, _ = np.histogram(values, edges)
    got = histogram_quantiles(counts, edges, (0.05, 0.25, 0.5, 0.75, 0.95))
    assert np.allclose(got, np.quantile(values, (0.05, 0.25, 0.5, 0.75, 0.95)), atol=2 / 400)


def test_alpha_figure_scale_init_line_and_legend(three_reports, monkeypatch, tmp_path) -> None:
    from dna_mm.analysis.plots import plot_alpha

    fig = _drawn(monkeypatch, plot_alpha, three_reports, tmp_path / 'alpha.png')
    temporal, spatial, spread = fig.axes[:3]
    assert temporal.get_ylim() == spatial.get_ylim()
    lo, hi = temporal.get_ylim()
    assert lo < 0 < 1 < hi  # α in [-1, 1] here (randomised), the scale holds 0, 1 and the init
    assert 0.5 in _hlines(temporal) and 0.5 in _hlines(spatial)
    assert spread.get_ylim()[0] == 0 and 'std' in spread.get_ylabel()
    labels = _one_legend_off_the_data(fig)
    assert labels[0] == 'DnA' and 'softmax' not in labels  # runs without α are not listed


def test_entropy_figure_has_log_n_per_attention(three_reports, monkeypatch, tmp_path) -> None:
    from dna_mm.analysis.plots import plot_entropy

    fig = _drawn(monkeypatch, plot_entropy, three_reports, tmp_path / 'entropy.png')
    temporal, spatial = fig.axes
    assert round(math.log(8), 4) in _hlines(temporal) and round(math.log(17), 4) in _hlines(spatial)
    assert temporal.get_ylim() == spatial.get_ylim() and temporal.get_ylim()[0] == 0
    assert temporal.get_ylim()[1] > math.log(17)
    labels = _one_legend_off_the_data(fig)
    assert (
        labels[:3] == ['DnA', 'softmax', 'Diff'] and len(labels) == 3 + 3 + 2
    )  # runs, branches, top-k, log N


def test_redundancy_cvv_intruders_robustness_figures(three_reports, monkeypatch, tmp_path) -> None:
    from dna_mm.analysis.plots import plot_cvv, plot_intruders, plot_redundancy, plot_robustness

    fig = _drawn(monkeypatch, plot_redundancy, three_reports, tmp_path / 'redundancy.png')
    assert '1 − cos' in fig._suptitle.get_text() and '1 − cos' in fig.axes[0].get_ylabel()
    assert fig.axes[0].get_ylim()[0] == 0
    _one_legend_off_the_data(fig)

    fig = _drawn(monkeypatch, plot_cvv, three_reports, tmp_path / 'cvv.png')
    assert len(fig.axes) == 4  # (C(V+,V-), branch cosine) × (temporal, spatial)
    assert {ax.get_ylim() for ax in fig.axes} == {(-1.05, 1.05)}
    assert [ax.get_title() for ax in fig.axes[:2]] == [
        'value subspaces, temporal',
        'value subspaces, spatial',
    ]
    labels = _one_legend_off_the_data(fig)
    assert [lbl.split(' ')[0] for lbl in labels] == ['DnA', 'Diff']  # softmax has neither

    fig = _drawn(monkeypatch, plot_intruders, three_reports, tmp_path / 'intruders.png')
    assert [ax.get_title() for ax in fig.axes] == ['temporal attention', 'spatial attention']
    _one_legend_off_the_data(fig)

    fig = _drawn(monkeypatch, plot_robustness, three_reports, tmp_path / 'robustness.png')
    assert 'within a clip' in fig.axes[0].get_ylabel() and fig.axes[-1].get_ylabel() == 'top-1 (%)'
    assert [ax.get_title().split(' (')[0] for ax in fig.axes[:2]] == ['σ = 0.5', 'σ = 1']
    labels = _one_legend_off_the_data(fig)
    assert labels == ['DnA', 'softmax', 'Diff', 'clean input', 'input + Gaussian noise of std σ']


def test_relevance_figure_frames_colour_bars_and_grey_background(monkeypatch, tmp_path) -> None:
    from dna_mm.analysis.plots import RELEVANCE_CMAPS, plot_relevance

    frames = np.zeros((3, 16, 16, 3))
    frames[..., 0] = 1.0  # a red clip: the overlay must not depend on the input's colours
    maps = {
        'pos': np.random.default_rng(0).random((3, 16, 16)),
        'neg': np.random.default_rng(1).random((3, 16, 16)),
    }
    kept = _saved_figures(monkeypatch)
    plot_relevance(frames, maps, str(tmp_path / 'r.png'), 'title', [4, 12, 20], 'normalised per branch')
    (fig,) = kept
    axes = np.array(fig.axes[:12]).reshape(3, 4)
    assert [ax.get_title() for ax in axes[0, :3]] == ['frame 4', 'frame 12', 'frame 20']
    assert [axes[r, 0].get_ylabel() for r in range(3)] == ['input', 'positive branch', 'negative branch']
    assert not axes[0, 3].axison and [axes[r, 3].get_ylim() for r in (1, 2)] == [
        (0, 1),
        (0, 1),
    ]  # colour bars
    background = axes[1, 0].get_images()[0].get_array()
    assert background.ndim == 2  # a grey frame under the overlay
    top_pos, top_neg = RELEVANCE_CMAPS['pos'](1.0), RELEVANCE_CMAPS['neg'](1.0)
    assert top_pos[0] > top_pos[2] and top_neg[2] > top_neg[0]  # orange vs blue
    assert any('normalised per branch' in t.get_text() for t in fig.texts)


def test_figures_leave_the_backend_alone_and_name_every_method_and_likeness() -> None:
    from dna_mm.analysis.plots.study import LIKENESS_NAMES, LIKENESS_STYLE, method_label
    from dna_mm.models.attention import short_names

    for path in (REPO / 'dna_mm' / 'analysis' / 'plots').glob('*.py'):
        text = path.read_text()
        assert not any(s in text for s in ('matplotlib.use(', 'import pyplot', 'matplotlib.pyplot'))
    labels = {name: method_label(name) for name in short_names()}
    assert labels == {
        'softmax': 'softmax',
        'dna': 'DnA (Q±V±)',
        'diff': 'Diff',
        'cog': 'Cog',
        'gated': 'gated softmax',
        'sigmoid': 'sigmoid',
    }
    assert list(LIKENESS_NAMES) == list(LIKENESS_STYLE) == ['demo', 'color', 'size', 'motion']
