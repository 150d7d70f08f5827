"""docs/attention.md's "Your own member" is a complete file: copied as it is, it runs as a script
and, imported, its member builds by short name in a host, trains, and shows its maps to the
analyses' hook; gated by one setting."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import runpy

import pytest
import torch
from conftest import REPO
from mmengine.registry import MODELS

import dna_mm  # noqa: F401  (registers the family)
from dna_mm.models.attention import build_attention
from dna_mm.models.backbones.vitdet import ViTDet

DOC = REPO / 'docs' / 'attention.md'


def _member_file() -> str:
    """The first Python block of the section."""
    section = DOC.read_text().split('## Your own member', 1)[1]
    return re.search(r'```python\n(.*?)```', section, re.S).group(1)


@pytest.fixture
def relu_file(tmp_path):
    """The block saved as a user saves it; the registrations it makes removed after."""
    shipped = dict(MODELS.module_dict)
    path = tmp_path / 'relu_attention.py'
    path.write_text(_member_file())
    yield path
    for name in list(MODELS.module_dict):
        if name not in shipped:
            del MODELS.module_dict[name]
    MODELS.module_dict.update(shipped)


def test_the_file_runs_as_a_script(relu_file) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(relu_file), run_name='__main__')
    assert out.getvalue().strip() == 'torch.Size([2, 10, 64])'


def test_the_imported_member_runs_in_a_host_and_gated(relu_file) -> None:
    spec = importlib.util.spec_from_file_location('relu_attention', relu_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = ViTDet(
        img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, window_size=2,
        window_block_indexes=[0], pretrain_img_size=32, use_rel_pos=True, attn_cfg='relu',
    )  # fmt: skip
    members = [m for m in model.modules() if type(m) is module.ReLUAttention]
    assert len(members) == 2
    seen = []
    handle = members[1].register_attend_hook(lambda m, maps, heads: seen.append(maps['attn']))
    model(torch.randn(1, 3, 32, 32))[0].square().mean().backward()
    handle.remove()
    assert seen and (seen[0] >= 0).all() and members[1].qkv.weight.grad.abs().sum() > 0
    gated = build_attention(dict(type='ReLUAttention', gated=True), 32, 2)
    assert type(gated) is module.ReLUAttention and 'gate.weight' in gated.state_dict()
    cross = build_attention('ReLUCrossAttention', 32, 2)
    assert cross(torch.randn(2, 3, 32), torch.randn(2, 5, 32)).shape == (2, 3, 32)
