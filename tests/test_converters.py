"""Converters: softmax → DnA (timm and nn.MultiheadAttention keys), DnA → softmax, and the
authors' two checkpoint layouts, each checked against forward semantics."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import timm
import torch
from torch import nn

import dna_mm  # noqa: F401  (registers dna_vit_*)
from dna_mm.converters import dna_to_softmax, official_to_dna_mm, rename_mha, softmax_to_dna
from dna_mm.models import DnAAttention, SoftmaxAttention

C, H = 32, 4
REPO = Path(__file__).resolve().parents[1]


class AuthorsViTAttention(nn.Module):
    """The authors' ViT module as SPEC §1 describes it: one ``qqkvv`` Linear(C, 5C), output
    reshaped ``[B, N, 5, H, d]`` in the order ``[Q+, Q-, K, V+, V-]``, ``neg_scalers``."""

    def __init__(self) -> None:
        super().__init__()
        self.qqkvv = nn.Linear(C, 5 * C)
        self.neg_scalers = nn.Parameter(torch.rand(1, H, 1, 1))
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        b, n, _ = x.shape
        t = self.qqkvv(x).reshape(b, n, 5, H, C // H).permute(2, 0, 3, 1, 4)
        q_pos, q_neg, k, v_pos, v_neg = t.unbind(0)
        s = (C // H) ** -0.5
        a_pos = (q_pos @ k.transpose(-2, -1) * s).softmax(-1)
        a_neg = (-(q_neg @ k.transpose(-2, -1) * s)).softmax(-1)
        out = a_pos @ v_pos + self.neg_scalers * (a_neg @ v_neg)
        return self.proj(out.transpose(1, 2).reshape(b, n, C))


class AuthorsTimeSformerAttention(nn.Module):
    """The authors' TimeSformer module: ``qkv`` = ``[Q+, K, V+]``, ``q_neg``, ``v_neg``."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(C, 3 * C)
        self.q_neg = nn.Linear(C, C)
        self.v_neg = nn.Linear(C, C)
        self.neg_scalers = nn.Parameter(torch.rand(H))
        self.proj = nn.Linear(C, C)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, H, C // H).permute(2, 0, 3, 1, 4).unbind(0)
        qn = self.q_neg(x).reshape(b, n, H, C // H).transpose(1, 2)
        vn = self.v_neg(x).reshape(b, n, H, C // H).transpose(1, 2)
        s = (C // H) ** -0.5
        a_pos = (q @ k.transpose(-2, -1) * s).softmax(-1)
        a_neg = nn.functional.softmin(qn @ k.transpose(-2, -1) * s, dim=-1)
        out = a_pos @ v + self.neg_scalers.view(1, H, 1, 1) * (a_neg @ vn)
        return self.proj(out.transpose(1, 2).reshape(b, n, C))


@pytest.mark.parametrize('authors_cls', [AuthorsViTAttention, AuthorsTimeSformerAttention])
def test_official_layouts_reproduce_the_authors_forward(authors_cls) -> None:
    theirs = authors_cls().eval()
    sd = {f'blocks.3.attn.{k}': v for k, v in theirs.state_dict().items()}
    converted = official_to_dna_mm(sd)
    assert all(k.startswith('blocks.3.attn.') for k in converted)
    ours = DnAAttention(C, H, qkv_bias=True).eval()
    ours.load_state_dict({k[len('blocks.3.attn.'):]: v for k, v in converted.items()}, strict=True)
    x = torch.randn(2, 7, C)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_qqkvv_is_mapped_by_meaning_not_concatenation() -> None:
    theirs = AuthorsViTAttention()
    w = theirs.qqkvv.weight.detach()
    out = official_to_dna_mm(theirs.state_dict())
    assert torch.equal(out['q_neg.weight'], w[C:2 * C])          # Q-, not K
    assert torch.equal(out['qkv.weight'][C:2 * C], w[2 * C:3 * C])  # K in the K slot


def test_softmax_to_dna_and_back_on_a_single_attention() -> None:
    soft = SoftmaxAttention(C, H).eval()
    sd = softmax_to_dna(soft.state_dict(), num_heads=H)
    assert set(sd) - set(soft.state_dict()) == {
        'q_neg.weight', 'q_neg.bias', 'v_neg.weight', 'v_neg.bias', 'alpha'}
    q, _, v = soft.qkv.weight.chunk(3)
    torch.testing.assert_close(sd['q_neg.weight'], 1e-4 * q)
    torch.testing.assert_close(sd['v_neg.weight'], -1e-4 * v)
    dna = DnAAttention(C, H).eval()
    dna.load_state_dict(sd, strict=True)
    x = torch.randn(2, 5, C)
    torch.testing.assert_close(dna(x), soft(x), atol=1e-4, rtol=1e-3)
    back = dna_to_softmax(dna.state_dict())
    assert back.keys() == soft.state_dict().keys()
    assert all(torch.equal(back[k], v) for k, v in soft.state_dict().items())


def test_multihead_attention_keys() -> None:
    mha = nn.MultiheadAttention(C, H, batch_first=True).eval()
    sd = {f'layers.0.attentions.1.attn.{k}': v for k, v in mha.state_dict().items()}
    dna_sd = softmax_to_dna(sd, num_heads=H)
    prefix = 'layers.0.attentions.1.attn.'
    dna = DnAAttention(C, H).eval()
    dna.load_state_dict({k[len(prefix):]: v for k, v in dna_sd.items()}, strict=True)
    x = torch.randn(2, 5, C)
    torch.testing.assert_close(dna(x), mha(x, x, x, need_weights=False)[0], atol=1e-4, rtol=1e-3)
    assert set(dna_to_softmax(dna_sd, layout='mha')) == set(sd)
    assert set(rename_mha(sd)) == {prefix + k for k in ('qkv.weight', 'qkv.bias', 'proj.weight',
                                                          'proj.bias')}


@pytest.mark.parametrize('variant', ['qpm_v', 'q_vpm', 'apm_alpha', 'apm'])
def test_softmax_to_dna_variants_load_strict(variant) -> None:
    sd = softmax_to_dna(SoftmaxAttention(C, H).state_dict(), variant=variant, num_heads=H)
    DnAAttention(C, H, variant=variant).load_state_dict(sd, strict=True)


def test_timm_vit_converted_gives_the_same_logits() -> None:
    vit = timm.create_model('vit_tiny_patch16_224', num_classes=10, img_size=64).eval()
    dna = timm.create_model('dna_vit_tiny_patch16_224', num_classes=10, img_size=64).eval()
    dna.load_state_dict(softmax_to_dna(vit.state_dict(), num_heads=3), strict=True)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ref, out = vit(x), dna(x)
    assert ((out - ref).norm() / ref.norm()).item() < 1e-3
    vit2 = timm.create_model('vit_tiny_patch16_224', num_classes=10, img_size=64).eval()
    vit2.load_state_dict(dna_to_softmax(dna.state_dict()), strict=True)
    with torch.no_grad():
        torch.testing.assert_close(vit2(x), ref)


def test_timm_pretrained_file_is_converted_on_load(tmp_path) -> None:
    vit = timm.create_model('vit_tiny_patch16_224', num_classes=10, img_size=64).eval()
    path = tmp_path / 'vit_tiny.pth'
    torch.save(vit.state_dict(), path)
    dna = timm.create_model('dna_vit_tiny_patch16_224', pretrained=True, num_classes=10,
                            img_size=64,
                            pretrained_cfg_overlay=dict(file=str(path), num_classes=10)).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert ((dna(x) - vit(x)).norm() / vit(x).norm()).item() < 1e-3


@pytest.mark.parametrize('suffix', ['.pth', '.safetensors'])
def test_convert_cli(tmp_path, suffix) -> None:
    vit = timm.create_model('vit_tiny_patch16_224', num_classes=10, img_size=64)
    src, dst = tmp_path / f'in{suffix}', tmp_path / f'out{suffix}'
    if suffix == '.pth':
        torch.save({'state_dict': vit.state_dict(), 'meta': {'epoch': 3}}, src)
    else:
        from safetensors.torch import save_file
        save_file(vit.state_dict(), str(src))
    cmd = [sys.executable, str(REPO / 'tools' / 'convert_checkpoint.py'), 'softmax-to-dna',
           str(src), str(dst), '--num-heads', '3']
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert 'added' in res.stdout
    loaded = dna_mm.utils.load_checkpoint_file(str(dst))
    sd = loaded['state_dict'] if suffix == '.pth' else loaded
    dna = timm.create_model('dna_vit_tiny_patch16_224', num_classes=10, img_size=64)
    dna.load_state_dict(sd, strict=True)
    if suffix == '.pth':
        assert loaded['meta'] == {'epoch': 3}
    res = subprocess.run(cmd[:-4] + [str(tmp_path / 'missing.pth'), str(dst)], capture_output=True,
                         text=True, cwd=REPO)
    assert res.returncode != 0 and 'missing.pth' in res.stderr
