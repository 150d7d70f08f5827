"""The denoising study's instrument: the synthetic set's ground-truth boxes against its frames,
the target-mass measure on hand-built maps and on a registry-built TimeSformer, and the study's
statistics on known numbers."""

from __future__ import annotations

import hashlib
import math

import decord
import numpy as np
import pytest
import torch
from conftest import DEMO_CONFIG, tiny_run_options
from einops import rearrange
from mmengine.config import Config, DictAction
from tolerance import REORDERED, ROUNDING, assert_close_as

import dna_mm  # noqa: F401
from dna_mm.analysis.study import mean_std, paired_difference, summarize
from dna_mm.analysis.target_mass import (
    TargetMassCollector,
    attention_mass,
    box_patch_mask,
    sequence_regions,
    uniform_mass,
)
from dna_mm.synthetic.motion_clips import (
    CLASSES,
    MotionDatasetSpec,
    ensure_motion_dataset,
    load_boxes,
    motion_clips,
)

#: sha256 of every frame and both list files of the default demo set, as the generator wrote them
#: before it had boxes and distractor options (the README's figures come from that set)
DEMO_SET_SHA256 = 'b00a2772fe5d6ebe4c2302fb405b261dd51a1b8660c03b429acab57cc44c07bc'


def _red(frames_bgr: np.ndarray) -> np.ndarray:
    """``[..., H, W]`` bool: the target's red (BGR 40, 40, 230) under the set's noise (σ 8)."""
    f = frames_bgr.astype(int)
    return (f[..., 2] > 170) & (f[..., 1] < 110) & (f[..., 0] < 110)


def _inside(boxes: np.ndarray, size: int) -> np.ndarray:
    """``[T, H, W]`` bool: pixels inside any of ``boxes [K, T, 4]`` (x0, y0, x1, y1)."""
    mask = np.zeros((boxes.shape[1], size, size), bool)
    for clip_boxes in boxes:
        for t, (x0, y0, x1, y1) in enumerate(clip_boxes):
            mask[t, y0:y1, x0:x1] = True
    return mask


# -- ground truth ------------------------------------------------------------------------------
def test_default_demo_set_is_bit_identical() -> None:
    h, lines = hashlib.sha256(), []
    for split, rel, label, frames, _ in motion_clips(MotionDatasetSpec()):
        if split == 'list':  # rel: the split, frames: its list order
            h.update(''.join(lines[j] + '\n' for j in frames).encode())
            lines = []
        else:
            h.update(frames.tobytes())
            lines.append(f'{rel} {label}')
    assert h.hexdigest() == DEMO_SET_SHA256


@pytest.mark.parametrize(
    'options',
    [
        dict(num_distractors=5),
        dict(
            num_distractors=3, distractor_color='target', distractor_size='target', distractor_motion='target'
        ),
    ],
)
def test_target_pixels_lie_in_the_target_box(options) -> None:
    spec = MotionDatasetSpec(train_per_class=2, test_per_class=0, seed=7, **options)
    k = spec.target_size
    for split, rel, label, frames, boxes in motion_clips(spec):
        if split == 'list':
            continue
        target, distractors = boxes['target'], boxes['distractors']  # [T, 4], [D, T, 4]
        assert distractors.shape == (spec.num_distractors, spec.num_frames, 4)
        red = _red(frames)
        in_target = _inside(target[None], spec.size)
        in_distractors = _inside(distractors, spec.size)
        if spec.distractor_color == 'demo':
            assert not (red & ~in_target).any(), rel  # every red pixel is the target's
        else:  # red distractors: every red pixel is in the target's or a distractor's box
            assert not (red & ~(in_target | in_distractors)).any(), rel
        # the box holds the target: red wherever no distractor covers it, and k × k
        assert (red | ~in_target | in_distractors).all(), rel
        assert ((target[:, 2:] - target[:, :2]) == k).all()
        moved = target[-1, :2] != target[0, :2]  # (x, y) moved
        ay, ax = {'still': (0, 0), 'horizontal': (0, 1), 'vertical': (1, 0), 'diagonal': (1, 1)}[
            CLASSES[label]
        ]
        assert tuple(moved) == (bool(ax), bool(ay)), rel
        if spec.distractor_size == 'target':
            assert ((distractors[..., 2:] - distractors[..., :2]) == k).all()


def test_written_boxes_match_the_decoded_video(tmp_path) -> None:
    spec = MotionDatasetSpec(train_per_class=1, test_per_class=1, num_distractors=4, seed=5)
    root = ensure_motion_dataset(tmp_path / 'set', spec)
    boxes, frame_size = load_boxes(root)
    assert frame_size == (spec.size, spec.size)
    names = [ln.split()[0] for ln in (root / 'test.txt').read_text().splitlines()]
    assert sorted(boxes) == sorted(p.name for p in (root / 'videos').glob('*.mp4')) and names
    for name in names:
        rgb = (
            decord.VideoReader(str(root / 'videos' / name)).get_batch(list(range(spec.num_frames))).asnumpy()
        )
        red = np.clip(rgb[..., 0].astype(float) - rgb[..., 1] - 60, 0, None)  # [T, H, W] the target's red
        for t, (x0, y0, x1, y1) in enumerate(boxes[name]['target']):
            # all the red within a pixel of the box (the codec's chroma is at half resolution)
            assert red[t, max(0, y0 - 1) : y1 + 1, max(0, x0 - 1) : x1 + 1].sum() >= 0.99 * red[t].sum(), (
                name,
                t,
            )
        assert boxes[name]['distractors'].shape == (4, spec.num_frames, 4)


def test_bad_generator_option_names_the_field() -> None:
    with pytest.raises(
        ValueError, match=r"distractor_color: expected one of \('demo', 'target'\), got 'blue'"
    ):
        MotionDatasetSpec(distractor_color='blue')


# -- the measure ---------------------------------------------------------------------------------
def test_box_patch_mask_known_patches() -> None:
    boxes = torch.tensor(
        [[[6, 0, 14, 8]], [[8, 8, 16, 16]], [[0, 0, 8, 8]], [[30, 30, 32, 32]]]
    )  # [T=4, K=1, 4]
    mask = box_patch_mask(boxes, (4, 4), (8, 8))  # 32 × 32 pixels, 16 patches
    assert [torch.nonzero(m).flatten().tolist() for m in mask] == [[0, 1], [5], [0], [15]]
    both = box_patch_mask(torch.tensor([[0, 0, 8, 8], [24, 0, 25, 1]]), (4, 4), (8, 8))  # union of K = 2
    assert torch.nonzero(both).flatten().tolist() == [0, 3]
    assert not box_patch_mask(torch.zeros(3, 0, 4), (4, 4), (8, 8)).any()  # no distractors


def test_mass_on_a_hand_built_map() -> None:
    # one sequence, 2 heads, 2 queries, keys [CLS, p0, p1, p2, p3]; the target covers p0 and p1
    attn = torch.tensor(
        [
            [
                [[0.2, 0.3, 0.1, 0.2, 0.2], [0.0, 0.0, 0.0, 0.5, 0.5]],
                [[0.0, 0.6, 0.2, 0.2, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]],
            ]
        ]
    )
    region = torch.tensor([[False, True, True, False, False]])
    keys = torch.tensor([False, True, True, True, True])
    # class-token row: head 0 (0.3 + 0.1) / 0.8 = 0.5, head 1 0.8 / 1.0
    assert_close_as(
        attention_mass(attn, region, keys, query=0), [[0.5, 0.8]], ulps=ROUNDING, dtype=attn.dtype
    )
    # pooled rows: head 0 mean row [0.1, .15, .05, .35, .35] -> 0.2 / 0.9; head 1 [0, .8, .1, .1, 0] -> 0.9
    pooled = attention_mass(attn, region, keys)
    assert_close_as(pooled, [[0.2 / 0.9, 0.9]], ulps=ROUNDING, dtype=attn.dtype)
    assert_close_as(uniform_mass(region, keys), [0.5], ulps=ROUNDING)
    signed = torch.tensor([[[[0.0, -0.5, 0.25, 0.25, 0.0]]]])  # a Cog / combined row: |weights|
    assert attention_mass(signed, region, keys, 0).item() == pytest.approx(0.75)


def test_sequence_regions_follow_the_wrappers_token_layout() -> None:
    """Token (p, t) is 1 + p·T + t; the spatial / temporal sequences are the wrappers' own
    rearrangement of those ids (dna_mm.models.layers.video_attention)."""
    b, p, t = 2, 3, 4
    ids = torch.arange(b * p * t).reshape(b, p * t, 1)  # [B, P·T, 1] token ids (patch-major)
    spatial_ids = rearrange(ids, 'b (p t) m -> (b t) p m', p=p, t=t)[..., 0]  # [B·T, P]
    temporal_ids = ids.reshape(b * p, t)  # [B·P, T]
    clip = torch.zeros(b, t, p, dtype=torch.bool)
    marked = [(0, 1, 2), (1, 3, 0)]  # (clip, frame, patch)
    for c, f, q in marked:
        clip[c, f, q] = True
    marked_ids = {c * p * t + q * t + f for c, f, q in marked}
    region, keys, query = sequence_regions('spatial', clip, 1 + p)
    assert query == 0 and keys.tolist() == [False] + [True] * p and not region[:, 0].any()
    assert set(spatial_ids[region[:, 1:]].tolist()) == marked_ids and int(region.sum()) == 2
    region, keys, query = sequence_regions('temporal', clip, t)
    assert query is None and keys.all()
    assert set(temporal_ids[region].tolist()) == marked_ids and int(region.sum()) == 2
    region, keys, query = sequence_regions('attn', clip, 1 + p * t)  # joint space-time
    assert (
        query == 0
        and set((torch.nonzero(region)[:, 1] - 1 + torch.nonzero(region)[:, 0] * p * t).tolist())
        == marked_ids
    )
    with pytest.raises(ValueError, match='spatial attention with 5 keys; expected 1 \\+ 3 patches'):
        sequence_regions('spatial', clip, 5)


def _timesformer(attn: str, layers: int = 1):
    from mmaction.registry import MODELS
    from mmengine.registry import init_default_scope

    parser = __import__('argparse').ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    cfg = Config.fromfile(DEMO_CONFIG)
    cfg.merge_from_dict(parser.parse_args(['--o', *tiny_run_options('/none', attn)]).o)
    cfg.model.backbone.num_transformer_layers = layers
    init_default_scope('mmaction')
    return MODELS.build(cfg.model).eval()


@pytest.mark.parametrize('attn', ['dna', 'diff', 'softmax'])
def test_collector_on_timesformer_uniform_and_one_hot_maps(attn: str) -> None:
    """With every key projection zeroed, all logits are equal: every row is uniform (DnA's
    softmin too), so each branch's mass is the chance level. Then the spatial CLS row of a hand-set
    map: its mass is read back exactly."""
    model = _timesformer(attn)
    collector = TargetMassCollector(model)
    for site in collector.sites:
        for name, param in site.module.named_parameters():
            if name.startswith(('qkv', 'q_neg', 'k')):
                param.data.zero_()
    b, t, p = 2, 8, 16
    region = torch.zeros(b, t, p, dtype=torch.bool)
    region[0, :, :3] = True  # clip 0: patches 0-2 in every frame; clip 1: patch 5 in frames 0-3
    region[1, :4, 5] = True
    x = torch.randn(b, 1, 3, t, 32, 32)
    with torch.no_grad(), collector:
        collector.regions = dict(target=region)
        model(x, mode='tensor', stage='head')
    recs = collector.records()
    branches = {'dna': {'pos', 'neg', 'combined'}, 'diff': {'pos', 'neg', 'combined'}}.get(attn, {'attn'})
    assert {r['branch'] for r in recs} == branches and {r['group'] for r in recs} == {'temporal', 'spatial'}
    spatial_uniform = (3 / 16 * t + 1 / 16 * 4) / (b * t)  # mean over the (clip, frame) sequences
    temporal_uniform = (3 * 1.0 + 4 / 8) / (b * p)  # mean over the (clip, patch) sequences
    for r in recs:
        expected = spatial_uniform if r['group'] == 'spatial' else temporal_uniform
        assert r['uniform'] == pytest.approx(expected)
        assert r['num_sequences'] == (b * t if r['group'] == 'spatial' else b * p)
        assert_close_as(r['mean'], expected, ulps=REORDERED, dtype=torch.float32, what=str(r))
    # a hand-set spatial map: the class token attends to patch 0 only -> mass 1 where patch 0 is on
    site = next(s for s in collector.sites if s.group == 'spatial')
    one_hot = torch.zeros(b * t, 1, 1 + p, 1 + p)
    one_hot[:, :, 0, 1] = 1.0
    measured = TargetMassCollector.branch_maps(site, {'attn': one_hot, 'pos': one_hot, 'neg': one_hot})
    seq, keys, query = sequence_regions('spatial', region, 1 + p)
    for m in measured.values():
        mass = attention_mass(m, seq, keys, query)  # [B·T, 1]
        assert mass[:t].eq(1).all() and mass[t:].eq(0).all()  # clip 0 has patch 0, clip 1 not


def test_collector_on_cog_weighs_the_signed_map_by_magnitude() -> None:
    """Cog keeps softmax in its first and last layer; the middle one's signed map, read back from
    the module itself, gives the collector's mass with |W| (the spatial class-token row)."""
    model = _timesformer('cog', layers=3)
    collector = TargetMassCollector(model)
    site = next(s for s in collector.sites if s.kind == 'cog' and s.group == 'spatial')
    seen = {}
    hook = site.module.register_forward_pre_hook(lambda mod, args: seen.update(x=args[0].detach()))
    b, t, p = 2, 8, 16
    region = torch.rand(b, t, p) < 0.3
    with torch.no_grad(), collector:
        collector.regions = dict(target=region)
        model(torch.randn(b, 1, 3, t, 32, 32), mode='tensor', stage='head')
    hook.remove()
    with torch.no_grad():
        x = seen['x'].transpose(0, 1)  # the steps call nn.MultiheadAttention's way, tokens first
        _, maps = type(site.module).forward(site.module, x, return_attn=True)  # the member's own call
    w = maps['attn'].abs().double().numpy()  # [B·T, H, 1 + P, 1 + P]
    assert (maps['attn'] < 0).any()  # signed
    ref = np.zeros(w.shape[1])
    for c in range(b):
        for f in range(t):
            row = w[c * t + f, :, 0, 1:]  # [H, P] the class token on the patches of frame f
            ref += row[:, region[c, f].numpy()].sum(-1) / row.sum(-1)
    rec = next(r for r in collector.records() if r['site'] == site.name)
    assert_close_as(rec['per_head'], ref / (b * t), ulps=REORDERED)  # both in float64
    assert rec['branch'] == 'attn'


def test_collector_needs_regions() -> None:
    model = _timesformer('softmax')
    with pytest.raises(RuntimeError, match='set .regions'), torch.no_grad(), TargetMassCollector(model):
        model(torch.randn(1, 1, 3, 8, 32, 32), mode='tensor', stage='head')


# -- the study's statistics ------------------------------------------------------------------------
def test_the_interval_takes_the_t_quantiles_of_the_tables() -> None:
    for df, q in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (30, 2.0423)):
        assert paired_difference(list(range(df + 1)), [0.0] * (df + 1))['t'] == pytest.approx(q, abs=1e-4)
    assert paired_difference([1.0] * 6, [0.0] * 6, level=0.9)['t'] == pytest.approx(2.0150, abs=1e-4)


def test_mean_std_and_paired_interval_on_known_numbers() -> None:
    assert mean_std([80.0, 82.0, 84.0]) == dict(mean=82.0, std=2.0, n=3)
    assert mean_std([70.0])['std'] is None
    d = paired_difference([81.0, 84.0, 88.0], [80.0, 82.0, 85.0])  # differences 1, 2, 3
    half = 4.302653 * 1.0 / math.sqrt(3)
    assert d['mean'] == pytest.approx(2.0) and d['std'] == pytest.approx(1.0) and d['n'] == 3
    assert (d['low'], d['high']) == (pytest.approx(2 - half, abs=1e-5), pytest.approx(2 + half, abs=1e-5))
    assert paired_difference([1.0], [0.0])['low'] is None
    with pytest.raises(ValueError, match='equally long'):
        paired_difference([1.0, 2.0], [1.0])


def test_summarize_pairs_by_seed_and_averages_the_mass() -> None:
    def run(method, seed, top1, mass):
        rec = dict(layer=0, group='spatial', branch='attn', region='target', mean=mass, uniform=0.2)
        sets = [
            dict(name='demo_4', num_distractors=4, likeness='demo', heldout=True, top1=top1 - 10, mass=[rec])
        ]
        return dict(
            method=method, seed=seed, test=dict(top1=top1, mca=top1), train_test_seconds=100.0, sets=sets
        )

    results = [
        run('softmax', 0, 80.0, 0.3),
        run('dna', 0, 82.0, 0.5),
        run('softmax', 1, 90.0, 0.4),
        run('dna', 1, 86.0, 0.7),
        run('dna', 2, 99.0, 0.6),
    ]  # seed 2 has no softmax run
    s = summarize(results)
    assert s['table']['dna']['top1'] == pytest.approx(dict(mean=89.0, std=np.std([82, 86, 99], ddof=1), n=3))
    diff = s['table']['dna']['diff_top1']
    assert s['table']['dna']['diff_seeds'] == [0, 1] and diff['mean'] == pytest.approx(-1.0)
    assert diff['std'] == pytest.approx(math.sqrt(18)) and diff['high'] - diff['mean'] == pytest.approx(
        12.7062 * math.sqrt(18) / math.sqrt(2), abs=1e-3
    )
    assert 'diff_top1' not in s['table']['softmax']
    assert s['curve']['dna']['demo_4']['top1']['mean'] == pytest.approx(79.0)
    (mass,) = s['mass']['dna']['demo_4']
    assert mass['mean'] == pytest.approx(0.6) and mass['std'] == pytest.approx(0.1)
    assert mass['uniform'] == pytest.approx(0.2)
