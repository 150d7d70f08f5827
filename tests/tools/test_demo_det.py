"""`make demo-det` end to end (minutes: run by `make test-slow`, skipped by `make test` / CI), and
one run of a variant with the gate (one iteration)."""

from __future__ import annotations

import re

import pytest
from conftest import run_tool
from mmengine.config import Config

from dna_mm.checkpoint.sources import read_checkpoint


@pytest.mark.slow
@pytest.mark.integration
def test_demo_det_learns(tmp_path) -> None:
    """`make demo-det` end to end: the trained model's AP is far above an untrained one's."""
    out = run_tool(
        [
            'tools/demos/demo_det.py',
            '--data-root',
            str(tmp_path / 'data'),
            '--work-dir',
            str(tmp_path / 'work'),
            '--baseline',
        ],
        timeout=3600,
    ).stdout

    def row(name: str) -> dict[str, float]:
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(name))
        return {k: float(v) for k, v in re.findall(r'((?:bbox|segm) AP(?:50)?)\s+([\d.]+)', line)}

    trained, untrained = row('dna trained'), row('dna untrained')
    # measured (make demo-det, 500 iterations): untrained 0.0 / 0.0, trained 73.5 / 70.5
    assert trained['bbox AP'] >= 40.0 and trained['segm AP'] >= 35.0, out[-3000:]
    assert trained['bbox AP'] >= untrained['bbox AP'] + 35.0, out[-3000:]


def test_demo_det_takes_a_variant_and_the_gate_as_the_video_demo_does(tmp_path) -> None:
    """``--attn dna:A±+gated``: one run of DnA's A± variant with the gate (its work dir by the
    canonical name), as ``tools/demos/demo.py`` and the study take it; the run's saved config and
    checkpoint hold both, and the summary names the run as given."""
    work = tmp_path / 'work'
    out = run_tool(
        [
            'tools/demos/demo_det.py',
            '--attn',
            'dna:A±+gated',
            '--iters',
            '1',
            '--data-root',
            str(tmp_path / 'data'),
            '--work-dir',
            str(work),
        ],
        timeout=900,
    ).stdout
    assert re.search(r'^\s+dna:A±\+gated trained\s+bbox AP', out, re.M), out[-3000:]
    run = work / 'dna:apm+gated'
    (saved,) = run.glob('vitdet_dna_demo.py')
    assert Config.fromfile(str(saved)).model.backbone.attn_cfg == dict(
        type='DnAAttention', variant='apm', gated=True
    )
    state = read_checkpoint(str(run / 'iter_1.pth'))['state_dict']
    assert any(k.endswith('attn.gate.weight') for k in state), sorted(state)[:20]
    assert not any(k.endswith('attn.q_neg.weight') for k in state)  # A±: no negative projections
