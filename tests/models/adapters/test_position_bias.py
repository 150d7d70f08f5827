"""A host's position bias and the member's declaration ``takes_position_bias``: every host that
adds a bias inside the attention's logits (ViTDet's and MViTv2's relative positions, the Swin
tables of MMAction2, MMPretrain and MMDetection, BEiT's own and shared tables) refuses, when the
model is built and in one line naming the host and the member, a member of the user's that
declares it takes none; a member that takes one trains the host's table."""

from __future__ import annotations

import copy
from typing import Optional

import pytest
import torch
from mmengine.registry import MODELS, init_default_scope
from test_with_attention import _TINY_VIT_ARCH, HOSTS, TINY_MVIT, _mmpretrain
from torch import Tensor

from dna_mm.errors import UnsupportedModelError, error_line
from dna_mm.models import SoftmaxAttention
from dna_mm.models.adapters import swap_attention
from dna_mm.models.attention.functional import BiasArg
from dna_mm.models.backbones.vitdet import ViTDet
from dna_mm.models.layers.vitdet_attention import vitdet_attention

VITDET = dict(
    img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, window_size=2,
    window_block_indexes=[0], pretrain_img_size=64,
)  # fmt: skip


class NoBiasAttention(SoftmaxAttention):
    """A user's member that takes no position bias, and would drop one it were given."""

    short_name = 'nobias'
    takes_position_bias = False

    def attend(
        self, heads: dict[str, Tensor], attn_mask: Optional[Tensor], attn_bias: BiasArg, eager: bool
    ) -> tuple[Tensor, dict[str, Tensor]]:
        return super().attend(heads, attn_mask, None, eager)


@pytest.fixture(scope='module')
def nobias():
    """``NoBiasAttention`` registered (as a user's import does), and unregistered after."""
    MODELS.register_module(module=NoBiasAttention)
    yield NoBiasAttention.short_name
    MODELS._module_dict.pop('NoBiasAttention', None)


def _mvit(**kwargs) -> torch.nn.Module:
    init_default_scope('mmaction')
    return MODELS.build(dict(TINY_MVIT, **kwargs))


def _beit_without_bias() -> torch.nn.Module:
    return _mmpretrain(
        dict(
            type='BEiTViT',
            arch=_TINY_VIT_ARCH,
            img_size=32,
            patch_size=8,
            use_rel_pos_bias=False,
            use_shared_rel_pos_bias=False,
        )
    )


#: host → (its attention's class, the setting that leaves its bias out, if any)
REFUSED = {
    'Video Swin': ('mmaction.models.backbones.swin.WindowAttention3D', None),
    'MMPretrain Swin': ('mmpretrain.models.utils.attention.WindowMSA', None),
    'MMDetection Swin': ('mmdet.models.backbones.swin.WindowMSA', None),
    'MMPretrain BEiT': ('mmpretrain.models.utils.attention.BEiTAttention', 'use_rel_pos_bias=False'),
    'MMPretrain BEiT shared bias': (
        'mmpretrain.models.utils.attention.BEiTAttention',
        'use_shared_rel_pos_bias=False',
    ),
    'MViTv2': ('mmaction.models.backbones.mvit.MultiScaleAttention', 'rel_pos_embed=False'),
}


def _assert_one_line_refusal(err: BaseException, host: str, without: Optional[str]) -> None:
    line = error_line(err)
    assert isinstance(err, UnsupportedModelError), repr(err)
    assert '\n' not in str(err) and line.startswith(f'{host}: the member NoBiasAttention declares '), line
    assert 'takes_position_bias = False' in line and 'use a member that takes a position bias' in line
    assert (f'set {without}, or ' in line) if without else ('set ' not in line), line
    assert 'DnA' not in line and 'softmax or dna' not in line, line  # the user's member, not the paper's


@pytest.mark.parametrize('host', list(REFUSED))
def test_a_member_without_position_bias_is_refused_by_each_host_with_one(nobias, host: str) -> None:
    build, _ = HOSTS[host]
    model = build()
    before = [type(m) for m in model.modules()]
    with pytest.raises(UnsupportedModelError) as err:
        swap_attention(model, nobias)
    _assert_one_line_refusal(err.value, *REFUSED[host])
    assert [type(m) for m in model.modules()] == before  # nothing replaced


def test_the_refusal_comes_when_a_config_is_built(nobias) -> None:
    """Through the registry, as a config builds it: the same line under MMEngine's prefix."""
    cfg = dict(type='with_attention', model=dict(TINY_MVIT, type='mmaction.MViT'), attn_cfg=nobias)
    with pytest.raises(UnsupportedModelError) as err:
        MODELS.build(cfg)
    _assert_one_line_refusal(err.value, *REFUSED['MViTv2'])


def test_vitdet_relative_positions_refuse_it(nobias) -> None:
    with pytest.raises(UnsupportedModelError) as err:
        ViTDet(**VITDET, use_rel_pos=True, attn_cfg=nobias)
    _assert_one_line_refusal(err.value, 'ViTDet', 'use_rel_pos=False')
    with pytest.raises(UnsupportedModelError) as err:  # the form alone, as a backbone builds it
        vitdet_attention(nobias, 32, 2, 0, 1, use_rel_pos=True, input_size=(4, 4))
    _assert_one_line_refusal(err.value, 'ViTDet', 'use_rel_pos=False')


def _vitdet_without_rel_pos(attn_cfg: str):
    return ViTDet(**VITDET, use_rel_pos=False, attn_cfg=attn_cfg), torch.randn(1, 3, 64, 64)


def _swapped(build, x: Tensor):
    def make(attn_cfg: str):
        model = build()
        swap_attention(model, attn_cfg)
        return model, x

    return make


@pytest.mark.parametrize(
    'make',
    [
        _vitdet_without_rel_pos,
        _swapped(lambda: _mvit(rel_pos_embed=False), torch.randn(1, 3, 4, 32, 32)),
        _swapped(_beit_without_bias, torch.randn(1, 3, 32, 32)),
        _swapped(HOSTS['timm ViT'][0], torch.randn(1, 3, 32, 32)),
    ],
    ids=['ViTDet without rel-pos', 'MViTv2 without rel-pos', 'BEiT without tables', 'timm ViT'],
)
def test_hosts_without_a_bias_take_it(nobias, make) -> None:
    """The rule refuses a bias dropped, nothing else: hosts built without one run the member."""
    model, x = make(nobias)
    assert any(type(m) is NoBiasAttention for m in model.modules())
    _backward(model(x))


def _backward(out) -> None:
    """A loss of every tensor ``out`` holds (the hosts return tensors, tuples and lists)."""
    tensors = [out] if isinstance(out, Tensor) else list(_tensors(out))
    sum(t.float().square().mean() for t in tensors).backward()


def _tensors(out):
    for item in out:
        if isinstance(item, Tensor):
            yield item
        else:
            yield from _tensors(item)


#: the host's bias parameters, by name
TABLES = ('relative_position_bias_table', 'rel_pos_h', 'rel_pos_w', 'rel_pos_t')


@pytest.mark.parametrize('attn_cfg', ['softmax', 'dna', 'gated'])
@pytest.mark.parametrize('host', list(REFUSED))
def test_a_member_that_takes_the_bias_trains_the_hosts_table(host: str, attn_cfg: str) -> None:
    build, make_input = HOSTS[host]
    torch.manual_seed(0)
    model = copy.deepcopy(build())
    swap_attention(model, attn_cfg)
    model.train()
    tables = {n: p for n, p in model.named_parameters() if n.rsplit('.', 1)[-1] in TABLES}
    assert tables, host
    _backward(model(make_input()))
    for name, table in tables.items():
        assert table.grad is not None and table.grad.abs().max() > 0, name
