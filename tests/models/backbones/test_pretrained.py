"""One pretrained loader for the backbones, one build-then-load for the attention swap, and
converters that do not import the models."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import REPO
from test_vitdet import TINY  # 4 blocks, windows of 4 in blocks 0 and 2, rel-pos everywhere
from timm.models.vision_transformer import VisionTransformer
from tolerance import ROUNDING, assert_close_as

import dna_mm
from dna_mm.models import backbones
from dna_mm.models.adapters import swap_attention
from dna_mm.models.backbones import adapt_attentions, load_pretrained
from dna_mm.models.backbones.vitdet import ViTDet

REL_POS = sorted(f'blocks.{i}.attn.rel_pos_{a}' for i in range(4) for a in 'hw')


def test_both_backbones_use_the_one_loader() -> None:
    from dna_mm.models.backbones import timesformer, vitdet

    assert timesformer.load_pretrained is vitdet.load_pretrained is backbones.load_pretrained


def test_imagenet_vit_into_vitdet_keeps_the_rel_pos_tables(tmp_path) -> None:
    """An ImageNet ViT has no rel-pos tables: they are reported missing and keep the model's own
    (here non-zero) init; everything else is read from the file."""
    vit = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=4, num_heads=2, num_classes=5)
    torch.save(vit.state_dict(), tmp_path / 'vit.pth')
    model = ViTDet(**TINY, rel_pos_zero_init=False, attn_cfg='dna')
    before = {k: v.clone() for k, v in model.state_dict().items() if 'rel_pos' in k}
    report = load_pretrained(model, str(tmp_path / 'vit.pth'))
    assert report['missing'] == REL_POS
    assert not report['unexpected'] and len(report['generated']) == 4 * 5
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert all(v.abs().sum() > 0 for v in before.values())
    assert torch.equal(model.blocks[3].attn.qkv.weight, vit.blocks[3].attn.qkv.weight)


def test_the_attention_check_takes_the_keys_the_model_initialises_itself() -> None:
    vit = VisionTransformer(img_size=64, patch_size=16, embed_dim=32, depth=4, num_heads=2, num_classes=5)
    sd = {k: v for k, v in vit.state_dict().items() if k.startswith('blocks.')}
    model = ViTDet(**TINY, attn_cfg='softmax')
    with pytest.raises(
        ValueError, match=r'vit\.pth: 4 attention\(s\).*\n  blocks\.0\.attn: missing rel_pos_h'
    ):
        adapt_attentions(model, sd, source='vit.pth')
    out, generated = adapt_attentions(model, sd, source='vit.pth', self_init=REL_POS)
    assert not generated and not any('rel_pos' in k for k in out)
    del sd['blocks.2.attn.proj.bias']  # a truncated file is still refused
    with pytest.raises(ValueError, match=r'blocks\.2\.attn: missing proj\.bias$'):
        adapt_attentions(model, sd, source='vit.pth', self_init=REL_POS)


def test_timesformer_notes_an_image_models_missing_temporal_parts(tmp_path) -> None:
    from mmaction.registry import MODELS

    vit = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
    torch.save(vit.state_dict(), tmp_path / 'vit.pth')
    tiny = dict(num_frames=4, img_size=32, patch_size=8, embed_dims=32, num_heads=2, num_transformer_layers=2)
    model = MODELS.build(dict(type='DnATimeSformer', **tiny))
    report = load_pretrained(model, str(tmp_path / 'vit.pth'))
    layers = [
        f'transformer_layers.layers.{i}.attentions.0.temporal_fc.{p}'
        for i in (0, 1)
        for p in ('bias', 'weight')
    ]
    assert report['video_init'] == sorted(['time_embed', *layers]) and not report['missing']


def test_the_swap_builds_with_the_scales_it_is_given() -> None:
    """The swap loads the host's weights into the replacement the way it loads a checkpoint:
    the negative branch is generated with the scales passed to it."""
    vit = VisionTransformer(img_size=32, patch_size=16, embed_dim=32, depth=2, num_heads=2, num_classes=5)
    q, _, v = vit.blocks[1].attn.qkv.weight.detach().clone().chunk(3)
    swap_attention(vit, 'dna', q_neg_scale=1e-2, v_neg_scale=-1e-3)
    assert_close_as(vit.blocks[1].attn.q_neg.weight, 1e-2 * q, ulps=ROUNDING)
    assert_close_as(vit.blocks[1].attn.v_neg.weight, -1e-3 * v, ulps=ROUNDING)
    assert torch.equal(vit.blocks[1].attn.alpha, torch.full((2,), 0.5))


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('module', ['dna_mm.converters', 'dna_mm.models'])
def test_each_package_imports_alone(module: str) -> None:
    done = _fresh(f'import {module}')
    assert done.returncode == 0, done.stderr


def test_the_converters_import_without_the_models() -> None:
    """Every module of ``dna_mm.converters`` imports while ``dna_mm.models`` cannot be imported
    (``dna_mm/__init__`` is skipped: it imports both): the dependency is one-way."""
    code = f'''
import importlib, pkgutil, sys, types
class NoModels:
    def find_spec(self, name, path=None, target=None):
        if name == 'dna_mm.models' or name.startswith('dna_mm.models.'):
            raise ImportError('the converters imported ' + name)
sys.meta_path.insert(0, NoModels())
package = types.ModuleType('dna_mm')
package.__path__ = [{str(REPO / 'dna_mm')!r}]
sys.modules['dna_mm'] = package
import dna_mm.converters as converters
for info in pkgutil.iter_modules(converters.__path__):
    importlib.import_module('dna_mm.converters.' + info.name)
print(sorted(m for m in sys.modules if m.startswith('dna_mm.models')))
'''
    done = _fresh(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '[]'
    assert dna_mm.converters.softmax_to_dna.__module__ == 'dna_mm.converters.attention'
