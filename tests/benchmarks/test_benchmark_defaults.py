"""The benchmarks' default models from a folder other than the checkout (an installed dna_mm's
``dna_mm benchmark_onnx`` / ``benchmark_train_step`` run in the user's folder): the shipped
configs, found there; and a model argument of benchmark_onnx that names none: one line, exit
status 2, before the table."""

from __future__ import annotations

import pytest
import torch
from conftest import load_tool

#: a TimeSformer of one small block at 32² (the train step's configs)
TINY_STEP = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 1,
    'model.backbone.img_size': 32,
    'model.backbone.patch_size': 8,
    'model.backbone.num_frames': 4,
    'model.cls_head.in_channels': 32,
}


@pytest.fixture
def threads():
    """The process's torch threads as they were (the ONNX benchmark sets its own)."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_benchmark_onnx_defaults_run_from_any_folder(tmp_path, monkeypatch, capsys, threads) -> None:
    pytest.importorskip('onnxruntime')
    monkeypatch.chdir(tmp_path)
    table = load_tool('tools/benchmarks/benchmark_onnx.py').main(
        ['--batches', '1', '--threads', '1', '--reps', '1']
    )
    rows = [ln.split('|')[1].strip() for ln in table.splitlines() if ln.startswith('| ') and '---' not in ln]
    assert rows[1:] == [
        'timesformer_dna_demo (dna)',
        'timesformer_dna_demo (softmax)',
        'dna_vit_tiny_patch16_224',
    ], table


def test_benchmark_onnx_measures_a_given_config_as_written_and_takes_a_methods_name(
    tmp_path, monkeypatch, capsys, threads
) -> None:
    """A config given without ``--attn``: one row, its own attention (a variant with the gate
    stays one, not DnA's default put in its place); ``--attn dna:apm+gated``: that attention in the
    config's place, labelled so; a misspelt setting: one line before anything is measured."""
    pytest.importorskip('onnxruntime')
    from dna_mm.benchmarks.deployment import model_variants
    from dna_mm.deployment import load_exportable
    from dna_mm.models.attention import AttentionBase

    monkeypatch.chdir(tmp_path)
    child = tmp_path / 'apm_gated.py'
    child.write_text(
        "_base_ = ['dna_mm::timesformer_dna_demo.py']\n"
        "model = dict(backbone=dict(num_transformer_layers=1, attn_cfg=dict(variant='apm', gated=True)))\n"
    )
    assert model_variants(str(child)) == [('apm_gated', None)]
    attentions = [
        m for m in load_exportable(str(child), None).model.modules() if isinstance(m, AttentionBase)
    ]
    assert attentions and all(m.variant == 'apm' and m.gated for m in attentions)
    tool = load_tool('tools/benchmarks/benchmark_onnx.py')
    fast = ['--batches', '1', '--threads', '1', '--reps', '1']
    table = tool.main(['--models', str(child), *fast])
    rows = [ln.split('|')[1].strip() for ln in table.splitlines() if ln.startswith('| ') and '---' not in ln]
    assert rows[1:] == ['apm_gated'], table
    table = tool.main(['--models', str(child), '--attn', 'dna:apm+gated', 'softmax', *fast])
    rows = [ln.split('|')[1].strip() for ln in table.splitlines() if ln.startswith('| ') and '---' not in ln]
    assert rows[1:] == ['apm_gated (dna:apm+gated)', 'apm_gated (softmax)'], table
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        tool.main(['--models', str(child), '--attn', 'dna+gatd', *fast])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and "unknown setting '+gatd'" in err[0], err


@pytest.mark.parametrize(
    'model, expected',
    [
        ('missing.py', 'config missing.py does not exist'),
        ('timm:dna_vit_tinyy', "did you mean 'dna_vit_tiny_patch16_224'"),
    ],
)
def test_benchmark_onnx_a_model_that_names_none_is_one_line(
    model, expected, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    tool = load_tool('tools/benchmarks/benchmark_onnx.py')
    # the default first: the error comes before anything is measured
    with pytest.raises(SystemExit) as exit_info:
        tool.main(['--models', 'timm:dna_vit_tiny_patch16_224', model, '--reps', '1'])
    out, err = capsys.readouterr()
    err = err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 2, err
    assert err[0].startswith('benchmark_onnx.py: error: ') and expected in err[0], err
    assert out == ''  # no table header, no row


def test_benchmark_train_step_defaults_run_from_any_folder(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    tool = load_tool('tools/benchmarks/benchmark_train_step.py')
    tool.main(
        ['--device', 'cpu', '--reps', '1', '--cfg-options', *(f'{k}={v}' for k, v in TINY_STEP.items())]
    )
    out = capsys.readouterr().out
    rows = [ln.split('|')[1].strip() for ln in out.splitlines() if ln.startswith('| ') and '---' not in ln]
    assert [r.rpartition('::')[2].rpartition('/')[2] for r in rows[1:]] == [
        'timesformer_softmax_k400.py',
        'timesformer_dna_k400.py',
    ], out
