"""How mmcv's ops are compiled on this machine: the CUDA architectures and the nvcc.

usage: python scripts/install/cuda_toolkit.py plan [--archs "8.0 9.0"]
       python scripts/install/cuda_toolkit.py toolkit [--cuda X.Y] [--cache DIR]
       python scripts/install/cuda_toolkit.py check [--archs "8.0 9.0"]

``plan`` prints shell assignments for ``scripts/install/install_env.sh`` (``eval``-ed there):

- ``MMCV_CUDA``: torch's CUDA version (``13.0``), or empty for ops built for the CPU only;
- ``MMCV_ARCHS``: the architectures, as ``TORCH_CUDA_ARCH_LIST`` takes them (``8.0;9.0``): those
  named (``--archs``, ``make install MMCV_CUDA_ARCHS="8.0 9.0"``: a login node without a GPU
  builds for the cluster's GPUs), else those of the GPUs torch sees, else none (CPU-only ops, as
  on a machine without a GPU);
- ``MMCV_NVCC``: the nvcc that compiles them: the system's (``$CUDA_HOME``, ``PATH``,
  ``/usr/local/cuda``) when its release is torch's CUDA (``X.Y``), else ``index``: nvcc and the
  CUDA headers from the package index's wheels for torch's CUDA (``nvidia-cuda-nvcc``, ...),
  assembled into ``<cache>/cuda/X.Y`` by ``toolkit``, which prints that CUDA home (no system
  toolkit needed);
- ``MMCV_KEY``: the cached wheel's folder suffix: ``cpu`` or ``cu130-sm80_sm90``.

``check`` runs after the install: one line and status 1 when the ops were to have CUDA and have
none (``mmcv.ops.get_compiling_cuda_version()``), or when a GPU torch sees is not among the
architectures built (``MMCV_ARCHS`` of the plan, recorded beside the cached wheel).

A mistake (an architecture that is not ``M.m``, architectures named for a CPU-only torch) is
one line and status 2.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

#: the release line of ``nvcc --version``: ``Cuda compilation tools, release 13.0, V13.0.88``
NVCC_RELEASE = re.compile(r'release (\d+)\.(\d+)')


class PlanError(ValueError):
    """A mistake in what the user asked for: one line, status 2."""


def parse_archs(text: str) -> list[str]:
    """``"8.0 9.0"`` / ``"8.0;9.0"`` / ``"sm_80,sm_90"`` → ``['8.0', '9.0']`` (sorted, unique)."""
    archs = set()
    for item in re.split(r'[\s,;]+', text.strip()):
        if not item:
            continue
        m = re.fullmatch(r'(\d+)\.(\d)', item) or re.fullmatch(r'(?:sm_?)?(\d+)(\d)', item)
        if m is None:
            raise PlanError(
                f'MMCV_CUDA_ARCHS: {item!r} is not an architecture; expected compute capabilities '
                'such as "8.0 9.0" (A100, H100) or "sm_90"'
            )
        archs.add(f'{int(m.group(1))}.{m.group(2)}')
    return sorted(archs, key=lambda a: tuple(map(int, a.split('.'))))


def runs_on(capability: str, archs: Sequence[str]) -> bool:
    """Whether code built for ``archs`` runs on a GPU of ``capability``: a binary for ``M.m``
    runs on ``M.n`` with ``n >= m`` (CUDA's binary compatibility within a major version)."""
    major, minor = map(int, capability.split('.'))
    return any(int(a.split('.')[0]) == major and int(a.split('.')[1]) <= minor for a in archs)


def nvcc_release(nvcc: str) -> Optional[str]:
    """``X.Y`` of ``nvcc --version``, or ``None`` when it does not run or says no release."""
    try:
        out = subprocess.run([nvcc, '--version'], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = NVCC_RELEASE.search(out)
    return f'{m.group(1)}.{m.group(2)}' if m else None


def nvcc_candidates(env: dict) -> list[str]:
    """Where a system nvcc may be, in order: ``$CUDA_HOME/bin``, ``PATH``, ``/usr/local/cuda``."""
    found = []
    if env.get('CUDA_HOME'):
        found.append(str(Path(env['CUDA_HOME']) / 'bin' / 'nvcc'))
    on_path = shutil.which('nvcc', path=env.get('PATH', ''))
    if on_path:
        found.append(on_path)
    found.append('/usr/local/cuda/bin/nvcc')
    return list(dict.fromkeys(found))


def choose_nvcc(torch_cuda: str, candidates: Sequence[str]) -> str:
    """The first candidate whose release is ``torch_cuda`` (major.minor), else ``'index'``."""
    want = '.'.join(torch_cuda.split('.')[:2])
    for nvcc in candidates:
        if Path(nvcc).is_file() and nvcc_release(nvcc) == want:
            return nvcc
    return 'index'


def plan(
    torch_cuda: Optional[str], visible: Sequence[str], archs_text: str, candidates: Sequence[str]
) -> dict[str, str]:
    """The build plan (the module docstring) from torch's CUDA version (``None``: a CPU build of
    torch), the visible GPUs' capabilities (``['9.0']``) and the architectures named."""
    named = parse_archs(archs_text) if archs_text.strip() else []
    if named and torch_cuda is None:
        raise PlanError(
            'MMCV_CUDA_ARCHS names GPU architectures, but this torch is a CPU-only build: install '
            "torch's CUDA build (the index's regular wheel) to compile CUDA ops"
        )
    archs = named or sorted(set(visible), key=lambda a: tuple(map(int, a.split('.'))))
    if torch_cuda is None or not archs:
        return dict(MMCV_CUDA='', MMCV_ARCHS='', MMCV_NVCC='', MMCV_KEY='cpu')
    cuda = '.'.join(torch_cuda.split('.')[:2])
    key = f'cu{cuda.replace(".", "")}-' + '_'.join('sm' + a.replace('.', '') for a in archs)
    return dict(
        MMCV_CUDA=cuda, MMCV_ARCHS=';'.join(archs), MMCV_NVCC=choose_nvcc(cuda, candidates), MMCV_KEY=key
    )


def index_packages(cuda: str) -> list[str]:
    """The index's wheels that hold nvcc and the headers torch's own CUDA wheels lack, for CUDA
    ``X.Y``: CUDA 13 ships them unsuffixed (``nvidia-cuda-nvcc``; ``nvvm`` and ``crt`` apart),
    CUDA 12 with ``-cu12`` (``nvvm`` inside nvcc's)."""
    major = cuda.split('.')[0]
    if int(major) >= 13:
        names = ('nvidia-cuda-nvcc', 'nvidia-cuda-cccl', 'nvidia-cuda-crt', 'nvidia-nvvm')
    else:
        names = tuple(f'{n}-cu{major}' for n in ('nvidia-cuda-nvcc', 'nvidia-cuda-cccl'))
    return [f'{n}=={cuda}.*' for n in names]


def assemble(home: Path, trees: Sequence[Path], installed: Sequence[Path] = ()) -> Path:
    """One CUDA home (``bin``, ``include``, ``lib``, ``nvvm``; ``lib64`` and
    ``targets/x86_64-linux`` pointing into it, as nvcc looks there) from the ``nvidia/*`` trees
    of unpacked wheels (``nvidia/cu13``, or ``nvidia/cuda_nvcc``, ``nvidia/cuda_runtime``, ... in
    CUDA 12); files copied, the first tree's copy kept."""
    part = home.with_name(home.name + '.part')
    shutil.rmtree(part, ignore_errors=True)
    for tree in trees:
        for sub in ('bin', 'include', 'lib', 'nvvm'):
            if (tree / sub).is_dir():
                shutil.copytree(tree / sub, part / sub, dirs_exist_ok=True, symlinks=True)
    for tree in installed:  # torch's CUDA wheels: their headers and the runtime, not the libraries
        if (tree / 'include').is_dir():
            shutil.copytree(tree / 'include', part / 'include', dirs_exist_ok=True, symlinks=True)
        for lib in (tree / 'lib').glob('libcud*rt*'):
            (part / 'lib').mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, part / 'lib' / lib.name, follow_symlinks=False)
    for lib in sorted((part / 'lib').glob('lib*.so.*')):  # the linker's name: -lcudart → libcudart.so
        plain = lib.with_name(lib.name.split('.so.')[0] + '.so')
        if not plain.exists():
            plain.symlink_to(lib.name)
    if not (part / 'bin' / 'nvcc').is_file():
        raise PlanError(f'no nvcc in the wheels unpacked for {home} ({", ".join(map(str, trees))})')
    (part / 'lib64').symlink_to('lib')
    (part / 'targets').mkdir()
    (part / 'targets' / 'x86_64-linux').symlink_to('..')
    shutil.rmtree(home, ignore_errors=True)
    part.rename(home)
    return home


def index_toolkit(cuda: str, cache: Path) -> Path:
    """``<cache>/cuda/X.Y``: nvcc from the index's wheels for CUDA ``X.Y`` (:func:`index_packages`)
    with the headers and runtime of the CUDA wheels torch installed; made once."""
    import tempfile
    import zipfile

    import torch

    home = cache / 'cuda' / cuda
    if (home / 'bin' / 'nvcc').is_file() and nvcc_release(str(home / 'bin' / 'nvcc')) == cuda:
        return home
    site = Path(torch.__file__).resolve().parents[1] / 'nvidia'  # torch's own CUDA wheels
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '-d', tmp, *index_packages(cuda)]
        if subprocess.run(pip).returncode:
            raise PlanError(
                f'the index has no nvcc wheels for CUDA {cuda} ({" ".join(index_packages(cuda))})'
            )
        for wheel in Path(tmp).glob('*.whl'):
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    if info.filename.startswith('nvidia/'):
                        path = Path(z.extract(info, Path(tmp) / 'x'))
                        mode = (info.external_attr >> 16) & 0o777
                        if mode and path.is_file():
                            path.chmod(mode)  # nvcc, ptxas, cicc: executables
        unpacked = sorted(p for p in (Path(tmp) / 'x' / 'nvidia').iterdir() if p.is_dir())
        installed = sorted(p for p in site.iterdir() if p.is_dir()) if site.is_dir() else []
        return assemble(home, unpacked, installed)


def _torch_facts() -> tuple[Optional[str], list[str]]:
    import torch

    visible = []
    if torch.version.cuda and torch.cuda.is_available():
        visible = [
            '{}.{}'.format(*torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())
        ]
    return torch.version.cuda, visible


def check(archs_text: str) -> int:
    """After the install: the ops have CUDA when archs were planned, and cover every visible GPU."""
    import torch
    from mmcv.ops import get_compiling_cuda_version

    archs = parse_archs(archs_text) if archs_text.strip() else []
    compiled = get_compiling_cuda_version()
    if archs and compiled == 'not available':
        print(
            f'install_env: mmcv ops were to be built with CUDA for {" ".join(archs)} but have none '
            "(mmcv.ops.get_compiling_cuda_version() is 'not available'); remove the cached wheel and rebuild",
            file=sys.stderr,
        )
        return 1
    _, visible = _torch_facts()
    missing = sorted(cap for cap in set(visible) if not runs_on(cap, archs))
    if missing:
        print(
            f'install_env: this machine has GPU(s) of compute capability {" ".join(missing)}, but mmcv '
            f'ops were built for {" ".join(archs) or "the CPU only"}: rebuild with '
            f'MMCV_CUDA_ARCHS="{" ".join(parse_archs(" ".join([*archs, *missing])))}"',
            file=sys.stderr,
        )
        return 1
    if visible:  # the ops run: RoIAlign, Mask R-CNN's first op on the GPU
        from mmcv.ops import roi_align

        feats = torch.randn(1, 2, 8, 8, device='cuda')
        rois = torch.tensor([[0, 0, 0, 4, 4]], dtype=torch.float32, device='cuda')
        try:
            roi_align(feats, rois, (2, 2), 1.0, 0, 'avg', True)
            torch.cuda.synchronize()
        except RuntimeError as err:  # e.g. "no kernel image is available for execution on the device"
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            print(
                f'install_env: mmcv ops built for {" ".join(archs)} do not run on '
                f'{torch.cuda.get_device_name(0)}: RoIAlign failed ({first})',
                file=sys.stderr,
            )
            return 1
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('what', choices=['plan', 'toolkit', 'check'])
    p.add_argument('--cache', default=os.environ.get('DNA_MM_CACHE', str(Path.home() / '.cache' / 'dna_mm')))
    p.add_argument('--cuda', help='toolkit: the CUDA version X.Y (default: torch\'s)')
    p.add_argument('--archs', default=os.environ.get('MMCV_CUDA_ARCHS', ''), help='e.g. "8.0 9.0"')
    p.add_argument('--debug', action='store_true', help='print the traceback of an input error')
    args = p.parse_args(argv)
    try:
        if args.what == 'check':
            return check(args.archs)
        if args.what == 'toolkit':
            cuda = args.cuda or '.'.join((_torch_facts()[0] or '').split('.')[:2])
            if not cuda:
                raise PlanError('this torch is a CPU-only build: there is no CUDA version to fetch nvcc for')
            print(index_toolkit(cuda, Path(args.cache)))
            return 0
        torch_cuda, visible = _torch_facts()
        for name, value in plan(torch_cuda, visible, args.archs, nvcc_candidates(dict(os.environ))).items():
            print(f'{name}={shlex.quote(value)}')
        return 0
    except PlanError as err:
        if args.debug:
            raise
        print(f'install_env: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
