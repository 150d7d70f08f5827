"""scripts/install/cuda_toolkit.py: which architectures mmcv's ops are compiled for and by which nvcc
(the system's when its release is torch's CUDA, else the index's wheels), the cached wheel's key,
and the one-line mistakes. Fake nvcc scripts stand for the system's toolkits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, load_tool

tk = load_tool('scripts/install/cuda_toolkit.py')


def _nvcc(folder: Path, release: str) -> Path:
    """A fake ``nvcc`` answering ``--version`` as CUDA ``release``'s does."""
    nvcc = folder / 'bin' / 'nvcc'
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(
        '#!/bin/sh\necho "nvcc: NVIDIA (R) Cuda compiler driver"\n'
        f'echo "Cuda compilation tools, release {release}, V{release}.88"\n'
    )
    nvcc.chmod(0o755)
    return nvcc


@pytest.mark.parametrize(
    'text, archs',
    [
        ('8.0 9.0', ['8.0', '9.0']),
        ('9.0;8.0', ['8.0', '9.0']),
        ('sm_90,sm_86', ['8.6', '9.0']),
        ('90 90', ['9.0']),
    ],
)
def test_architectures_are_read_as_users_write_them(text: str, archs: list[str]) -> None:
    assert tk.parse_archs(text) == archs


def test_a_word_that_is_no_architecture_is_one_line() -> None:
    with pytest.raises(tk.PlanError, match=r"'ampere' is not an architecture; expected .*\"8.0 9.0\""):
        tk.parse_archs('8.0 ampere')


def test_the_visible_gpus_are_built_for_and_named_archs_win() -> None:
    assert tk.plan('13.0', ['9.0', '9.0'], '', []) == dict(
        MMCV_CUDA='13.0', MMCV_ARCHS='9.0', MMCV_NVCC='index', MMCV_KEY='cu130-sm90'
    )
    login_node = tk.plan('12.8', [], '8.0 9.0', [])
    assert login_node['MMCV_ARCHS'] == '8.0;9.0' and login_node['MMCV_KEY'] == 'cu128-sm80_sm90'


def test_no_gpu_and_none_named_builds_cpu_ops_under_the_old_key() -> None:
    assert tk.plan('13.0', [], '', [])['MMCV_KEY'] == 'cpu'
    assert tk.plan(None, [], '', [])['MMCV_ARCHS'] == ''


def test_archs_named_for_a_cpu_only_torch_are_refused() -> None:
    with pytest.raises(tk.PlanError, match="CPU-only build: install torch's CUDA build"):
        tk.plan(None, [], '9.0', [])


def test_the_system_nvcc_is_taken_only_when_its_release_is_torchs(tmp_path) -> None:
    old = _nvcc(tmp_path / 'cuda-12.4', '12.4')
    new = _nvcc(tmp_path / 'cuda-13.0', '13.0')
    assert tk.choose_nvcc('13.0', [str(old), str(new)]) == str(new)
    assert tk.choose_nvcc('13.0.2', [str(new)]) == str(new)  # major.minor is what must match
    assert tk.choose_nvcc('12.8', [str(old), str(new)]) == 'index'
    assert tk.choose_nvcc('13.0', [str(tmp_path / 'missing' / 'nvcc')]) == 'index'


def test_nvcc_is_looked_for_in_cuda_home_then_path_then_usr_local(tmp_path) -> None:
    on_path = _nvcc(tmp_path / 'p', '13.0')
    found = tk.nvcc_candidates({'CUDA_HOME': '/opt/cuda', 'PATH': str(on_path.parent)})
    assert found == ['/opt/cuda/bin/nvcc', str(on_path), '/usr/local/cuda/bin/nvcc']


@pytest.mark.parametrize(
    'cap, archs, ok', [('8.6', ['8.0'], True), ('9.0', ['8.0'], False), ('8.0', ['8.6'], False)]
)
def test_a_binary_runs_on_later_minors_of_its_major(cap: str, archs: list[str], ok: bool) -> None:
    assert tk.runs_on(cap, archs) is ok


def test_index_wheels_follow_cudas_naming() -> None:
    assert tk.index_packages('13.0') == [
        'nvidia-cuda-nvcc==13.0.*',
        'nvidia-cuda-cccl==13.0.*',
        'nvidia-cuda-crt==13.0.*',
        'nvidia-nvvm==13.0.*',
    ]
    assert tk.index_packages('12.8') == ['nvidia-cuda-nvcc-cu12==12.8.*', 'nvidia-cuda-cccl-cu12==12.8.*']


def test_one_cuda_home_is_assembled_from_the_wheels_trees(tmp_path) -> None:
    nvcc_tree = tmp_path / 'wheels' / 'cu13'
    _nvcc(nvcc_tree, '13.0')
    (nvcc_tree / 'nvvm' / 'bin').mkdir(parents=True)
    torch_tree = tmp_path / 'torch' / 'cu13'
    (torch_tree / 'include').mkdir(parents=True)
    (torch_tree / 'include' / 'cuda_runtime.h').write_text('')
    (torch_tree / 'lib').mkdir()
    for lib in ('libcudart.so.13', 'libcublasLt.so.13'):
        (torch_tree / 'lib' / lib).write_text('')
    home = tk.assemble(tmp_path / 'cuda' / '13.0', [nvcc_tree], [torch_tree])
    assert tk.nvcc_release(str(home / 'bin' / 'nvcc')) == '13.0'
    assert (home / 'include' / 'cuda_runtime.h').is_file() and (home / 'nvvm' / 'bin').is_dir()
    assert sorted(p.name for p in (home / 'lib').iterdir()) == [
        'libcudart.so',
        'libcudart.so.13',
    ]  # not cuBLAS
    assert (home / 'lib' / 'libcudart.so').resolve() == (
        home / 'lib' / 'libcudart.so.13'
    ).resolve()  # -lcudart
    assert (home / 'lib64').resolve() == (home / 'lib').resolve()
    assert (home / 'targets' / 'x86_64-linux' / 'include').is_dir()  # where nvcc.profile looks
    with pytest.raises(tk.PlanError, match='no nvcc in the wheels'):
        tk.assemble(tmp_path / 'cuda' / '12.8', [torch_tree])


@pytest.mark.integration
def test_the_plan_is_shell_assignments_and_a_mistake_one_line(tmp_path) -> None:
    tool = [sys.executable, str(REPO / 'scripts' / 'install' / 'cuda_toolkit.py'), 'plan']
    ok = subprocess.run([*tool, '--archs', '9.0'], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    script = f'{ok.stdout}\necho "$MMCV_ARCHS|$MMCV_KEY"'
    shown = subprocess.run(['bash', '-c', script], capture_output=True, text=True).stdout.strip()
    assert shown.startswith('9.0|cu') and shown.endswith('-sm90')
    bad = subprocess.run([*tool, '--archs', 'hopper'], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count('\n') == 1 and 'hopper' in bad.stderr


def test_the_check_fails_the_install_when_the_ops_lack_the_cuda_asked_for() -> None:
    """This environment's mmcv has CPU-only ops (``get_compiling_cuda_version()`` is 'not
    available'): fine when no architecture was planned, one line and status 1 when one was."""
    from mmcv.ops import get_compiling_cuda_version

    if get_compiling_cuda_version() != 'not available':
        pytest.skip("this environment's mmcv ops have CUDA")
    cmd = [sys.executable, str(REPO / 'scripts' / 'install' / 'cuda_toolkit.py'), 'check']
    assert subprocess.run([*cmd, '--archs', ''], capture_output=True, text=True).returncode == 0
    bad = subprocess.run([*cmd, '--archs', '9.0'], capture_output=True, text=True)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "mmcv ops were to be built with CUDA for 9.0 but have none" in bad.stderr


def test_the_check_names_the_archs_to_rebuild_with_for_a_gpu_not_covered(monkeypatch, capsys) -> None:
    """A GPU of capability 8.6 beside ops built for 9.0 (no GPU here: torch's answer stands in)."""
    import mmcv.ops

    monkeypatch.setattr(mmcv.ops, 'get_compiling_cuda_version', lambda: '13.0')
    monkeypatch.setattr(tk, '_torch_facts', lambda: ('13.0', ['8.6', '9.0']))
    assert tk.check('9.0') == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        'install_env: this machine has GPU(s) of compute capability 8.6, but mmcv ops were built '
        'for 9.0: rebuild with MMCV_CUDA_ARCHS="8.6 9.0"'
    )
