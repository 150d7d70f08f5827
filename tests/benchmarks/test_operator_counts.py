"""``tools/benchmarks/benchmark_operators.py``'s train step: the tiny TimeSformers' optimizer counted
as a GPU runs it (``foreach``), once stepping by options as ``DnARunner`` builds it and once per
param group as mmengine's runner does; the model's operators are the same in both. Its shipped
configs are found from any folder; the members it counts are self-attentions (a cross form is
refused, not left out)."""

from __future__ import annotations

import pytest
from conftest import load_tool

from dna_mm.benchmarks.operators import TRAIN_CONFIGS, config_source, module_cases, train_step_counts


def total(counts: dict, key: str) -> int:
    return sum(counts[key].values())


def test_the_train_step_counts_the_optimizer_by_options_and_per_group() -> None:
    figures = train_step_counts()
    for config in TRAIN_CONFIGS:
        by_options, per_group = figures[config], figures[f'{config}, a call per param group']
        model = {
            k: total(c, 'operators') - total(c, 'operators optimizer')
            for k, c in (('by', by_options), ('per', per_group))
        }
        assert model['by'] == model['per'] > 0, (config, model)
        # SGD with momentum: a few multi-tensor operators per call; the recipes' groups hold one
        # parameter each (70-100 of them in the tiny models), their sets of options are one or two
        assert 0 < 10 * total(by_options, 'operators optimizer') < total(per_group, 'operators optimizer'), (
            config
        )


def test_the_shipped_configs_are_found_from_another_folder(tmp_path, monkeypatch) -> None:
    """Not only from the checkout's root (``configs/…`` relative to it): the shipped config of
    that name (``dna_mm::``), the label kept; a file the folder has is read as it is."""
    monkeypatch.chdir(tmp_path)
    config = TRAIN_CONFIGS[0]
    assert config_source(config) == 'dna_mm::' + config.removeprefix('configs/')
    figures = train_step_counts(configs=(config,))
    assert sum(figures[config]['operators'].values()) > 0
    (tmp_path / 'mine.py').write_text('')
    assert config_source('mine.py') == 'mine.py'


def test_a_cross_form_is_refused_not_left_out() -> None:
    with pytest.raises(ValueError, match=r'^DnACrossAttention is a cross form \(query and context\)'):
        module_cases(32, 2, ['softmax', 'DnACrossAttention'])


def test_a_member_with_the_gate_is_counted_by_its_name(capsys) -> None:
    """``--attn dna+gated dna:apm+gated``: each a module with the gate (its ``gate`` projection),
    counted in a row of that name beside every DnA variant; a misspelt setting: one line."""
    cases = module_cases(32, 2, ['dna+gated', 'dna:apm+gated'])
    gated, apm_gated = cases['dna+gated'][0], cases['dna:apm+gated'][0]
    assert gated.gated and gated.variant == 'qpm_vpm' and apm_gated.gated and apm_gated.variant == 'apm'
    assert not cases['DnAAttention qpm_vpm'][0].gated
    tool = load_tool('tools/benchmarks/benchmark_operators.py')
    tables = tool.main(['--no-train-step', '--shape', '1', '8', '32', '--heads', '2', '--attn', 'dna+gated'])
    rows = {ln.split('|')[1].strip(): ln for ln in tables[0].splitlines() if ln.startswith('| ')}
    assert 'dna+gated' in rows and 'DnAAttention qpm_vpm' in rows, tables[0]
    operators = lambda label: int(rows[label].split('|')[2])  # noqa: E731
    assert operators('dna+gated') > operators('DnAAttention qpm_vpm')  # the gate's projection and product
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        tool.main(['--no-train-step', '--attn', 'dna+gatd'])
    err = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and "--attn dna+gatd: 'dna+gatd': unknown setting '+gatd'" in err[0], err
