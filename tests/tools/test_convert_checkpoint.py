"""tools/model_converters/convert_checkpoint.py: each subcommand's help, the head count taken from
the config (no guess from the width), and the combine sign of the authors' layout."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, load_tool
from mmengine.config import Config


def _convert_tool():
    return load_tool('tools/model_converters/convert_checkpoint.py')


@pytest.mark.parametrize(
    'command,expected',
    [
        (
            'softmax-to-dna',
            [
                '--config CONFIG',
                '--num-heads NUM_HEADS',
                '(default: 0.0001)',
                '(default: -0.0001)',
                '(default: qpm_vpm)',
            ],
        ),
        ('dna-to-softmax', ['--layout {timm,mha}', '(default: timm)', 'CHANGES THE FUNCTION']),
        (
            'official-to-dna-mm',
            [
                '--combine {add,sub}',
                '(default: add)',
                'vit/dna_models.py',
                'vit/dna.py',
                'VisCoP',
                'TimeSformer',
            ],
        ),
    ],
)
def test_each_subcommand_help_shows_its_own_options(command, expected, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        _convert_tool().parse_args([command, '--help'])
    assert done.value.code == 0
    text = re.sub(r'\s+', ' ', capsys.readouterr().out)
    for item in expected:
        assert item in text, (item, text)
    others = {
        'softmax-to-dna': '--num-heads',
        'dna-to-softmax': '--layout',
        'official-to-dna-mm': '--combine',
    }
    assert not any(flag in text for cmd, flag in others.items() if cmd != command)


def test_softmax_to_dna_takes_the_heads_from_the_config_or_refuses(tmp_path, capsys) -> None:
    """The report's case: a 4-head, 96-wide model (the demo's); no guess from the width."""
    from mmaction.registry import MODELS

    demo = Config.fromfile(DEMO_CONFIG).model.backbone
    common = dict(
        type='DnATimeSformer',
        num_frames=demo.num_frames,
        img_size=demo.img_size,
        patch_size=demo.patch_size,
        embed_dims=96,
        num_heads=4,
        num_transformer_layers=1,
    )
    softmax = MODELS.build(dict(common, attn_cfg='softmax')).eval()
    torch.save({'state_dict': softmax.state_dict()}, tmp_path / 'softmax.pth')
    tool = _convert_tool()

    with pytest.raises(SystemExit, match='softmax.pth') as done:
        tool.main(['softmax-to-dna', str(tmp_path / 'softmax.pth'), str(tmp_path / 'x.pth')])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith('convert_checkpoint.py: error: ')
    assert 'softmax.pth' in err and '--num-heads' in err and '--config' in err
    assert not (tmp_path / 'x.pth').exists()

    assert (
        tool.main(
            [
                'softmax-to-dna',
                str(tmp_path / 'softmax.pth'),
                str(tmp_path / 'dna.pth'),
                '--config',
                DEMO_CONFIG,
            ]
        )
        == 0
    )
    converted = torch.load(tmp_path / 'dna.pth', weights_only=True)['state_dict']
    alphas = {k: v for k, v in converted.items() if k.endswith('alpha')}
    assert len(alphas) == 2 and all(v.tolist() == [0.5] * 4 for v in alphas.values())
    dna = MODELS.build(dict(common, attn_cfg='dna')).eval()
    dna.load_state_dict(converted, strict=True)
    x = torch.randn(1, 3, demo.num_frames, demo.img_size, demo.img_size)
    with torch.no_grad():
        ref = softmax(x)
        assert ((dna(x) - ref).norm() / ref.norm()).item() < 1e-3


@pytest.mark.parametrize('combine,sign', [('add', 1.0), ('sub', -1.0)])
def test_official_to_dna_mm_passes_the_combine_sign(combine, sign, tmp_path) -> None:
    """The authors' TimeSformer / older ViT layout (qkv, q_neg, v_neg, neg_scalers)."""
    c, heads = 8, 2
    sd = {
        'blocks.0.attn.qkv.weight': torch.randn(3 * c, c),
        'blocks.0.attn.qkv.bias': torch.randn(3 * c),
        'blocks.0.attn.q_neg.weight': torch.randn(c, c),
        'blocks.0.attn.v_neg.weight': torch.randn(c, c),
        'blocks.0.attn.neg_scalers': torch.tensor([0.3, -0.7]).reshape(1, heads, 1, 1),
        'blocks.0.attn.proj.weight': torch.randn(c, c),
    }
    torch.save({'model': sd}, tmp_path / 'authors.pth')
    args = ['official-to-dna-mm', str(tmp_path / 'authors.pth'), str(tmp_path / 'ours.pth')]
    assert _convert_tool().main(args + (['--combine', combine] if combine == 'sub' else [])) == 0
    ours = torch.load(tmp_path / 'ours.pth', weights_only=True)['model']
    assert ours['blocks.0.attn.alpha'].tolist() == pytest.approx([sign * 0.3, sign * -0.7])
    assert torch.equal(ours['blocks.0.attn.q_neg.weight'], sd['blocks.0.attn.q_neg.weight'])


@pytest.mark.parametrize('variant', ['qpm_v', 'Q±V'])
def test_softmax_to_dna_takes_the_familys_variants_and_refuses_another(variant, tmp_path, capsys) -> None:
    """``--variant``: a name of ``dna_mm.family`` (dna_mm's or the paper's), no copy of them in the
    tool; another is one line naming them, before the checkpoint is read."""
    from dna_mm.family import DNA_VARIANT_ALIASES, DNA_VARIANTS

    torch.save({'state_dict': {'blocks.0.attn.qkv.weight': torch.zeros(12, 4)}}, tmp_path / 'in.pth')
    tool = _convert_tool()
    out = tmp_path / 'out.pth'
    tool.main(
        ['softmax-to-dna', str(tmp_path / 'in.pth'), str(out), '--num-heads', '2', '--variant', variant]
    )
    assert 'blocks.0.attn.q_neg.weight' in torch.load(out, weights_only=True)['state_dict']
    with pytest.raises(SystemExit) as done:
        tool.main(['softmax-to-dna', str(tmp_path / 'nothing.pth'), str(out), '--variant', 'qpm'])
    err = capsys.readouterr().err
    assert (
        done.value.code == 2 and "convert_checkpoint.py: error: --variant: unknown DnA variant 'qpm'" in err
    )
    assert all(name in err for name in (*DNA_VARIANTS, *DNA_VARIANT_ALIASES)) and 'Traceback' not in err


def test_writing_over_the_checkpoint_read_is_refused(tmp_path, capsys) -> None:
    """DST naming SRC (by another spelling too) would replace the original with the conversion:
    one line before anything is read, the file as it was."""
    src = tmp_path / 'vit.pth'
    torch.save({'state_dict': {'blocks.0.attn.qkv.weight': torch.zeros(12, 4)}}, src)
    before = src.read_bytes()
    with pytest.raises(SystemExit) as done:
        _convert_tool().main(['softmax-to-dna', str(src), f'{tmp_path}/sub/../vit.pth', '--num-heads', '2'])
    err = capsys.readouterr().err
    assert (
        done.value.code == 2
        and f'error: DST {tmp_path}/sub/../vit.pth is the checkpoint {src}: it would be' in err
    )
    assert src.read_bytes() == before


@pytest.mark.parametrize('where', ['docs/checkpoints.md', 'tools/model_converters/convert_checkpoint.py'])
def test_the_usage_lines_parse_as_written(where) -> None:
    """The optional arguments of softmax-to-dna's usage line, as the docs and the tool's docstring
    write them (a negative scale after ``=``: argparse takes ``-1e-4`` alone for an option)."""
    line = next(ln for ln in (REPO / where).read_text().splitlines() if '--v-neg-scale' in ln)
    options = ' '.join(re.findall(r'\[(--[^\]]+)\]', line)).split()
    args = _convert_tool().parse_args(['softmax-to-dna', 'in.pth', 'out.pth', '--num-heads', '4', *options])
    assert (args.variant, args.q_neg_scale, args.v_neg_scale) == ('qpm_vpm', 1e-4, -1e-4)
