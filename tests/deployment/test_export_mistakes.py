"""tools/deployment/export_onnx.py with a ``timm:`` model a user got wrong (a misspelt name, a
``create_model`` argument the model does not take): one line with the closest valid name, exit
status 2 (dna_mm.config.timm_models); and the label map in the file's metadata, usable once
the file is moved (an absolute path, the class names themselves)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DEMO_CONFIG, load_tool

pytest.importorskip('onnxruntime')
import onnx  # noqa: E402
from test_onnx import TIMM_TINY  # noqa: E402
from test_onnx import TINY as TINY_DEMO  # noqa: E402  (the demo TimeSformer, one small block)

from dna_mm.deployment import export, load_exportable  # noqa: E402

TIMM_TINY = dict(TIMM_TINY, depth=1)  # one block


def _one_line_error(tool, argv: list[str], capsys) -> str:
    """The tool's error line for ``argv``: exit status 2, that line and the ``--debug`` hint only."""
    with pytest.raises(SystemExit) as exit_info:
        tool.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 2, err
    assert err[0].startswith('export_onnx.py: error: '), err
    return err[0]


@pytest.mark.parametrize(
    'model, options, expected',
    [
        (
            'timm:dna_vit_tinyy',
            TIMM_TINY,
            "timm has no model 'dna_vit_tinyy'; did you mean 'dna_vit_tiny_patch16_224'",
        ),
        (
            'timm:dna_vit_tiny_patch16_224',
            dict(TIMM_TINY, num_clases=3),
            "takes no argument 'num_clases' (--cfg-options); did you mean 'num_classes'",
        ),
    ],
    ids=['misspelt-name', 'misspelt-argument'],
)
def test_a_timm_model_mistake_is_one_line_with_the_closest_name(
    model, options, expected, tmp_path, capsys
) -> None:
    tool = load_tool('tools/deployment/export_onnx.py')
    cli = [f'{k}={v}' for k, v in options.items()]
    line = _one_line_error(
        tool,
        [model, str(tmp_path / 'vit.pth'), '--out', str(tmp_path / 'x.onnx'), '--cfg-options', *cli],
        capsys,
    )
    assert expected in line, line
    assert not (tmp_path / 'x.onnx').exists()


def test_dotted_timm_arguments_nest() -> None:
    """``--cfg-options attn_cfg.variant=qpm_v`` of a timm model: ``attn_cfg=dict(variant='qpm_v')``,
    as tools/analysis/get_flops.py reads them."""
    ex = load_exportable(
        'timm:dna_vit_tiny_patch16_224', None, dict(TIMM_TINY, **{'attn_cfg.variant': 'qpm_v'})
    )
    assert ex.model.dna_variant == 'qpm_v'


def test_the_label_map_is_absolute_and_its_names_are_in_the_file(tmp_path, monkeypatch) -> None:
    """A config's relative ``label_map`` (read from the current folder, as tools/infer.py reads it)
    is written absolute, and its class names as a JSON list: the moved file still says them."""
    names = ['still', 'horizontal', 'vertical', 'diagonal']
    (tmp_path / 'classes.txt').write_text('\n'.join(names) + '\n')
    monkeypatch.chdir(tmp_path)
    ex = load_exportable(DEMO_CONFIG, None, dict(TINY_DEMO, label_map='classes.txt'))
    export(ex, str(tmp_path / 'm.onnx'))
    (tmp_path / 'deployed').mkdir()
    moved = shutil.move(tmp_path / 'm.onnx', tmp_path / 'deployed' / 'm.onnx')
    meta = {p.key: p.value for p in onnx.load(str(moved)).metadata_props}
    assert meta['dna_mm.label_map'] == str(tmp_path / 'classes.txt')
    assert json.loads(meta['dna_mm.classes']) == names


def test_a_label_map_of_another_length_gives_no_names(tmp_path, monkeypatch) -> None:
    """A label map that does not fit the model's classes (tools/infer.py uses none): its path,
    no names."""
    (tmp_path / 'classes.txt').write_text('a\nb\n')
    monkeypatch.chdir(tmp_path)
    ex = load_exportable(DEMO_CONFIG, None, dict(TINY_DEMO, label_map='classes.txt'))
    assert ex.metadata['dna_mm.label_map'] == str(tmp_path / 'classes.txt')
    assert 'dna_mm.classes' not in ex.metadata
