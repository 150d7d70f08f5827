"""The embedded demo end to end (minutes): `make test-slow`, skipped by `make test` / CI."""

from __future__ import annotations

import re

import pytest
from conftest import run_tool


@pytest.mark.slow
@pytest.mark.integration
def test_demo_learns_well_above_chance(tmp_path) -> None:
    out = run_tool(
        [
            'tools/demos/demo.py',
            '--attn',
            'dna',
            '--data-root',
            str(tmp_path / 'demo'),
            '--work-dir',
            str(tmp_path / 'work'),
        ],
        timeout=1800,
    ).stdout
    top1, mca = map(float, re.search(r'dna\s+top-1\s+([\d.]+)%\s+mCA\s+([\d.]+)%', out).groups())
    assert top1 >= 50 and mca >= 50, out[-2000:]  # chance is 25%
