"""Every command-line tool (and the install and device scripts beside them, ``scripts/``) answers
``--help`` at once: it builds its parser with the standard library and imports torch, mmengine
and dna_mm (which imports torch) only after parsing. The
values a parser needs from the package (choices, defaults) are written out in the tool; a test
here keeps each equal to the package's."""

from __future__ import annotations

import subprocess
import sys
import time
from importlib import import_module

import pytest
from conftest import REPO, load_tool

#: what ``--help`` must not import (torch alone takes seconds)
HEAVY = ('torch', 'mmengine', 'dna_mm')
#: a loose bound on the wall time of ``--help`` (under a second on an idle machine)
MAX_SECONDS = 3.0

TOOLS = sorted(
    str(path.relative_to(REPO))
    for folder in ('tools', 'scripts')
    for path in REPO.glob(f'{folder}/**/*.py')
    if "if __name__ == '__main__'" in path.read_text(encoding='utf-8')
)


def imported_modules(importtime: str) -> list[str]:
    """The modules named in ``python -X importtime`` output (its stderr)."""
    return [
        line.rsplit('|', 1)[1].strip()
        for line in importtime.splitlines()
        if line.startswith('import time:') and line.count('|') == 2
    ]


def test_the_tools_are_found() -> None:
    assert 'tools/train.py' in TOOLS and 'scripts/device/gpu_check.py' in TOOLS and len(TOOLS) > 20


@pytest.mark.parametrize('tool', TOOLS)
def test_help_answers_without_the_heavy_imports(tool: str) -> None:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, '-X', 'importtime', tool, '--help'],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith('usage:'), proc.stdout[:500]
    modules = imported_modules(proc.stderr)
    assert 'argparse' in modules, proc.stderr[-3000:]  # the importtime report was read
    heavy = sorted({m for m in modules if m.split('.')[0] in HEAVY})
    assert not heavy, f'{tool} --help imports {", ".join(heavy)}'
    assert seconds < MAX_SECONDS, f'{tool} --help took {seconds:.1f} s'


def _family():
    return import_module('dna_mm.family')


#: (tool, its constant, the package's value): the tool's copy of what its parser needs
CONVERT = 'tools/model_converters/convert_checkpoint.py'
MIRRORED = [
    (
        'tools/analysis/analyze_attention.py',
        'ANALYSES',
        lambda: import_module('dna_mm.analysis.report').ANALYSES,
    ),
    (
        'tools/data/check_decoding.py',
        'READERS',
        lambda: tuple(sorted(import_module('dna_mm.preparation.decoding_check').READERS)),
    ),
    *[
        (tool, 'DEFAULT_KEYINT', lambda: import_module('dna_mm.preparation.encoding').DEFAULT_KEYINT)
        for tool in ('tools/data/resize_videos.py', 'tools/data/ntu60/person_crops.py')
    ],
    (
        'tools/deployment/export_onnx.py',
        'DEFAULT_OPSET',
        lambda: import_module('dna_mm.deployment').DEFAULT_OPSET,
    ),
    ('tools/extract_features.py', 'LEVELS', lambda: import_module('dna_mm.apis.features').LEVELS),
    ('tools/extract_features.py', 'PER', lambda: import_module('dna_mm.apis.features').PER),
    (
        'tools/model_converters/convert_checkpoint.py',
        'WRAPPER_KEYS',
        lambda: (*import_module('dna_mm.converters.timesformer').WRAPPER_KEYS, 'model_ema', 'state_dict_ema'),
    ),
    (
        'tools/model_converters/convert_checkpoint.py',
        'Q_NEG_SCALE',
        lambda: _family().NEGATIVE_INIT.q_neg_scale,
    ),
    (
        'tools/model_converters/convert_checkpoint.py',
        'V_NEG_SCALE',
        lambda: _family().NEGATIVE_INIT.v_neg_scale,
    ),
    ('tools/model_converters/convert_checkpoint.py', 'COMBINES', lambda: tuple(_family().COMBINE_SIGNS)),
    *[
        (tool, 'IMPORT_HELP', lambda: import_module('dna_mm.tools.cli').IMPORT_HELP)
        for tool in (
            'tools/analysis/study.py',
            'tools/demos/demo.py',
            'tools/demos/demo_det.py',
            'tools/benchmarks/benchmark_attention.py',
            'tools/benchmarks/benchmark_operators.py',
            'tools/benchmarks/benchmark_onnx.py',
        )
    ],
]


@pytest.mark.parametrize(
    'tool, name, package', MIRRORED, ids=[f'{tool}:{name}' for tool, name, _ in MIRRORED]
)
def test_a_tools_copy_of_a_package_value_is_equal_to_it(tool, name, package) -> None:
    assert getattr(load_tool(tool), name) == package()
