"""AlphaLoggerHook in a config: the documented lines (docs/training.md, the hook's docstring) keep
the runtime's hooks; a list that drops them gets a resume line naming the hooks missing (not the
loop, which is right); an interval below 1 is one line from tools/train.py."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from conftest import DEMO_CONFIG, REPO, run_main, tiny_run_options
from mmengine.config import Config, DictAction

import dna_mm.engine.hooks

RUNTIME_HOOKS = [
    h['type'] for h in Config.fromfile(str(REPO / 'configs/_base_/default_runtime.py')).custom_hooks
]


def documented_lines() -> dict[str, str]:
    """The config lines that turn the hook on: docs/training.md's python blocks and the hook's
    docstring example, by where they are."""
    found = {}
    text = (REPO / 'docs' / 'training.md').read_text(encoding='utf-8')
    for i, block in enumerate(re.findall(r'^```python\n(.*?)^```', text, re.M | re.S)):
        if 'AlphaLoggerHook' in block:
            found[f'docs/training.md block {i}'] = block
    (example,) = re.findall(r'^    (custom_hooks = .*AlphaLoggerHook.*)$', dna_mm.engine.hooks.__doc__, re.M)
    found['dna_mm/engine/hooks.py docstring'] = example
    return found


def test_the_documented_lines_keep_the_runtimes_hooks(tmp_path) -> None:
    lines = documented_lines()
    assert len(lines) == 2, lines
    for where, code in lines.items():
        code = re.sub(r"^_base_ = \[.*\]", '', code, flags=re.M)  # a leaf of the demo config here
        config = tmp_path / 'alpha.py'
        config.write_text(f'_base_ = [{DEMO_CONFIG!r}]\n{code}\n')
        hooks = [h['type'] for h in Config.fromfile(str(config)).custom_hooks]
        assert RUNTIME_HOOKS == ['SkippedSamplesHook', 'RNGStateHook', 'PendingGradsHook']
        assert hooks == [*RUNTIME_HOOKS, 'AlphaLoggerHook'], where


def test_the_resume_line_names_the_missing_hooks(tiny_video_set, tmp_path, capsys) -> None:
    from dna_mm.config import prepare_cfg
    from dna_mm.engine import build_runner

    parser = argparse.ArgumentParser()
    parser.add_argument('--o', nargs='+', action=DictAction)
    options = parser.parse_args(['--o', *tiny_run_options(tiny_video_set)]).o
    alpha = dict(type='AlphaLoggerHook', interval=50)
    kept = [*(dict(type=t) for t in RUNTIME_HOOKS), alpha]
    for name, hooks in (('kept', kept), ('own', [dict(type='SkippedSamplesHook'), alpha])):
        cfg = prepare_cfg(
            Config.fromfile(DEMO_CONFIG),
            DEMO_CONFIG,
            work_dir=str(tmp_path / name),
            cfg_options={**options, 'custom_hooks': hooks},
        )
        cfg.experiment_name = f'alpha_resume_{name}'
        build_runner(cfg).train_loop  # noqa: B018  (built when first asked for)
        shown = [ln for ln in capsys.readouterr().out.splitlines() if 'exact resume not guaranteed' in ln]
        if name == 'kept':
            assert not shown
        else:
            (line,) = shown
            assert 'custom_hooks has no RNGStateHook and no PendingGradsHook' in line, line
            assert 'train_cfg.type' not in line, line  # ResumableEpochBasedTrainLoop: nothing wrong there


def test_an_interval_below_one_is_one_line(tiny_video_set, tmp_path) -> None:
    config = tmp_path / 'alpha0.py'
    config.write_text(
        f'_base_ = [{DEMO_CONFIG!r}]\n'
        "custom_hooks = [*_base_.custom_hooks, dict(type='AlphaLoggerHook', interval=0)]\n"
    )
    done = run_main(
        [
            'tools/train.py',
            str(config),
            '--work-dir',
            str(tmp_path / 'work'),
            '--cfg-options',
            *tiny_run_options(tiny_video_set),
        ],
        check=False,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert 'Traceback' not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if 'error:' in ln]
    assert 'custom_hooks: AlphaLoggerHook interval must be an integer >= 1' in line and 'got 0' in line
    assert not list(Path(tmp_path / 'work').glob('*.pth'))
