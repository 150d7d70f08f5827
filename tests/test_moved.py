"""The paths of 0.1.0 that moved with the house by job (``dna_mm/_moved.py``): each old module
name is the new module itself, with one ``FutureWarning`` naming the new path; the names
``dna_mm.apis`` exported and the tools' old paths still answer."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest
from conftest import REPO

from dna_mm._moved import MOVED, new_name

#: one module under every moved name (a package's submodule for the packages)
OLD_MODULES = sorted({*MOVED, 'dna_mm.datasets.custom.recipe', 'dna_mm.datasets.preparation.resize'})


def _fresh_import(old: str) -> subprocess.CompletedProcess:
    """``import old`` in a new interpreter with FutureWarning an error: the warning's text."""
    code = f'import warnings, dna_mm; warnings.simplefilter("error", FutureWarning); import {old}'
    return subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize('old', OLD_MODULES)
def test_an_old_module_name_is_the_new_module(old: str) -> None:
    new = new_name(old)
    with pytest.warns(FutureWarning, match=f'{old} moved to {new}'):
        sys.modules.pop(old, None)
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # the new module keeps its own name and spec


def test_the_old_name_warns_where_it_is_imported() -> None:
    res = _fresh_import('dna_mm.apis.runner')
    assert res.returncode == 1
    assert 'FutureWarning: dna_mm.apis.runner moved to dna_mm.engine.runner' in res.stderr


def test_a_class_under_its_old_path_pickles_as_the_new_one() -> None:
    from dna_mm.over_time.segments import Segment

    with pytest.warns(FutureWarning):
        sys.modules.pop('dna_mm.apis.segments', None)
        old = importlib.import_module('dna_mm.apis.segments')
    assert old.Segment is Segment
    fields = dict(label=1, start=0.0, end=2.0, score=0.5, first=0, last=3)
    data = pickle.dumps(old.Segment(**fields))
    assert b'dna_mm.over_time.segments' in data and b'dna_mm.apis' not in data
    assert pickle.loads(data) == Segment(**fields)


@pytest.mark.parametrize(
    ('name', 'home'),
    [('DnARunner', 'dna_mm.engine'), ('build_runner', 'dna_mm.engine'), ('prepare_cfg', 'dna_mm.config')],
)
def test_a_name_apis_exported_still_answers(name: str, home: str) -> None:
    import dna_mm.apis

    with pytest.warns(FutureWarning, match=f'dna_mm.apis.{name} moved to {home}.{name}'):
        found = getattr(dna_mm.apis, name)
    assert found is getattr(importlib.import_module(home), name)
    with pytest.raises(AttributeError):
        dna_mm.apis.no_such_name  # noqa: B018


def test_an_unmoved_name_is_not_caught() -> None:
    assert new_name('dna_mm.datasets.video_reader') is None
    assert new_name('dna_mm.builder') is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module('dna_mm.apis.no_such_module')


def test_a_tool_by_its_old_path() -> None:
    from dna_mm.tools import find

    with pytest.warns(FutureWarning, match='tools/analysis/benchmark_attention.py moved'):
        assert (
            find('analysis/benchmark_attention')
            .as_posix()
            .endswith('tools/benchmarks/benchmark_attention.py')
        )
    assert find('demo').as_posix().endswith('tools/demos/demo.py')  # a basename finds it as before
