"""FLOPs with attention counted: the SDPA handle, DnA's extra work, tools/analysis/get_flops.py."""

from __future__ import annotations

import re

import pytest
import timm
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import REPO, run_main

from dna_mm.analysis.complexity import model_complexity
from dna_mm.models import DnAAttention, SoftmaxAttention


class OneCall(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, H, M, d]
        k = x[:, :, :5]  # N = 5
        v = torch.cat([k, k], -1)  # dv = 2d
        return F.scaled_dot_product_attention(x, k, v)


def test_sdpa_counts_both_matmuls_per_head() -> None:
    b, h, m, d = 2, 3, 7, 4
    result = model_complexity(OneCall(), torch.randn(b, h, m, d))
    assert result.flops == b * h * m * 5 * (d + 2 * d)
    assert 'aten::scaled_dot_product_attention' not in result.unsupported


@pytest.mark.parametrize('cls', [SoftmaxAttention, DnAAttention])
def test_fast_path_counts_as_the_eager_path(cls) -> None:
    """The SDPA calls count what the explicit matmuls of the eager path count."""
    torch.manual_seed(0)
    attn = cls(embed_dims=32, num_heads=4)
    x = torch.randn(2, 9, 32)
    fast = model_complexity(attn, x).flops
    attn.fused_attn = False
    eager = model_complexity(attn, x).flops
    assert fast == eager


def test_dna_extra_work_is_the_negative_projections_and_the_second_attention() -> None:
    """Q±V± over softmax, per block: two C×C projections on N tokens and one more attention
    (QKᵀ and AV: N·N·(d + d) per head)."""
    kw = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3, num_classes=5)
    soft = model_complexity(timm.create_model('vit_tiny_patch16_224', **kw), torch.zeros(1, 3, 32, 32))
    dna = model_complexity(timm.create_model('dna_vit_tiny_patch16_224', **kw), torch.zeros(1, 3, 32, 32))
    n, c, heads, depth = 17, 48, 3, 2
    assert dna.flops - soft.flops == depth * (2 * n * c * c + heads * n * n * 2 * (c // heads))
    assert dna.params - soft.params == depth * (2 * (c * c + c) + heads)


def parse(out: str) -> tuple[float, float]:
    params = re.search(r'^(\d+\.\d\d) M params$', out, re.M)
    flops = re.search(r'^(\d+\.\d\d) GFLOPs$', out, re.M)
    assert params and flops, out
    return float(params.group(1)), float(flops.group(1))


def test_cli_timm_names_and_variant() -> None:
    out = run_main(
        [
            'tools/analysis/get_flops.py',
            'dna_vit_tiny_patch16_224',
            '--model-args',
            'attn_cfg.variant=qpm_v',
            '--input-shape',
            '3',
            '64',
            '64',
        ]
    ).stdout
    assert 'input shape: [3, 64, 64] (batch 1); FLOPs of the whole model' in out
    params, flops = parse(out)
    assert 5.0 < params < 7.0 and 0 < flops < 1


@pytest.mark.parametrize(
    'config, shape',
    [('configs/timesformer_dna_demo.py', '[3, 8, 32, 32]'), ('configs/vitdet_dna_demo.py', None)],
)
def test_cli_configs(config, shape) -> None:
    out = run_main(['tools/analysis/get_flops.py', config]).stdout
    parse(out)
    if shape:
        assert f'input shape: {shape} (batch 1); FLOPs of backbone + head' in out
    else:
        assert 'FLOPs of backbone + neck (extract_feat)' in out


@pytest.mark.integration
def test_cli_bad_model_is_named() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, 'tools/analysis/get_flops.py', 'no_such_model_xyz'],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert 'get_flops.py: error: no_such_model_xyz is neither a config file nor a timm model' in proc.stderr
