"""A ``--cfg-options`` key below a key that holds an attention's name: the demos and the study give
their member as a short name (``model.backbone.attn_cfg=dna``), a config may hold one
(``attn_cfg='dna'``, per step ``attn_cfg=dict(temporal='dna', ...)``), and a user's
``attn_cfg.variant=apm`` then sets the variant of the dict the name stands for
(``dict(type='DnAAttention', variant='apm')``) through the merge every tool takes
(:func:`dna_mm.config.build.merge_options`), not mmengine's ``TypeError`` (``'str' object does not
support item assignment``). A string that names no attention is one line naming the key. The
demo takes ``NAME+gated`` as the study does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO, load_tool, run_main, tiny_run_options

from dna_mm.config.build import build_part, read_config
from dna_mm.config.check import config_problems as check_problems
from dna_mm.errors import ConfigError
from dna_mm.models.attention import AttentionBase
from dna_mm.tools.cli import cfg_options
from dna_mm.utils.tool_runs import demo_options

CONFIG = 'configs/timesformer_dna_demo.py'
#: the demo's model made tiny (one block, 32 wide)
TINY = [
    'model.backbone.embed_dims=32',
    'model.backbone.num_heads=2',
    'model.backbone.num_transformer_layers=1',
    'model.cls_head.in_channels=32',
]


def _model(config: str, *options: str):
    """``(cfg, model)`` of ``config`` with ``options`` as a tool reads them (``--cfg-options``)."""
    cfg = read_config(
        str(REPO / config) if not Path(config).is_absolute() else config, cfg_options(list(options))
    )
    return cfg, build_part(cfg)


def _attentions(model) -> list:
    return [m for m in model.modules() if isinstance(m, AttentionBase)]


def test_a_variant_below_the_demos_short_name_builds_dna_of_that_variant() -> None:
    """The demo's (and the study's) options, then the user's: ``attn_cfg=dna``, ``.variant=apm``."""
    opts = [*demo_options('dna', 'data/demo', 1), *TINY, 'model.backbone.attn_cfg.variant=apm']
    cfg, model = _model(CONFIG, *opts)
    assert cfg.model.backbone.attn_cfg == {'type': 'DnAAttention', 'variant': 'apm'}
    found = _attentions(model)
    assert len(found) == 2  # temporal and spatial of the one block
    assert {type(m).__name__ for m in found} == {'DnAAttention'}
    assert {m.variant for m in found} == {'apm'}


def test_a_type_then_a_variant_below_another_members_name_replace_it() -> None:
    """docs/troubleshooting.md's pair (``attn_cfg.type=DnAAttention attn_cfg.variant=apm``) on the
    study's softmax run: the name's dict is replaced, nothing of the config's DnA dict stays."""
    opts = [*demo_options('softmax', 'data/demo'), *TINY]
    cfg, model = _model(
        CONFIG, *opts, 'model.backbone.attn_cfg.type=DnAAttention', 'model.backbone.attn_cfg.variant=apm'
    )
    assert cfg.model.backbone.attn_cfg == {'type': 'DnAAttention', 'variant': 'apm'}
    assert {(type(m).__name__, m.variant) for m in _attentions(model)} == {('DnAAttention', 'apm')}
    cfg, model = _model(CONFIG, *opts, 'model.backbone.attn_cfg.gated=True')
    assert cfg.model.backbone.attn_cfg == {'type': 'SoftmaxAttention', 'gated': True}  # no DnA variant


def test_gated_below_a_short_name_and_the_demo_takes_name_plus_gated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``demo.py --attn dna+gated`` (as the study's ``--methods``): DnA with the gate, its runs'
    options merged into a model whose attentions are gated DnA."""
    runs = []
    monkeypatch.setattr('dna_mm.synthetic.motion_clips.ensure_motion_dataset', lambda root: Path(root))
    monkeypatch.setattr(
        'dna_mm.utils.tool_runs.train_then_test',
        lambda config, work_dir, opts, *a, **k: runs.append(opts) or ({}, 0.0),
    )
    argv = ['--attn', 'dna+gated', '--epochs', '1', '--data-root', str(tmp_path), '--work-dir', str(tmp_path)]
    load_tool('tools/demos/demo.py').main([*argv, '--cfg-options', *TINY])
    (opts,) = runs
    cfg, model = _model(CONFIG, *opts)
    assert cfg.model.backbone.attn_cfg == {'type': 'DnAAttention', 'gated': True}
    found = _attentions(model)
    assert found and all(type(m).__name__ == 'DnAAttention' and m.gated for m in found)


def test_the_demo_trains_a_model_named_twice_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``demo.py --attn dna dna:Q±V± A± dna:apm``: DnA's default variant and A± each trained once,
    in the folder of its canonical name, under the name given first; one note per repeat."""
    runs = []
    monkeypatch.setattr('dna_mm.synthetic.motion_clips.ensure_motion_dataset', lambda root: Path(root))
    monkeypatch.setattr(
        'dna_mm.utils.tool_runs.train_then_test',
        lambda config, work_dir, opts, *a, **k: runs.append(work_dir) or ({}, 0.0),
    )
    argv = ['--attn', 'dna', 'dna:Q±V±', 'A±', 'dna:apm', '--data-root', str(tmp_path), '--work-dir', 'w']
    results = load_tool('tools/demos/demo.py').main(argv)
    assert runs == ['w/dna', 'w/dna:apm'] and list(results) == ['dna', 'A±']
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith('note: ')]
    assert notes == [
        'note: --attn dna:Q±V± is dna (the same model): run once',
        'note: --attn dna:apm is A± (the same model): run once',
    ]


def test_a_variant_below_a_step_that_a_config_names_by_its_short_name(tmp_path: Path) -> None:
    """``attn_cfg=dict(temporal='dna', spatial='softmax')`` in a config, and
    ``attn_cfg.temporal.variant=apm``: the temporal step is DnA A±, the spatial one stays softmax."""
    child = tmp_path / 'per_step.py'
    child.write_text(
        f'_base_ = [{DEMO_CONFIG!r}]\n'
        "model = dict(backbone=dict(attn_cfg=dict(_delete_=True, temporal='dna', spatial='softmax')))\n"
    )
    cfg, model = _model(str(child), *TINY, 'model.backbone.attn_cfg.temporal.variant=apm')
    assert cfg.model.backbone.attn_cfg == {
        'temporal': {'type': 'DnAAttention', 'variant': 'apm'},
        'spatial': 'softmax',
    }
    kinds = sorted((type(m).__name__, getattr(m, 'variant', None)) for m in _attentions(model))
    assert kinds == [('DnAAttention', 'apm'), ('SoftmaxAttention', None)]


def test_a_variant_below_the_name_a_config_holds() -> None:
    """ViTDet's demo config holds ``attn_cfg='dna'``: ``attn_cfg.variant=apm`` sets DnA's variant."""
    cfg = read_config(str(REPO / 'configs/vitdet_dna_demo.py'), {'model.backbone.attn_cfg.variant': 'apm'})
    assert cfg.model.backbone.attn_cfg == {'type': 'DnAAttention', 'variant': 'apm'}


@pytest.mark.parametrize(
    'options, line',
    [
        (
            ['model.backbone.attn_cfg=dnaa', 'model.backbone.attn_cfg.variant=apm'],
            "--cfg-options model.backbone.attn_cfg.variant: model.backbone.attn_cfg is 'dnaa', whose keys "
            "cannot be set; expected a dict, or an attention member's name (did you mean DnAAttention / "
            'dna?)',
        ),
        (
            ['load_from=x.pth', 'load_from.variant=apm'],
            "--cfg-options load_from.variant: load_from is 'x.pth', whose keys cannot be set; expected a "
            "dict, or an attention member's name (",
        ),
        (
            ['train_cfg.max_epochs.x=1'],
            '--cfg-options train_cfg.max_epochs.x: train_cfg.max_epochs is 20, whose keys cannot be set; '
            'expected a dict',
        ),
    ],
)
def test_a_key_below_a_string_that_names_no_attention_is_one_line(options: list[str], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        read_config(str(REPO / CONFIG), cfg_options(options))
    message = str(info.value)
    assert message.startswith(line) and '\n' not in message, message


def test_train_names_the_key_in_one_line_and_exits_2(tmp_path: Path) -> None:
    opts = ['model.backbone.attn_cfg=dnaa', 'model.backbone.attn_cfg.variant=apm']
    proc = run_main(
        ['tools/train.py', CONFIG, '--work-dir', str(tmp_path), '--cfg-options', *opts], check=False
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')] == [
        "train.py: error: --cfg-options model.backbone.attn_cfg.variant: model.backbone.attn_cfg is 'dnaa', "
        "whose keys cannot be set; expected a dict, or an attention member's name (did you mean "
        'DnAAttention / dna?)',
        'train.py: (--debug prints the traceback)',
    ]


@pytest.mark.integration
def test_the_demo_trains_and_tests_the_variant_its_cfg_options_set(
    tiny_video_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``demo.py --attn dna --cfg-options model.backbone.attn_cfg.variant=apm``: its
    ``tools/train.py`` and ``tools/test.py`` runs (new processes) train and test DnA A± (the
    audit's command, on the tiny clips: the demo's own set is not generated)."""
    monkeypatch.setattr('dna_mm.synthetic.motion_clips.ensure_motion_dataset', lambda root: tiny_video_set)
    tiny = [o for o in tiny_run_options(tiny_video_set) if not o.startswith('model.backbone.attn_cfg=')]
    tiny += ['train_cfg.val_interval=2']  # no validation: the test run tests
    work = tmp_path / 'work'
    argv = [
        '--attn',
        'dna',
        '--epochs',
        '1',
        '--data-root',
        str(tmp_path / 'unused'),
        '--work-dir',
        str(work),
    ]
    results = load_tool('tools/demos/demo.py').main(
        [*argv, '--cfg-options', *tiny, 'model.backbone.attn_cfg.variant=apm']
    )
    out = capsys.readouterr().out
    assert set(results) == {'dna'} and 'acc/top1' in results['dna'][0], out[-3000:]
    saved = (work / 'dna' / Path(CONFIG).name).read_text()  # the config the runs used (mmengine's dump)
    assert re.search(r"attn_cfg=dict\(\s*type='DnAAttention',\s*variant='apm'\)", saved), saved


@pytest.mark.parametrize(
    'name, expected',
    [
        ('dna:apm+gated', {'type': 'DnAAttention', 'variant': 'apm', 'gated': True}),
        ('A±', {'type': 'DnAAttention', 'variant': 'apm'}),
        ('A+-', {'type': 'DnAAttention', 'variant': 'apm'}),  # ± as a keyboard without it writes it
        ('dna:Q+-V+gated', {'type': 'DnAAttention', 'variant': 'qpm_v', 'gated': True}),
        ('softmax+gated', {'type': 'SoftmaxAttention', 'gated': True}),
    ],
)
def test_a_config_names_its_attention_as_the_tools_methods_do(name: str, expected: dict, tmp_path) -> None:
    """``attn_cfg='dna:apm+gated'`` (a config, or ``--cfg-options``) is the attention the tools'
    ``--attn`` / ``--methods`` take by that name; its keys can be set below it, and the built
    attentions are that member, variant and gate."""
    cfg, model = _model(CONFIG, *TINY, f'model.backbone.attn_cfg={name}')
    assert not check_problems(cfg), check_problems(cfg)
    found = _attentions(model)
    assert len(found) == 2 and {type(m).__name__ for m in found} == {expected['type']}
    assert all(getattr(m, 'variant', None) == expected.get('variant') for m in found)
    assert all(m.gated == expected.get('gated', False) for m in found)
    child = tmp_path / 'child.py'
    child.write_text(f"_base_ = [{DEMO_CONFIG!r}]\nmodel = dict(backbone=dict(attn_cfg={name!r}))\n")
    cfg = read_config(str(child), cfg_options(['model.backbone.attn_cfg.proj_drop=0.1']))
    assert cfg.model.backbone.attn_cfg == {**expected, 'proj_drop': 0.1}


@pytest.mark.parametrize(
    'name, line',
    [
        ('dna:apn', "model.backbone.attn_cfg: unknown DnA variant 'apn'; did you mean 'apm'?"),
        ('dna+gatd', "model.backbone.attn_cfg: 'dna+gatd': unknown setting '+gatd' (NAME+gated: "),
        ('softmax:apm', "model.backbone.attn_cfg.variant: SoftmaxAttention takes no argument 'variant'"),
    ],
)
def test_a_wrong_setting_in_a_configs_attention_name_is_one_line_naming_the_key(name: str, line: str) -> None:
    cfg = read_config(str(REPO / CONFIG), cfg_options([f'model.backbone.attn_cfg={name}']))
    problems = check_problems(cfg)
    assert len(problems) == 1 and problems[0].startswith(line), problems
