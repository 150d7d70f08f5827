"""Packaging: `pip install -e .` into an existing environment changes nothing in it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.integration  # pip in a new process


def dry_run(*targets: str, report=None) -> subprocess.CompletedProcess:
    """pip's resolver on ``targets`` against this environment only (no index: anything it would
    have to fetch, an upgrade or a downgrade, is an error)."""
    cmd = [
        sys.executable,
        '-m',
        'pip',
        'install',
        '--dry-run',
        '--no-index',
        '--no-build-isolation',
        '--disable-pip-version-check',
        '--quiet',
        *(['--report', str(report)] if report else []),
        *targets,
    ]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_resolving_dna_mm_against_the_environment_installs_only_dna_mm(tmp_path) -> None:
    report = tmp_path / 'report.json'
    proc = dry_run('-e', str(REPO), report=report)
    assert proc.returncode == 0, proc.stderr
    items = json.loads(report.read_text())['install']
    assert [item['metadata']['name'] for item in items] == ['dna_mm']
    requires = items[0]['metadata']['requires_dist']
    core = [r for r in requires if 'extra ==' not in r]
    assert {r.split('<')[0].split('>')[0].split('=')[0].strip() for r in core} >= {
        'torch',
        'torchvision',
        'mmengine',
        'mmaction2',
        'mmdet',
        'decord',
        'timm',
    }
    assert not [r for r in core if '==' in r], f'exact pins in install_requires: {core}'
    # mmcv or mmcv-lite: a requirement on `mmcv` would make pip compile its ops over an mmcv-lite
    assert not [r for r in core if r.startswith('mmcv')], core


def test_the_check_detects_a_change() -> None:
    """The same resolution fails when a requirement is not met by what is installed."""
    proc = dry_run('torch<2.0')
    assert proc.returncode != 0
    assert 'torch' in proc.stderr
