"""A zoo softmax checkpoint into a ``with_attention`` model through dna_mm's own strict
loaders (``load_from``, ``tools/test.py``, ``tools/infer.py``): the strict comparison sees the
keys as the swapped attentions' load hooks convert them (host layout → family, negative branch
generated), so the host's keys are neither "unexpected" nor the generated ones "missing"."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import REPO, run_main
from mmengine.registry import MODELS, init_default_scope
from test_with_attention import HOSTS, _run
from tolerance import ROUNDING, assert_close_as

from dna_mm.checkpoint import CheckpointMismatchError, compare_state_dict, load_whole_model
from dna_mm.models.adapters import swap_attention


def _zoo_and_swapped(host: str):
    """(the host model as its library builds it, its checkpoint, a swapped model of other weights)."""
    build, _ = HOSTS[host]
    torch.manual_seed(0)
    original = build()
    zoo = {'meta': {'epoch': 1}, 'state_dict': copy.deepcopy(original.state_dict())}  # mmengine's layout
    torch.manual_seed(1)
    swapped = build()
    swap_attention(swapped, 'dna')
    return original, zoo, swapped


@pytest.mark.parametrize('host', list(HOSTS))
def test_zoo_checkpoint_loads_strictly_through_load_whole_model(host: str, tmp_path) -> None:
    original, zoo, swapped = _zoo_and_swapped(host)
    before = {k: v.clone() for k, v in zoo['state_dict'].items()}
    torch.save(zoo, tmp_path / 'zoo.pth')
    report = load_whole_model(swapped, str(tmp_path / 'zoo.pth'), strict=True)
    assert report.complete, report.describe()
    assert all(torch.equal(before[k], v) for k, v in zoo['state_dict'].items())  # input untouched
    expected = copy.deepcopy(original)
    swap_attention(expected, 'dna')
    swapped.eval()
    expected.eval()
    x = HOSTS[host][1]()
    assert_close_as(_run(swapped, x), _run(expected, x), ulps=ROUNDING, what=host)


@pytest.mark.parametrize('host', ['VideoMAE', 'DETR layers'])
def test_a_missing_key_is_named_alone_and_partial_loads_the_rest(host: str, tmp_path) -> None:
    """Only the key the file lacks is reported (not the host's ``q_bias`` / ``in_proj_*`` nor
    the generated ``q_neg`` / ``v_neg`` / ``alpha``); a partial load takes everything else."""
    original, zoo, swapped = _zoo_and_swapped(host)
    dropped = next(k for k in zoo['state_dict'] if 'attn' not in k and k.endswith('weight'))
    del zoo['state_dict'][dropped]
    report = compare_state_dict(swapped, zoo['state_dict'])
    assert report.missing == [dropped] and not report.unexpected and not report.mismatched
    torch.save(zoo, tmp_path / 'zoo.pth')
    with pytest.raises(CheckpointMismatchError, match='zoo.pth') as err:
        load_whole_model(swapped, str(tmp_path / 'zoo.pth'), strict=True)
    assert dropped in str(err.value)
    report = load_whole_model(swapped, str(tmp_path / 'zoo.pth'), strict=False)
    assert report.missing == [dropped]
    own = swapped.state_dict()
    for key, value in original.state_dict().items():
        if key != dropped and key in own and own[key].shape == value.shape:
            assert torch.equal(own[key], value), key  # loaded: the same values


TINY_VIDEOMAE = """_base_ = ['{example}']
model = dict(backbone=dict(model=dict(img_size=32, patch_size=8, embed_dims=32, depth=2, num_heads=4,
                                      num_frames=4)),
             cls_head=dict(in_channels=32, num_classes=4))
_pipeline = [
    dict(type='DecordInit'), dict(type='SampleFrames', clip_len=4, frame_interval=1, num_clips=1,
                                  test_mode={test_mode}),
    dict(type='DecordDecode'), dict(type='Resize', scale=(32, 32), keep_ratio=False),
    dict(type='FormatShape', input_format='NCTHW'), dict(type='PackActionInputs')]
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=True), dataset=dict(type='VideoDataset',
    ann_file='{root}/train.txt', data_prefix=dict(video='{root}/videos'), pipeline=_pipeline))
test_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    sampler=dict(type='DefaultSampler', shuffle=False), dataset=dict(type='VideoDataset',
    ann_file='{root}/test.txt', data_prefix=dict(video='{root}/videos'), pipeline=_pipeline, test_mode=True))
test_evaluator = dict(type='AccMetric')
test_cfg = dict(type='TestLoop')
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1, val_interval=1)
param_scheduler = []
val_cfg = val_dataloader = val_evaluator = None
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01))
auto_scale_lr = dict(enable=False)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
"""


def test_zoo_checkpoint_through_the_tools(tiny_video_set, tmp_path) -> None:
    """A VideoMAE checkpoint saved from MMAction2's own (softmax) recognizer: ``tools/test.py``
    and ``load_from`` in ``tools/train.py`` take it strictly into the DnA example, and say what
    they generated."""
    from mmengine.config import Config

    cfg_path = tmp_path / 'tiny_videomae_dna.py'
    example = REPO / 'configs' / 'examples' / 'videomae_vit-b_dna_k400.py'
    cfg_path.write_text(TINY_VIDEOMAE.format(example=example, root=tiny_video_set, test_mode=False))
    # the zoo side: the base's recognizer without the swap, as MMAction2 builds it
    host_cfg = Config.fromfile(str(cfg_path)).model
    host_cfg.backbone = host_cfg.backbone.model
    init_default_scope('mmaction')
    torch.manual_seed(0)
    host = MODELS.build(host_cfg)
    ckpt = tmp_path / 'videomae_softmax.pth'
    torch.save({'meta': {'epoch': 1}, 'state_dict': host.state_dict()}, ckpt)

    test = run_main(['tools/test.py', str(cfg_path), str(ckpt), '--work-dir', str(tmp_path / 't')])
    out = test.stdout + test.stderr
    assert 'with_attention (dna): 2 attention(s) read from the host layout; generated 10 tensors' in out
    assert 'top-1' in out.lower() or 'top1' in out.lower()
    train = run_main(
        [
            'tools/train.py',
            str(cfg_path),
            '--work-dir',
            str(tmp_path / 'w'),
            '--cfg-options',
            f'load_from={ckpt}',
        ]
    )
    log = (train.stdout + train.stderr) + ''.join(p.read_text() for p in (tmp_path / 'w').rglob('*.log'))
    assert 'with_attention (dna): 2 attention(s) read from the host layout' in log
    assert (tmp_path / 'w' / 'epoch_1.pth').exists()
