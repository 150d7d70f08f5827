"""``tools/benchmarks/benchmark_operators.py``'s train step: the tiny TimeSformers' optimizer counted
as a GPU runs it (``foreach``), once stepping by options as ``DnARunner`` builds it and once per
param group as mmengine's runner does; the model's operators are the same in both."""

from __future__ import annotations

from dna_mm.benchmarks.operators import TRAIN_CONFIGS, train_step_counts


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
