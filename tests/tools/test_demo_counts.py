"""The demos' counts (``demo.py --epochs``, ``demo_det.py --iters``): a value below 1 is one line
naming the flag, exit status 2, before any work (no data generated, no run started), not the
config's whole schedule (0 was taken as "not given") nor a failure in the child run (-1);
:func:`dna_mm.utils.tool_runs.demo_options`, which the demo and the study build their runs'
options with, refuses it too."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_tool

from dna_mm.errors import ConfigError
from dna_mm.utils.tool_runs import at_least, demo_options

#: each demo, its count flag, and the function that would start its work (generate its data)
DEMOS = {
    'tools/demos/demo.py': ('--epochs', 'dna_mm.synthetic.motion_clips.ensure_motion_dataset'),
    'tools/demos/demo_det.py': ('--iters', 'dna_mm.synthetic.coco_shapes.ensure_coco_dataset'),
}


def _no_work(*args: object, **kwargs: object) -> None:
    """Stands in for the demo's first piece of work: reaching it fails the test."""
    pytest.fail(f'the demo started its work ({args}) with a count it should have refused')


@pytest.mark.parametrize('value', ['0', '-1'])
@pytest.mark.parametrize('tool', sorted(DEMOS))
def test_a_count_below_one_is_one_line_before_any_work(
    tool: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    flag, first_work = DEMOS[tool]
    monkeypatch.setattr(first_work, _no_work)
    monkeypatch.setattr('dna_mm.utils.tool_runs.train_then_test', _no_work)
    data, runs = tmp_path / 'data', tmp_path / 'runs'
    argv = ['--attn', 'dna', flag, value, '--data-root', str(data), '--work-dir', str(runs)]
    with pytest.raises(SystemExit) as exit_info:
        load_tool(tool).main(argv)
    out, err = capsys.readouterr()
    prog = Path(tool).name
    assert exit_info.value.code == 2, err
    assert err.splitlines() == [
        f'{prog}: error: {flag} must be at least 1, got {value}',
        f'{prog}: (--debug prints the traceback)',
    ]
    assert out == '' and not data.exists() and not runs.exists()


def test_demo_options_take_the_epochs_given_and_refuse_none_below_one() -> None:
    """``None``: the config's schedule; 1 and up: that many epochs; below 1: refused, not the
    config's schedule."""
    assert not any(o.startswith('train_cfg.max_epochs=') for o in demo_options('dna', 'data/demo'))
    assert 'train_cfg.max_epochs=1' in demo_options('dna', 'data/demo', 1)
    for epochs in (0, -3):
        with pytest.raises(ConfigError, match=rf'^--epochs must be at least 1, got {epochs}$'):
            demo_options('dna', 'data/demo', epochs)


def test_at_least_names_the_first_flag_below_its_least() -> None:
    at_least({'--epochs': None, '--reps': 1, '--shape B N C': (4, 197, 192)})  # None: not given
    with pytest.raises(ConfigError, match=r'^--reps must be at least 1, got 0$'):
        at_least({'--epochs': 2, '--reps': 0, '--clips': 0})
    with pytest.raises(ConfigError, match=r'^--shape B N C must be at least 1 each, got 1 0 192$'):
        at_least({'--shape B N C': [1, 0, 192]})
    with pytest.raises(ConfigError, match=r'^--workers must be at least 0, got -1$'):
        at_least({'--workers': -1}, least=0)
