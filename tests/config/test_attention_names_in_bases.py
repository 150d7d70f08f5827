"""A child config that sets keys of an attention its base gives by name (``attn_cfg='dna'``, the
ViTDet and baseline configs; per step, ``attn_cfg=dict(temporal='softmax', ...)``): the name
becomes the dict it stands for and the child's keys merge into it, as ``--cfg-options
model.backbone.attn_cfg.variant=apm`` does (:mod:`dna_mm.config.inheritance`), where mmengine's
merge stopped (``... is a dict in the child config but is of type <class 'str'> in base
config``). Any other key merges as mmengine merges it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO
from mmengine.config import Config

from dna_mm.config.build import build_part, read_config
from dna_mm.models.attention import AttentionBase
from dna_mm.tools.cli import cfg_options

#: the demo's model made tiny (one block, 32 wide), with its attention given as ``{attn}``
TINY_MODEL = (
    'model = dict(backbone=dict(embed_dims=32, num_heads=2, num_transformer_layers=1, attn_cfg={attn}), '
    'cls_head=dict(in_channels=32))\n'
)


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def _child(folder: Path, name: str, base: str, model: str) -> str:
    """``folder/name``: a config of base ``base`` whose ``model`` is ``model`` (a dict's text)."""
    return _write(folder, name, f"_base_ = ['{base}']\nmodel = {model}\n")


def _attentions(model) -> list:
    return [m for m in model.modules() if isinstance(m, AttentionBase)]


def test_a_variant_below_a_detection_bases_name_builds_that_variant(tmp_path) -> None:
    """ViTDet's configs hold ``attn_cfg='dna'``: a child's ``attn_cfg=dict(variant='apm')`` gives
    what the option gives, and the built backbone's attentions are A±."""
    apm = "dict(backbone=dict(attn_cfg=dict(variant='apm')))"
    cfg = read_config(_child(tmp_path, 'det_apm.py', 'dna_mm::vitdet_dna_demo.py', apm))
    options = cfg_options(['model.backbone.attn_cfg.variant=apm'])
    by_option = read_config(str(REPO / 'configs/vitdet_dna_demo.py'), options)
    assert cfg.model.backbone.attn_cfg == by_option.model.backbone.attn_cfg
    assert cfg.model.backbone.attn_cfg == dict(type='DnAAttention', variant='apm')
    found = _attentions(build_part(cfg, 'backbone'))
    assert found and {(type(m).__name__, m.variant) for m in found} == {('DnAAttention', 'apm')}


def test_the_gate_below_a_baselines_name_and_a_step_below_its_name(tmp_path) -> None:
    """A base that names softmax (a baseline config's form) and a child adding the gate; a base
    naming each step and a child setting the spatial step's variant: the other step keeps its name."""
    _write(tmp_path, 'softmax.py', f"_base_ = ['{DEMO_CONFIG}']\n" + TINY_MODEL.format(attn="'softmax'"))
    cfg = read_config(
        _child(tmp_path, 'gated.py', './softmax.py', 'dict(backbone=dict(attn_cfg=dict(gated=True)))')
    )
    assert cfg.model.backbone.attn_cfg == dict(type='SoftmaxAttention', gated=True)
    found = _attentions(build_part(cfg, 'backbone'))
    assert len(found) == 2 and all(type(m).__name__ == 'SoftmaxAttention' and m.gated for m in found)

    steps = "dict(_delete_=True, temporal='softmax', spatial='dna')"
    _write(tmp_path, 'steps.py', f"_base_ = ['{DEMO_CONFIG}']\n" + TINY_MODEL.format(attn=steps))
    apm = "dict(backbone=dict(attn_cfg=dict(spatial=dict(variant='apm'))))"
    cfg = read_config(_child(tmp_path, 'apm.py', './steps.py', apm))
    assert cfg.model.backbone.attn_cfg == dict(
        temporal='softmax', spatial=dict(type='DnAAttention', variant='apm')
    )
    kinds = [
        (type(m).__name__, getattr(m, 'variant', None)) for m in _attentions(build_part(cfg, 'backbone'))
    ]
    assert kinds == [('SoftmaxAttention', None), ('DnAAttention', 'apm')], kinds


def test_delete_and_other_keys_merge_as_mmengine_merges_them(tmp_path) -> None:
    """``_delete_`` replaces the name; a key other than ``attn_cfg``, or a name no member has,
    keeps mmengine's refusal (a string in the base, a dict in the child)."""
    diff = "dict(backbone=dict(attn_cfg=dict(_delete_=True, type='DiffAttention')))"
    replaced = _child(tmp_path, 'diff.py', 'dna_mm::vitdet_dna_demo.py', diff)
    assert Config.fromfile(replaced).model.backbone.attn_cfg == dict(type='DiffAttention')
    _write(tmp_path, 'base.py', "act = 'sigmoid'\nattn_cfg = 'dnaa'\n")
    for key in ('act', 'attn_cfg'):
        child = _write(tmp_path, f'{key}.py', f"_base_ = ['./base.py']\n{key} = dict(variant='apm')\n")
        with pytest.raises(TypeError, match=f'{key}=.* in child config cannot inherit from base'):
            Config.fromfile(child)
