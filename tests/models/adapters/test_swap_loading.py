"""A zoo softmax checkpoint into a ``with_attention`` model through dna_mm's own strict
loaders (``load_from``, ``tools/test.py``, ``tools/infer.py``): the strict comparison sees the
keys as the swapped attentions' load hooks convert them (host layout → family, negative branch
generated), so the host's keys are neither "unexpected" nor the generated ones "missing"; a
member's parameters of its own (``own_start``: Diff's ``lambda_*``, a gate) keep their start
through mmengine's strict ``load_checkpoint`` and ``load_whole_model`` alike."""

from __future__ import annotations

import copy
from typing import Optional

import pytest
import torch
from conftest import REPO, run_main
from mmengine.registry import MODELS, init_default_scope
from mmengine.runner import load_checkpoint
from test_with_attention import HOSTS, _mmengine_log, _run
from tolerance import ROUNDING, assert_close_as
from torch import Tensor, nn

from dna_mm.checkpoint import CheckpointMismatchError, compare_state_dict, load_whole_model
from dna_mm.models.adapters import swap_attention
from dna_mm.models.attention import AttentionBase
from dna_mm.models.attention.functional import BiasArg, single_bias


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


def _tiny_example_and_zoo_checkpoint(video_set, tmp_path):
    """(the tiny DnA VideoMAE example's config file, a checkpoint saved from MMAction2's own
    softmax recognizer of that config, mmengine's ``{'meta', 'state_dict'}``)."""
    from mmengine.config import Config

    cfg_path = tmp_path / 'tiny_videomae_dna.py'
    example = REPO / 'configs' / 'examples' / 'videomae_vit-b_dna_k400.py'
    cfg_path.write_text(TINY_VIDEOMAE.format(example=example, root=video_set, test_mode=False))
    # the zoo side: the base's recognizer without the swap, as MMAction2 builds it
    host_cfg = Config.fromfile(str(cfg_path)).model
    host_cfg.backbone = host_cfg.backbone.model
    init_default_scope('mmaction')
    torch.manual_seed(0)
    host = MODELS.build(host_cfg)
    ckpt = tmp_path / 'videomae_softmax.pth'
    torch.save({'meta': {'epoch': 1}, 'state_dict': host.state_dict()}, ckpt)
    return cfg_path, ckpt


def test_zoo_checkpoint_through_the_tools(tiny_video_set, tmp_path) -> None:
    """A VideoMAE checkpoint saved from MMAction2's own (softmax) recognizer: ``tools/test.py``
    and ``load_from`` in ``tools/train.py`` take it strictly into the DnA example, and say what
    they generated."""
    cfg_path, ckpt = _tiny_example_and_zoo_checkpoint(tiny_video_set, tmp_path)
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


# -- members that start parameters of their own (``own_start``) ------------------------------------
class HeadGainAttention(AttentionBase):
    """``g_h · softmax(s Q Kᵀ + b) V``: softmax with a per-head gain ``head_gain [H]`` of its own,
    started at 2 and listed in ``own_start`` (a softmax file has none of it)."""

    short_name = 'head_gain'
    own_start = ('head_gain',)

    def __init__(self, embed_dims: int, num_heads: int = 8, **kwargs) -> None:
        super().__init__(embed_dims, num_heads, **kwargs)
        self.head_gain = nn.Parameter(torch.full((self.num_heads,), 2.0, **self.factory_kwargs))

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        bias = single_bias(attn_bias, type(self).__name__)
        out, attn = self.softmax_branch(heads['q'], heads['k'], heads['v'], attn_mask, bias, eager)
        return self.head_gain.to(out).view(1, -1, 1, 1) * out, ({'attn': attn} if eager else {})


@pytest.fixture(scope='module')
def head_gain():
    """``HeadGainAttention`` registered for this module's tests only."""
    MODELS.register_module(module=HeadGainAttention)
    yield HeadGainAttention
    MODELS._module_dict.pop('HeadGainAttention', None)


#: members with parameters of their own: Diff's ``lambda_*`` / ``sub_norm``, a gate, the gain above
OWN_START = {
    'diff': 'diff',
    'gated DnA': dict(type='DnAAttention', gated=True),
    'own member': dict(type='HeadGainAttention'),
}
#: (host, member): Diff takes no position bias, which Video Swin's form adds (refused when built)
OWN_START_CASES = [
    (host, member)
    for host in ('VideoMAE', 'Video Swin', 'DETR layers')
    for member in OWN_START
    if (host, member) != ('Video Swin', 'diff')
]


def _own_start_keys(model: nn.Module) -> list[str]:
    """The keys of every member's ``own_start`` groups, read off the members."""
    return [
        f'{name}.{key}'
        for name, m in model.named_modules()
        if isinstance(m, AttentionBase)
        for key in m.state_dict()
        if key.startswith(tuple(m.own_start))
    ]


def _build_swapped(host: str, member: str, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = HOSTS[host][0]()
    swap_attention(model, OWN_START[member])
    return model


def _load(how: str, model: nn.Module, path) -> None:
    if how == 'mmengine load_checkpoint':
        load_checkpoint(model, str(path), map_location='cpu', strict=True)
    else:
        assert load_whole_model(model, str(path), strict=True).complete


LOADERS = ('mmengine load_checkpoint', 'load_whole_model')


@pytest.mark.parametrize('how', LOADERS)
@pytest.mark.parametrize('host,member', OWN_START_CASES)
def test_softmax_checkpoint_loads_strictly_and_own_start_keeps_its_start(
    host: str, member: str, how: str, head_gain, tmp_path, caplog
) -> None:
    """A softmax file into a member with parameters of its own: strict through mmengine's
    ``load_checkpoint`` and dna_mm's ``load_whole_model``; those parameters keep the values they
    had before the load (their start), every other weight is the file's (as swapping the model
    the file was saved from gives it), and the log line names what kept its start."""
    original, zoo, _ = _zoo_and_swapped(host)
    torch.save(zoo, tmp_path / 'softmax.pth')
    swapped = _build_swapped(host, member, seed=1)
    own = _own_start_keys(swapped)
    assert own
    start = {k: v.clone() for k, v in swapped.state_dict().items() if k in own}
    with _mmengine_log(caplog):
        _load(how, swapped, tmp_path / 'softmax.pth')
    assert f'kept {len(own)} at their start' in caplog.text
    expected = copy.deepcopy(original)
    swap_attention(expected, OWN_START[member])
    wanted, loaded = expected.state_dict(), swapped.state_dict()
    assert loaded.keys() == wanted.keys()
    for key, value in loaded.items():
        assert torch.equal(value, start[key] if key in own else wanted[key]), key


@pytest.mark.parametrize('how', LOADERS)
@pytest.mark.parametrize('host,member', OWN_START_CASES)
def test_a_checkpoint_of_the_member_loads_its_own_values(
    host: str, member: str, how: str, head_gain, tmp_path
) -> None:
    """A file of the same member (its ``own_start`` parameters trained away from any start)
    loads every one of its values: none is replaced by the model's start."""
    trained = _build_swapped(host, member, seed=0)
    own = set(_own_start_keys(trained))
    with torch.no_grad():
        for key, value in trained.state_dict(keep_vars=True).items():
            if key in own:
                value.add_(torch.rand_like(value) + 0.5)
    saved = copy.deepcopy(trained.state_dict())
    torch.save({'meta': {'epoch': 1}, 'state_dict': saved}, tmp_path / 'own.pth')
    fresh = _build_swapped(host, member, seed=1)
    _load(how, fresh, tmp_path / 'own.pth')
    assert all(torch.equal(v, saved[k]) for k, v in fresh.state_dict().items())


def test_a_softmax_checkpoint_missing_a_weight_is_still_refused(tmp_path) -> None:
    """Only the own-start groups are the member's to fill: a weight the file lacks is named
    alone, and the strict loads refuse it."""
    _, zoo, _ = _zoo_and_swapped('VideoMAE')
    dropped = next(k for k in zoo['state_dict'] if 'attn' not in k and k.endswith('weight'))
    del zoo['state_dict'][dropped]
    torch.save(zoo, tmp_path / 'softmax.pth')
    swapped = _build_swapped('VideoMAE', 'diff', seed=1)
    assert compare_state_dict(swapped, zoo['state_dict']).missing == [dropped]
    with pytest.raises(CheckpointMismatchError, match=dropped.replace('.', r'\.')):
        load_whole_model(swapped, str(tmp_path / 'softmax.pth'), strict=True)
    with pytest.raises(RuntimeError, match=dropped.replace('.', r'\.')):
        load_checkpoint(swapped, str(tmp_path / 'softmax.pth'), map_location='cpu', strict=True)


def test_zoo_checkpoint_into_diff_through_tools_test(tiny_video_set, tmp_path) -> None:
    """``tools/test.py`` takes the softmax recognizer's checkpoint strictly into the example
    swapped to Diff, whose ``lambda_*`` and sub-norm keep their start, and says so."""
    cfg_path, ckpt = _tiny_example_and_zoo_checkpoint(tiny_video_set, tmp_path)
    args = [str(cfg_path), str(ckpt), '--work-dir', str(tmp_path / 't')]
    test = run_main(['tools/test.py', *args, '--cfg-options', 'model.backbone.attn_cfg=diff'])
    out = test.stdout + test.stderr
    assert 'with_attention (diff): 2 attention(s) read from the host layout' in out
    assert 'kept 10 at their start: backbone.blocks.0.attn.lambda_q1' in out
    assert 'top-1' in out.lower() or 'top1' in out.lower()


@pytest.mark.parametrize('host', ['VideoMAE', 'MMPretrain ViT', 'DETR layers'])
@pytest.mark.parametrize('member', ['softmax', 'sigmoid', 'diff'])
def test_a_dna_file_into_a_model_without_its_negative_branch_is_refused(host, member, tmp_path) -> None:
    """A DnA file (its negative branch trained away from its start) into the host built with
    another member: the branch has no place there; a strict load stops naming its keys as
    unexpected, as the other hosts' loads do, and a partial one reports them; it is never
    dropped without a word."""
    torch.manual_seed(0)
    dna = HOSTS[host][0]()
    swap_attention(dna, 'dna')
    with torch.no_grad():
        for key, value in dna.state_dict(keep_vars=True).items():
            if key.endswith(('q_neg.weight', 'v_neg.weight', 'alpha')):
                value.add_(torch.rand_like(value) + 0.5)
    negative = [k for k in dna.state_dict() if k.endswith(('q_neg.weight', 'v_neg.weight', 'alpha'))]
    torch.save({'meta': {'epoch': 1}, 'state_dict': dna.state_dict()}, tmp_path / 'dna.pth')
    torch.manual_seed(1)
    other = HOSTS[host][0]()
    swap_attention(other, member)
    with pytest.raises(CheckpointMismatchError, match='unexpected') as err:
        load_whole_model(other, str(tmp_path / 'dna.pth'), strict=True)
    assert negative[0] in str(err.value)
    with pytest.raises(RuntimeError, match=negative[0].replace('.', r'\.')):
        load_checkpoint(other, str(tmp_path / 'dna.pth'), map_location='cpu', strict=True)
    report = load_whole_model(other, str(tmp_path / 'dna.pth'), strict=False)
    assert set(negative) <= set(report.unexpected) and not report.missing, report.describe()
