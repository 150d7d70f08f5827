"""Converters: softmax → DnA (timm and nn.MultiheadAttention keys), DnA → softmax, and the
authors' two checkpoint layouts, each checked against forward semantics."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import timm
import torch
from authors_models import AuthorsDnAViT, AuthorsQkvNeg, AuthorsQQKV, AuthorsQQKVV, AuthorsViSCoPCrossDnA
from conftest import REPO, load_tool, run_main
from tolerance import REORDERED, ROUNDING, assert_close_as
from torch import nn

import dna_mm  # noqa: F401  (registers dna_vit_*)
from dna_mm.converters import dna_to_softmax, negative_branch, official_to_dna_mm, rename_mha, softmax_to_dna
from dna_mm.family import EXACT_UPGRADE, NEGATIVE_INIT, NegativeInit
from dna_mm.models import DnAAttention, DnACrossAttention, SoftmaxAttention
from dna_mm.models.backbones import adapt_attentions

C, H = 32, 4


@pytest.mark.parametrize(
    'authors_cls,combine,variant',
    [
        (AuthorsQQKVV, 'add', 'qpm_vpm'),  # vit/dna_models.py
        (AuthorsQQKVV, 'sub', 'qpm_vpm'),  # vit/dna.py DenoisingAttention
        (AuthorsQkvNeg, 'add', 'qpm_vpm'),  # timesformer/models/dna.py
        (AuthorsQQKV, 'sub', 'qpm_v'),  # vit/dna.py DenoisingAttentionSharedValues
        (AuthorsQQKV, 'add', 'qpm_v'),
    ],
)
def test_official_layouts_reproduce_the_authors_forward(authors_cls, combine, variant) -> None:
    theirs = authors_cls(C, H, combine=combine).eval()
    sd = {f'blocks.3.attn.{k}': v for k, v in theirs.state_dict().items()}
    converted = official_to_dna_mm(sd, combine=combine)
    assert all(k.startswith('blocks.3.attn.') for k in converted)
    ours = DnAAttention(C, H, qkv_bias=True, variant=variant).eval()
    ours.load_state_dict({k[len('blocks.3.attn.') :]: v for k, v in converted.items()}, strict=True)
    x = torch.randn(2, 7, C)
    assert_close_as(ours(x), theirs(x), ulps=REORDERED)


def test_wrong_combine_sign_changes_the_function() -> None:
    """A subtracting file converted as 'add' is a different function (the reason the
    argument exists): relative error far above float noise."""
    theirs = AuthorsQQKVV(C, H, combine='sub').eval()
    ours = DnAAttention(C, H).eval()
    ours.load_state_dict(official_to_dna_mm(theirs.state_dict(), combine='add'), strict=True)
    x = torch.randn(2, 7, C)
    ref = theirs(x)
    assert ((ours(x) - ref).norm() / ref.norm()).item() > 0.05
    with pytest.raises(ValueError, match="'add' or 'sub'"):
        official_to_dna_mm(theirs.state_dict(), combine='minus')


def test_shared_v_layout_fills_a_qpm_vpm_model_exactly() -> None:
    """Q±V (qqkv) into the default Q±V± model: ``v_neg = V`` is the same function."""
    theirs = AuthorsQQKV(C, H, combine='sub').eval()
    ours = DnAAttention(C, H).eval()  # qpm_vpm
    sd, generated = adapt_attentions(ours, official_to_dna_mm(theirs.state_dict(), 'sub'))
    assert sorted(generated) == ['v_neg.bias', 'v_neg.weight']
    ours.load_state_dict(sd, strict=True)
    x = torch.randn(2, 7, C)
    assert_close_as(ours(x), theirs(x), ulps=REORDERED)


def test_partial_attention_in_a_file_is_an_error_naming_the_keys() -> None:
    model = nn.Module()
    model.attn = DnAAttention(C, H)
    theirs = AuthorsQQKV(C, H).state_dict()
    unconverted = {f'attn.{k}': v for k, v in theirs.items()}  # qqkv not mapped
    with pytest.raises(ValueError, match=r'(?s)my\.pth: 1 attention.*attn: missing .*qkv\.weight'):
        adapt_attentions(model, unconverted, source='my.pth')
    truncated = {
        f'attn.{k}': v for k, v in SoftmaxAttention(C, H).state_dict().items() if not k.startswith('proj.')
    }
    with pytest.raises(ValueError, match=r'missing proj\.weight, proj\.bias'):
        adapt_attentions(model, truncated, source='my.pth')
    # softmax → DnA: the generated negative branch is not "missing"
    full = {f'attn.{k}': v for k, v in SoftmaxAttention(C, H).state_dict().items()}
    sd, generated = adapt_attentions(model, full)
    assert len(generated) == 5
    model.load_state_dict(sd, strict=True)


def test_authors_dna_vit_file_gives_their_logits_in_dna_vit(tmp_path) -> None:
    """``vit/dna_models.py``'s model (pos_embed without a CLS row) saved as their main.py
    does (``{'model': state_dict}``) loads into ``dna_vit_*`` with the same logits."""
    theirs = AuthorsDnAViT(img_size=32, patch=8, dim=C, depth=2, heads=H, num_classes=5).eval()
    assert theirs.state_dict()['pos_embed'].shape == (1, 16, C)
    torch.save({'model': theirs.state_dict(), 'epoch': 299}, tmp_path / 'checkpoint.pth')
    ours = timm.create_model(
        'dna_vit_tiny_patch16_224',
        pretrained=True,
        img_size=32,
        patch_size=8,
        embed_dim=C,
        depth=2,
        num_heads=H,
        num_classes=5,
        pretrained_cfg_overlay=dict(file=str(tmp_path / 'checkpoint.pth'), num_classes=5),
    ).eval()
    assert torch.equal(ours.pos_embed[0, 0], torch.zeros(C))
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert_close_as(ours(x), theirs(x), ulps=REORDERED)


#: where VisCoP's video-LLM checkpoint holds the vision encoder
VISCOP = 'model.vision_encoder.vision_encoder.encoder.'


def _viscop_file() -> tuple[AuthorsViSCoPCrossDnA, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """VisCoP's DnA cross-attention as ``interaction_modules.0`` of their encoder, beside a
    SigLIP softmax layer's keys: ``(module, state dict, the softmax keys)``."""
    config = SimpleNamespace(hidden_size=C, num_attention_heads=H, attention_dropout=0.0)
    theirs = AuthorsViSCoPCrossDnA(config, layer_idx=0).eval()
    with torch.no_grad():
        theirs.neg_scalers.uniform_(0.25, 1.25)
    softmax = {
        f'{VISCOP}layers.0.self_attn.{n}.{t}': torch.randn(C, C) if t == 'weight' else torch.randn(C)
        for n in ('k_proj', 'v_proj', 'q_proj', 'out_proj')
        for t in ('weight', 'bias')
    }
    sd = {**softmax, **{f'{VISCOP}interaction_modules.0.{k}': v for k, v in theirs.state_dict().items()}}
    return theirs, sd, softmax


def test_viscop_cross_attention_reproduces_the_authors_forward() -> None:
    """VisCoP's keys (q_pos_proj, ..., neg_scalers) → DnACrossAttention, exact per packed
    sequence (their pos − α·neg: combine='sub', required); the softmax encoder layers pass."""
    theirs, sd, softmax = _viscop_file()
    with pytest.raises(ValueError, match=r"VisCoP DnA attention.*interaction_modules\.0.*combine='sub'"):
        official_to_dna_mm(sd)
    converted = official_to_dna_mm(sd, combine='sub')
    assert all(converted[k] is v for k, v in softmax.items())
    p = f'{VISCOP}interaction_modules.0.'
    assert torch.equal(converted[p + 'alpha'], -theirs.neg_scalers.detach())
    ours = DnACrossAttention(C, H).eval()
    ours.load_state_dict({k[len(p) :]: v for k, v in converted.items() if k.startswith(p)}, strict=True)
    m, cu_q, cu_kv = 3, [0, 3, 6], [0, 5, 14]  # 3 probes per sample; 5 and 9 tokens, packed
    probes, tokens = torch.randn(2 * m, C), torch.randn(14, C)
    with torch.no_grad():
        ref = theirs(probes, tokens, torch.tensor(cu_q), torch.tensor(cu_kv))
        per_sample = [(probes[cu_q[i] : cu_q[i + 1]], tokens[cu_kv[i] : cu_kv[i + 1]]) for i in range(2)]
        out = torch.cat([ours(q[None], x[None])[0] for q, x in per_sample])  # [2·3, C]
    assert_close_as(out, ref, ulps=REORDERED)
    del sd[p + 'k_proj.weight']
    with pytest.raises(ValueError, match=r'interaction_modules\.0.*missing k_proj\.weight'):
        official_to_dna_mm(sd, combine='sub')


def test_viscop_file_through_the_cli(tmp_path) -> None:
    _, sd, _ = _viscop_file()
    src, dst = tmp_path / 'viscop.pth', tmp_path / 'out.pth'
    torch.save(sd, src)
    cmd = ['tools/model_converters/convert_checkpoint.py', 'official-to-dna-mm', str(src), str(dst)]
    res = run_main(cmd, check=False)
    assert res.returncode == 2 and "combine='sub'" in res.stderr
    res = run_main(cmd + ['--combine', 'sub'], check=False)
    assert res.returncode == 0, res.stderr
    out = torch.load(dst, weights_only=True)
    assert out.keys() == official_to_dna_mm(sd, combine='sub').keys()


def test_qqkvv_is_mapped_by_meaning_not_concatenation() -> None:
    theirs = AuthorsQQKVV(C, H)
    w = theirs.qqkvv.weight.detach()
    out = official_to_dna_mm(theirs.state_dict())
    assert torch.equal(out['q_neg.weight'], w[C : 2 * C])  # Q-, not K
    assert torch.equal(out['qkv.weight'][C : 2 * C], w[2 * C : 3 * C])  # K in the K slot


def test_softmax_to_dna_and_back_on_a_single_attention() -> None:
    soft = SoftmaxAttention(C, H).eval()
    sd = softmax_to_dna(soft.state_dict(), num_heads=H)
    assert set(sd) - set(soft.state_dict()) == {
        'q_neg.weight',
        'q_neg.bias',
        'v_neg.weight',
        'v_neg.bias',
        'alpha',
    }
    q, _, v = soft.qkv.weight.chunk(3)
    assert_close_as(sd['q_neg.weight'], 1e-4 * q, ulps=ROUNDING)
    assert_close_as(sd['v_neg.weight'], -1e-4 * v, ulps=ROUNDING)
    dna = DnAAttention(C, H).eval()
    dna.load_state_dict(sd, strict=True)
    x = torch.randn(2, 5, C)
    assert ((dna(x) - soft(x)).norm() / soft(x).norm()).item() < 1e-3
    back = dna_to_softmax(dna.state_dict())
    assert back.keys() == soft.state_dict().keys()
    assert all(torch.equal(back[k], v) for k, v in soft.state_dict().items())


def test_multihead_attention_keys() -> None:
    mha = nn.MultiheadAttention(C, H, batch_first=True).eval()
    sd = {f'layers.0.attentions.1.attn.{k}': v for k, v in mha.state_dict().items()}
    dna_sd = softmax_to_dna(sd, num_heads=H)
    prefix = 'layers.0.attentions.1.attn.'
    dna = DnAAttention(C, H).eval()
    dna.load_state_dict({k[len(prefix) :]: v for k, v in dna_sd.items()}, strict=True)
    x = torch.randn(2, 5, C)
    ref = mha(x, x, x, need_weights=False)[0]
    assert ((dna(x) - ref).norm() / ref.norm()).item() < 1e-3
    assert set(dna_to_softmax(dna_sd, layout='mha')) == set(sd)
    assert set(rename_mha(sd)) == {prefix + k for k in ('qkv.weight', 'qkv.bias', 'proj.weight', 'proj.bias')}


def test_softmax_to_dna_needs_the_head_count() -> None:
    with pytest.raises(ValueError, match='num_heads is required'):
        softmax_to_dna(SoftmaxAttention(C, H).state_dict())


@pytest.mark.parametrize('variant', ['qpm_v', 'q_vpm', 'apm_alpha', 'apm'])
def test_softmax_to_dna_variants_load_strict(variant) -> None:
    sd = softmax_to_dna(SoftmaxAttention(C, H).state_dict(), variant=variant, num_heads=H)
    DnAAttention(C, H, variant=variant).load_state_dict(sd, strict=True)


def test_one_negative_start_for_packed_and_separate_projections() -> None:
    """:func:`negative_branch` is the one rule: the same tensors from a packed ``qkv`` and from
    separate ``q_proj`` / ``v_proj``, ``α`` of :class:`NegativeInit`; what is there is kept."""
    packed = SoftmaxAttention(C, H).state_dict()
    separate = {
        f'{n}_proj.{p}': t
        for p in ('weight', 'bias')
        for n, t in zip('qkv', packed[f'qkv.{p}'].chunk(3), strict=True)
    }
    init = NegativeInit(2e-4, -3e-4, 0.25)
    a, b = negative_branch(packed, '', 'qpm_vpm', H, init), negative_branch(separate, '', 'qpm_vpm', H, init)
    for key in ('q_neg.weight', 'q_neg.bias', 'v_neg.weight', 'v_neg.bias', 'alpha'):
        assert_close_as(a[key], b[key], ulps=ROUNDING, what=key)
    assert_close_as(b['q_neg.weight'], 2e-4 * separate['q_proj.weight'], ulps=ROUNDING)
    assert torch.equal(a['alpha'], torch.full((H,), 0.25))
    kept = negative_branch({**packed, 'alpha': torch.ones(H)}, '', 'qpm_vpm', H, EXACT_UPGRADE)
    assert torch.equal(kept['alpha'], torch.ones(H))
    assert torch.equal(kept['v_neg.weight'], packed['qkv.weight'].chunk(3)[2])


def test_alpha_starts_where_negative_init_says() -> None:
    assert NEGATIVE_INIT.alpha == 0.5  # the authors'
    assert DnAAttention(C, H).alpha.tolist() == [NEGATIVE_INIT.alpha] * H
    sd = softmax_to_dna(SoftmaxAttention(C, H).state_dict(), num_heads=H)
    assert sd['alpha'].tolist() == [NEGATIVE_INIT.alpha] * H
    vit = timm.create_model('dna_vit_tiny_patch16_224', depth=1, num_classes=2, img_size=32)
    assert vit.blocks[0].attn.alpha.tolist() == [NEGATIVE_INIT.alpha] * 3


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
        assert_close_as(vit2(x), ref, ulps=ROUNDING)


def test_timm_pretrained_file_is_converted_on_load(tmp_path) -> None:
    vit = timm.create_model('vit_tiny_patch16_224', num_classes=10, img_size=64).eval()
    path = tmp_path / 'vit_tiny.pth'
    torch.save(vit.state_dict(), path)
    dna = timm.create_model(
        'dna_vit_tiny_patch16_224',
        pretrained=True,
        num_classes=10,
        img_size=64,
        pretrained_cfg_overlay=dict(file=str(path), num_classes=10),
    ).eval()
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
    cmd = [
        'tools/model_converters/convert_checkpoint.py',
        'softmax-to-dna',
        str(src),
        str(dst),
        '--num-heads',
        '3',
    ]
    res = run_main(cmd, check=False)
    assert res.returncode == 0, res.stderr
    assert 'added' in res.stdout
    loaded = dna_mm.checkpoint.read_checkpoint(str(dst))
    sd = loaded['state_dict'] if suffix == '.pth' else loaded
    dna = timm.create_model('dna_vit_tiny_patch16_224', num_classes=10, img_size=64)
    dna.load_state_dict(sd, strict=True)
    if suffix == '.pth':
        assert loaded['meta'] == {'epoch': 3}
    res = run_main(cmd[:-4] + [str(tmp_path / 'missing.pth'), str(dst)], check=False)
    assert res.returncode != 0 and 'missing.pth' in res.stderr


def test_converters_refuse_a_state_dict_with_nothing_to_convert() -> None:
    """A clear exception naming the layouts looked for (the loaders, which read any file, pass
    ``strict=False`` and get the input back)."""
    from dna_mm.converters import NothingToConvertError

    soft = {f'blocks.0.attn.{k}': v for k, v in SoftmaxAttention(C, H).state_dict().items()}
    dna = softmax_to_dna(soft, num_heads=H)
    plain = {'fc.weight': torch.zeros(2, 2)}
    with pytest.raises(NothingToConvertError, match=r"authors' '<prefix>qqkvv\.weight'.*'blocks\.0\.attn"):
        official_to_dna_mm(soft)
    with pytest.raises(NothingToConvertError, match="already has dna_mm's keys"):
        official_to_dna_mm(dna)
    with pytest.raises(
        NothingToConvertError, match=r"no softmax attention.*in_proj_weight'; the 1 found already"
    ):
        softmax_to_dna(dna, num_heads=H)
    with pytest.raises(NothingToConvertError, match=r"no DnA attention to convert: looked for dna_mm's"):
        dna_to_softmax(soft)
    with pytest.raises(NothingToConvertError, match=r"no softmax attention.*\['fc\.weight'\]"):
        softmax_to_dna(plain, num_heads=H)
    assert official_to_dna_mm(soft, strict=False).keys() == soft.keys()
    assert dna_to_softmax(soft, strict=False).keys() == soft.keys()
    assert softmax_to_dna(dna, num_heads=H, strict=False).keys() == dna.keys()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / 'tools' / 'model_converters' / 'convert_checkpoint.py'), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def _tool():
    """``tools/model_converters/convert_checkpoint.py`` as a module (``main`` returns 0; an input error
    exits with 2)."""
    return load_tool('tools/model_converters/convert_checkpoint.py')


def test_convert_cli_unwraps_every_wrapper_and_keeps_it(tmp_path, capsys) -> None:
    """``model_state`` + ``model.`` keys (the authors' TimeSformer, PySlowFast),
    ``state_dict`` + ``module.`` keys (a DDP model saved by mmengine), ``model`` (DeiT /
    ``vit/main.py``): the weights under each are converted, prefixes and the rest kept."""
    theirs = {f'blocks.0.attn.{k}': v for k, v in AuthorsQkvNeg(C, H).state_dict().items()}
    cases = {
        'pyslowfast': (
            {
                'epoch': 14,
                'model_state': {f'model.{k}': v for k, v in theirs.items()},
                'optimizer_state': {'state': {}, 'param_groups': []},
                'cfg': 'DATA:\n  NUM_FRAMES: 8\n',
            },
            'model_state',
            'model.',
        ),
        'ddp': (
            {'meta': {'epoch': 2}, 'state_dict': {f'module.{k}': v for k, v in theirs.items()}},
            'state_dict',
            'module.',
        ),
        'deit': ({'model': theirs, 'epoch': 299}, 'model', ''),
    }
    for name, (ckpt, wrapper, prefix) in cases.items():
        src, dst = tmp_path / f'{name}.pth', tmp_path / f'{name}_out.pth'
        torch.save(ckpt, src)
        assert _tool().main(['official-to-dna-mm', str(src), str(dst)]) == 0
        assert f"official-to-dna-mm '{wrapper}': {len(theirs)} keys in" in capsys.readouterr().out
        out = torch.load(dst, weights_only=True)
        assert set(out) == set(ckpt) and all(out[k] == ckpt[k] for k in ckpt if k != wrapper)
        assert f'{prefix}blocks.0.attn.alpha' in out[wrapper], name
        assert f'{prefix}blocks.0.attn.neg_scalers' not in out[wrapper], name
        assert torch.equal(out[wrapper][f'{prefix}blocks.0.attn.alpha'], theirs['blocks.0.attn.neg_scalers'])


@pytest.mark.integration
def test_convert_cli_with_nothing_to_convert_exits_non_zero(tmp_path, capsys) -> None:
    soft = {f'blocks.0.attn.{k}': v for k, v in SoftmaxAttention(C, H).state_dict().items()}
    torch.save({'state_dict': soft}, tmp_path / 'softmax.pth')
    torch.save({'state_dict': softmax_to_dna(soft, num_heads=H)}, tmp_path / 'dna.pth')
    cases = (
        (['official-to-dna-mm', 'softmax.pth'], "no attention in the authors' layouts to convert"),
        (['softmax-to-dna', 'dna.pth', '--num-heads', str(H)], 'already have a negative branch'),
        (['dna-to-softmax', 'softmax.pth'], 'no DnA attention to convert'),
    )
    for i, (args, says) in enumerate(cases):
        src = str(tmp_path / args[1])
        argv = [args[0], src, str(tmp_path / 'out.pth'), *args[2:]]
        if i == 0:  # as a user runs it: the exit status
            res = _cli(*argv)
            status, err = res.returncode, res.stderr
        else:
            with pytest.raises(SystemExit) as done:
                _tool().main(argv)
            status, err = done.value.code, capsys.readouterr().err
        assert status == 2, (args, err)
        lines = [ln for ln in err.splitlines() if ln.startswith('convert_checkpoint.py: error: ')]
        assert len(lines) == 1 and f"{src} (its 'state_dict' entry): no" in lines[0] and says in lines[0], err
    assert not (tmp_path / 'out.pth').exists()
