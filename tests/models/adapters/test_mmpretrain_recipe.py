"""The README's one-line recipe on an ``mmpretrain::`` ViT config (the shipped example, made
tiny), built by MMPretrain's registry: a checkpoint written by MMPretrain's own softmax
classifier loads into it strictly (the negative branch generated, one log line), with softmax
inside it gives that classifier's output, and with DnA one train step moves every branch."""

from __future__ import annotations

import copy

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import init_default_scope
from mmengine.runner import load_checkpoint, save_checkpoint
from test_with_attention import EXAMPLES, _mmengine_log
from tolerance import REORDERED, assert_close_as

from dna_mm.models import DnAAttention, SoftmaxAttention

TINY = {
    'arch': dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=4, feedforward_channels=64),
    'img_size': 32,
    'patch_size': 8,
    'drop_rate': 0.0,
}
HEAD = {'model.head.in_channels': 32, 'model.head.hidden_dim': 64, 'model.head.num_classes': 4}


def _classifier(cfg: Config, backbone_key: str) -> torch.nn.Module:
    cfg.merge_from_dict({**{f'{backbone_key}.{k}': v for k, v in TINY.items()}, **HEAD})
    cfg.model.data_preprocessor = dict(num_classes=4)
    init_default_scope('mmpretrain')
    from mmpretrain.registry import MODELS

    return MODELS.build(cfg.model)


def _stock(tmp_path) -> torch.nn.Module:
    child = tmp_path / 'stock.py'
    child.write_text("_base_ = ['mmpretrain::vision_transformer/vit-base-p16_64xb64_in1k.py']\n")
    return _classifier(Config.fromfile(str(child)), 'model.backbone')


def _recipe(attn_cfg: str) -> torch.nn.Module:
    cfg = Config.fromfile(str(EXAMPLES / 'mmpretrain_vit-b16_dna_in1k.py'))
    cfg.model.backbone.attn_cfg = attn_cfg
    return _classifier(cfg, 'model.backbone.model')


@pytest.fixture
def zoo_file(tmp_path):
    """MMPretrain's softmax ViT classifier (non-trivial head) and its checkpoint as MMEngine saves it."""
    torch.manual_seed(0)
    stock = _stock(tmp_path).eval()
    path = tmp_path / 'vit_softmax.pth'
    save_checkpoint(dict(state_dict=stock.state_dict(), meta=dict(mmpretrain_version='1.2.0')), str(path))
    return stock, path


def test_the_zoo_checkpoint_loads_and_softmax_inside_is_the_stock_model(zoo_file, caplog) -> None:
    stock, path = zoo_file
    images = torch.randn(2, 3, 32, 32)
    for attn_cfg, member in (('softmax', SoftmaxAttention), ('dna', DnAAttention)):
        torch.manual_seed(1)  # other weights than the file's
        model = _recipe(attn_cfg).eval()
        assert sum(isinstance(m, member) for m in model.modules()) == 2
        caplog.clear()
        with _mmengine_log(caplog):
            load_checkpoint(model, str(path), map_location='cpu', strict=True)
        generated = 0 if attn_cfg == 'softmax' else 10  # q_neg, v_neg (weights, biases), alpha: 5 × 2
        read = '2 attention(s) read from the host layout'
        assert f'with_attention ({attn_cfg}): {read}; generated {generated} tensors' in caplog.text
        with torch.no_grad():
            out, ref = model(images, mode='tensor'), stock(images, mode='tensor')
        if attn_cfg == 'softmax':
            assert_close_as(out, ref, ulps=REORDERED)
        else:
            assert ((out - ref).norm() / ref.norm()).item() < 1e-3
            assert not torch.equal(out, ref)


def test_one_train_step_moves_both_branches(zoo_file) -> None:
    _, path = zoo_file
    model = _recipe('dna')
    load_checkpoint(model, str(path), map_location='cpu', strict=True)
    from mmpretrain.structures import DataSample

    data = dict(
        inputs=[torch.randint(0, 255, (3, 32, 32), dtype=torch.uint8) for _ in range(4)],
        data_samples=[DataSample().set_gt_label(i) for i in range(4)],
    )
    before = copy.deepcopy(model.state_dict())
    optim = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    losses = model.train_step(data, optim)
    assert torch.isfinite(losses['loss'])
    after = model.state_dict()
    for key in (
        'backbone.layers.0.attn.attn.q_neg.weight',
        'backbone.layers.0.attn.attn.v_neg.weight',
        'backbone.layers.0.attn.attn.alpha',
        'backbone.layers.0.attn.attn.qkv.weight',
    ):
        assert not torch.equal(before[key], after[key]), key
