"""ONNX export (dna_mm.deployment, tools/deployment/export_onnx.py) of tiny registry-built
recognizers (every attention of the family, divided and joint space-time) and a tiny timm
dna_vit, checked in onnxruntime against the eager PyTorch model."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import DEMO_CONFIG, REPO, load_tool, run_tool
from tolerance import REORDERED, assert_close_as, tolerance

pytest.importorskip('onnxruntime')
import onnx  # noqa: E402

from dna_mm.deployment import ExportError, export, load_exportable, verify  # noqa: E402
from dna_mm.deployment.onnx import MULTI_LABEL_OUTPUT, example_input  # noqa: E402
from dna_mm.errors import ConfigError  # noqa: E402

TINY = {
    'model.backbone.embed_dims': 32,
    'model.backbone.num_heads': 2,
    'model.backbone.num_transformer_layers': 1,
    'model.backbone.num_frames': 4,
    'model.backbone.img_size': 16,
    'model.cls_head.in_channels': 32,
}
TIMM_TINY = dict(img_size=32, patch_size=8, depth=2, embed_dim=32, num_heads=2, num_classes=3)


def _tiny(attn: str, attention_type: str = 'divided_space_time', **extra) -> dict:
    return dict(
        TINY, **{'model.backbone.attn_cfg': attn, 'model.backbone.attention_type': attention_type}, **extra
    )


def _allowed(ex, batches=(1,)) -> float:
    """The tolerance of :func:`verify`'s ``max |diff|`` (onnxruntime's kernels against PyTorch's:
    REORDERED) on the logits it compares (its seed-1 inputs)."""
    with torch.no_grad():
        scale = max(ex.model(example_input(ex.input_shape, b, 1)).abs().max().item() for b in batches)
    return tolerance(torch.float32, scale, REORDERED)['atol']


def _randomise(model: torch.nn.Module) -> None:
    """Non-zero temporal_fc, α away from its init: every path of the graph counts."""
    for m in model.modules():
        if hasattr(m, 'temporal_fc'):
            torch.nn.init.normal_(m.temporal_fc.weight, std=0.3)
        if getattr(m, 'alpha', None) is not None:
            m.alpha.data.uniform_(-1, 1)


@pytest.mark.parametrize(
    'attn,attention_type',
    [
        ('dna', 'divided_space_time'),
        ('softmax', 'divided_space_time'),
        ('cog', 'divided_space_time'),
        ('dna', 'joint_space_time'),
        ('softmax', 'joint_space_time'),
    ],
)
def test_recognizer_export_matches_pytorch(attn, attention_type, tmp_path) -> None:
    ex = load_exportable(DEMO_CONFIG, None, _tiny(attn, attention_type))
    _randomise(ex.model)
    assert ex.input_shape == (1, 3, 4, 16, 16)
    path = export(ex, str(tmp_path / 'm.onnx'))
    diffs = verify(ex, path)
    assert diffs[1] <= _allowed(ex)
    # the logits really are the class scores: 4 demo classes, and not all equal
    with torch.no_grad():
        out = ex.model(example_input(ex.input_shape, 1, 1))
    assert out.shape == (1, 4) and float(out.std()) > 0


def test_dynamic_batch_and_metadata(tmp_path) -> None:
    ex = load_exportable(DEMO_CONFIG, None, _tiny('dna'))
    _randomise(ex.model)
    path = export(ex, str(tmp_path / 'm.onnx'), dynamic_batch=True)
    diffs = verify(ex, path, (1, 3))
    assert set(diffs) == {1, 3} and max(diffs.values()) <= _allowed(ex, (1, 3))
    proto = onnx.load(path)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == 'batch' and [d.dim_value for d in dims[1:]] == [3, 4, 16, 16]
    meta = {p.key: p.value for p in proto.metadata_props}
    assert (
        json.loads(meta['dna_mm.mean']) == ex.mean
        and len(ex.mean) == 3
        and meta['dna_mm.pixel_range'] == '255'
    )
    assert json.loads(meta['dna_mm.attention']) == ['dna:qpm_vpm']  # the attention the file computes


def test_the_metadata_names_a_variant_and_the_gate(tmp_path) -> None:
    """A model of a DnA variant with the gate says so (a name the tools take), each attention once."""
    options = {**_tiny('dna:apm+gated')}
    path = export(load_exportable(DEMO_CONFIG, None, options), str(tmp_path / 'apm.onnx'))
    meta = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert json.loads(meta['dna_mm.attention']) == ['dna:apm+gated']


def test_fixed_batch_graph_refuses_another_batch(tmp_path) -> None:
    ex = load_exportable(DEMO_CONFIG, None, _tiny('softmax'))
    path = export(ex, str(tmp_path / 'm.onnx'), batch=2)
    assert verify(ex, path, (2,))[2] <= _allowed(ex, (2,))
    with pytest.raises(Exception, match='(?i)dimension|shape'):
        verify(ex, path, (1,))


def test_timm_dna_vit_export(tmp_path) -> None:
    ex = load_exportable('timm:dna_vit_tiny_patch16_224', None, TIMM_TINY)
    _randomise(ex.model)
    assert ex.input_shape == (1, 3, 32, 32)
    path = export(ex, str(tmp_path / 'vit.onnx'), dynamic_batch=True)
    assert max(verify(ex, path, (1, 2)).values()) <= _allowed(ex, (1, 2))


def test_detector_is_refused_by_name() -> None:
    with pytest.raises(ExportError, match='not a recognizer'):
        load_exportable(str(REPO / 'configs' / 'vitdet_dna_demo.py'), None)


@pytest.mark.integration
def test_export_cli_with_a_checkpoint(tmp_path) -> None:
    """The tool as a user runs it: a whole-model checkpoint of the config, dynamic batch, --verify."""
    from dna_mm.config.model import model_from_config

    opts = _tiny('dna')
    _, model = model_from_config(DEMO_CONFIG, opts)
    _randomise(model)
    torch.save({'state_dict': model.state_dict()}, tmp_path / 'tiny.pth')
    cli = [f'{k}={v}' for k, v in opts.items()]
    proc = run_tool(
        [
            'tools/deployment/export_onnx.py',
            DEMO_CONFIG,
            str(tmp_path / 'tiny.pth'),
            '--out',
            str(tmp_path / 'tiny.onnx'),
            '--batch',
            'dynamic',
            '--verify',
            '--cfg-options',
            *cli,
        ]
    )
    assert "inputs ['B', 3, 4, 16, 16] -> logits" in proc.stdout
    diffs = [float(ln.rsplit('= ', 1)[1]) for ln in proc.stdout.splitlines() if 'max |diff|' in ln]
    with torch.no_grad():  # the logits --verify compares: seed-1 inputs of batch 1 and 2
        logits = [
            model(example_input((b, 3, 4, 16, 16), 1)[:, None], mode='tensor', stage='head') for b in (1, 2)
        ]
    scale = max(t.abs().max().item() for t in logits)
    assert len(diffs) == 2 and max(diffs) <= tolerance(torch.float32, scale, REORDERED)['atol']
    # the weights are the checkpoint's: a different model gives different logits
    import onnxruntime as ort

    x = example_input((1, 3, 4, 16, 16), 1)
    (out,) = ort.InferenceSession(str(tmp_path / 'tiny.onnx')).run(['logits'], {'inputs': x.numpy()})
    with torch.no_grad():
        ref = model(x[:, None], mode='tensor', stage='head').numpy()
    assert_close_as(out, ref, ulps=REORDERED)


def test_export_cli_errors_are_one_line(tmp_path, capsys) -> None:
    tool = load_tool('tools/deployment/export_onnx.py')
    cases = [
        ([DEMO_CONFIG, str(tmp_path / 'missing.pth')], 'missing.pth does not exist'),
        (
            [DEMO_CONFIG, str(tmp_path / 'missing.pth'), '--batch', '0'],
            "--batch must be a positive integer or 'dynamic'",
        ),
        ([DEMO_CONFIG, 'x.pth', '--dynamo', '--opset', '17'], '--dynamo exports opset 18 or later'),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            tool.main([*argv, '--out', str(tmp_path / 'x.onnx')])
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(err) == 2, err
        assert err[0].startswith('export_onnx.py: error: ') and message in err[0], err
    with pytest.raises(ConfigError, match='--batch must be'):  # --debug: the exception itself
        tool.main([DEMO_CONFIG, 'x.pth', '--batch', '0', '--out', str(tmp_path / 'x.onnx'), '--debug'])
    assert not (tmp_path / 'x.onnx').exists()


def test_diff_needs_the_dynamo_exporter(tmp_path, capfd) -> None:
    """Diff's RMSNorm (aten::rms_norm) has no TorchScript-exporter symbolic at any opset it
    exports (17-20): a clear error naming the way that works, without the graph the exporter's
    C++ prints on stdout when it stops (hundreds of lines before the one that matters)."""
    ex = load_exportable(DEMO_CONFIG, None, _tiny('diff'))
    capfd.readouterr()
    with pytest.raises(ExportError, match=r"aten::rms_norm.*--dynamo"):
        export(ex, str(tmp_path / 'd.onnx'))
    assert 'graph(' not in capfd.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize('attn', ['diff', 'dna'])
def test_dynamo_exporter_opset_18(attn, tmp_path) -> None:
    ex = load_exportable(DEMO_CONFIG, None, _tiny(attn))
    _randomise(ex.model)
    path = export(ex, str(tmp_path / 'm.onnx'), dynamic_batch=True, opset=18, dynamo=True)
    assert max(verify(ex, path, (1, 3)).values()) <= _allowed(ex, (1, 3))


def test_a_multi_label_models_output_says_a_sigmoid_each(tmp_path) -> None:
    """A multi-label recognizer (``cls_head.multi_class``: a sigmoid a class) says so in the file's
    metadata: its logits are not for a softmax; a single-label one's are."""
    options = {**_tiny('dna'), 'model.cls_head.multi_class': True, 'model.cls_head.average_clips': 'score'}
    path = export(load_exportable(DEMO_CONFIG, None, options), str(tmp_path / 'multi.onnx'))
    meta = {p.key: p.value for p in onnx.load(path).metadata_props}
    assert meta['dna_mm.output'] == MULTI_LABEL_OUTPUT
    single = export(load_exportable(DEMO_CONFIG, None, _tiny('dna')), str(tmp_path / 'single.onnx'))
    assert {p.key: p.value for p in onnx.load(single).metadata_props}['dna_mm.output'] == (
        'logits [B, K] (before softmax)'
    )
