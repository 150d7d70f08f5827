"""SLURM: the host list, SLURM's variables turned into torch's, a one-process ``--launcher slurm``
run (no SLURM here: its variables are set), and the srun line of tools/slurm_*.sh."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import DEMO_CONFIG, REPO, free_port, run_main, tiny_run_options

from dna_mm.engine.distributed import first_host, slurm_environment
from dna_mm.errors import ConfigError

TORCH_VARS = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')


@pytest.mark.parametrize(
    'nodelist, host',
    [('node07', 'node07'), ('gpu[07-08,11],cpu01', 'gpu07'), ('a-1,a-2', 'a-1'), ('dgx[003,009]', 'dgx003')],
)
def test_first_host_of_a_slurm_host_list(nodelist, host) -> None:
    assert first_host(nodelist) == host


def test_slurm_variables_become_torchs() -> None:
    env = dict(SLURM_PROCID='5', SLURM_NTASKS='16', SLURM_LOCALID='1', SLURM_NODELIST='gpu[02-03]')
    assert slurm_environment(env) == dict(
        RANK='5', WORLD_SIZE='16', LOCAL_RANK='1', MASTER_ADDR='gpu02', MASTER_PORT='29500'
    )
    assert env['RANK'] == '5'
    with pytest.raises(ConfigError, match='SLURM_NTASKS, SLURM_NODELIST not set; start the tool with srun'):
        slurm_environment(dict(SLURM_PROCID='0'))
    # the script of the tool that runs: test.py is started by slurm_test.sh
    for tool, script in (('test.py', 'tools/slurm_test.sh'), ('train.py', 'tools/slurm_train.sh')):
        with pytest.raises(ConfigError, match=f'not set; start {tool} with srun \\({script} ') as err:
            slurm_environment(dict(SLURM_PROCID='0'), tool=tool)
        other = 'slurm_test' if tool == 'train.py' else 'slurm_train'
        assert other not in str(err.value)


def test_train_with_launcher_slurm_in_one_process(tiny_video_set, tmp_path, monkeypatch) -> None:
    for name in TORCH_VARS:  # set by the run: restored afterwards
        monkeypatch.setenv(name, '')
        monkeypatch.delenv(name)
    slurm = dict(SLURM_PROCID='0', SLURM_NTASKS='1', SLURM_LOCALID='0', SLURM_NODELIST='localhost')
    for name, value in {**slurm, 'MASTER_PORT': str(free_port())}.items():
        monkeypatch.setenv(name, value)
    opts = tiny_run_options(tiny_video_set)  # batch 2: 2 accumulation steps reach 4
    train = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path), '--launcher', 'slurm']
    proc = run_main([*train, '--global-batch', '4', '--cfg-options', *opts])
    assert 'gloo process group, rank 0 of 1' in proc.stdout + proc.stderr
    assert (tmp_path / 'epoch_1.pth').exists()
    log = next(tmp_path.glob('*/*.log')).read_text()
    assert 'Distributed launcher: slurm' in log and 'Distributed training: True' in log
    assert 'global batch 4 = 1 process x 2 clips x 2 gradient accumulation steps' in log
    assert os.environ['RANK'] == '0' and os.environ['MASTER_ADDR'] == 'localhost'


@pytest.mark.parametrize('script', ['slurm_train.sh', 'slurm_test.sh'])
def test_slurm_scripts_call_srun_with_the_tool(script, tmp_path) -> None:
    """A stand-in ``srun`` on PATH records its arguments (one per line)."""
    (fake := tmp_path / 'srun').write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$SRUN_LOG"\n')
    fake.chmod(0o755)
    env = {
        **os.environ,
        'PATH': f'{tmp_path}:{os.environ["PATH"]}',
        'SRUN_LOG': str(tmp_path / 'args'),
        'GPUS': '16',
        'SRUN_ARGS': '--time=1:00:00 --qos=high',
    }
    fourth = 'work_dirs/x' if script == 'slurm_train.sh' else 'ckpt.pth'
    cmd = [
        'bash',
        f'tools/{script}',
        'gpu',
        'dna job',
        'configs/timesformer_dna_ntu60.py',
        fourth,
        '--seed',
        '1',
    ]
    subprocess.run(cmd, cwd=REPO, env=env, check=True)
    args = (tmp_path / 'args').read_text().splitlines()
    tool = 'train.py' if script == 'slurm_train.sh' else 'test.py'
    assert args[:6] == [
        '-p',
        'gpu',
        '--job-name=dna job',
        '--gres=gpu:8',
        '--ntasks=16',
        '--ntasks-per-node=8',
    ]
    assert '--time=1:00:00' in args and '--qos=high' in args and '--kill-on-bad-exit=1' in args
    at = next(i for i, a in enumerate(args) if a.endswith(f'tools/{tool}'))
    second = '--work-dir=work_dirs/x' if script == 'slurm_train.sh' else 'ckpt.pth'
    assert args[at + 1 :] == [
        'configs/timesformer_dna_ntu60.py',
        second,
        '--launcher',
        'slurm',
        '--seed',
        '1',
    ]
