"""The device kit (``make device-kit``) covers what ``scripts/device/gpu_check.sh`` imports on a GPU
machine: every package the kit carries has its requirements met by the kit or the machine's image
(``requirements/device-image.txt``), and every module the check's commands import when their
files load (followed through dna_mm's own modules and the test helpers) comes from the standard
library, this repository, the kit or the image. The wheels themselves are not needed here: the
distributions' metadata is read from this environment, which holds the same packages."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

from conftest import REPO, load_tool, run_main
from packaging.requirements import Requirement

#: kit packages that stand in for a requirement of another name (same import name)
SUBSTITUTES = {
    'mmcv': 'mmcv-lite',  # mmcv built without its compiled ops
    'opencv-python': 'opencv-python-headless',  # the image's cv2
    'opencv-contrib-python': 'opencv-python-headless',
}
#: requirements the kit leaves out on purpose, and why (requirements/device-kit.txt)
NOT_CARRIED = {
    'av': 'the re-encoding tools only; its 36 MB wheel does not fit beside decord',
    'mmpretrain': 'the ImageNet configs only (configs/imagenet/); the GPU check trains no image classifier',
}
#: the GPU machines run Linux x86-64 with this Python
MARKERS = dict(
    python_version='3.12', python_full_version='3.12.3', sys_platform='linux', platform_system='Linux'
)


def norm(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def pinned(path: str) -> set[str]:
    lines = (REPO / path).read_text().splitlines()
    return {
        norm(re.split(r'[=<>~!\[; ]', ln.strip())[0]) for ln in lines if ln.strip() and not ln.startswith('#')
    }


KIT = pinned('requirements/device-kit.txt') | {'dna-mm'}
IMAGE = pinned('requirements/device-image.txt')


def requirements_of(dist: str) -> set[str]:
    """The names ``dist`` requires on the GPU machines (no extras, markers evaluated)."""
    found = set()
    for line in md.requires(dist) or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(dict(MARKERS, extra='')):
            found.add(norm(req.name))
    return found


def closure(names: set[str]) -> set[str]:
    """``names`` and everything they require, as far as this environment holds them."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += requirements_of(name)
        except md.PackageNotFoundError:
            pass
    return seen


def installed_name(name: str) -> str:
    """The distribution this environment holds for a kit name (``mmcv-lite`` → ``mmcv``)."""
    return next((k for k, v in SUBSTITUTES.items() if v == name and _has(k)), name)


def _has(dist: str) -> bool:
    try:
        md.version(dist)
        return True
    except md.PackageNotFoundError:
        return False


def on_the_machine(name: str) -> bool:
    """The kit or the image holds the distribution ``name`` (or its substitute)."""
    name = SUBSTITUTES.get(name, name)
    return name in KIT or name in closure(IMAGE)


def test_every_kit_package_has_its_requirements_on_the_machine() -> None:
    missing = {
        (pkg, req)
        for pkg in sorted(KIT)
        if _has(installed_name(pkg))
        for req in requirements_of(installed_name(pkg))
        if not on_the_machine(req) and req not in NOT_CARRIED
    }
    assert not missing, (
        f'(package, requirement) pairs the kit and the image do not provide: {sorted(missing)}'
    )


# -- what the check's commands import -----------------------------------------------------------
def entry_points() -> list[tuple[str, Path | str]]:
    """``(kind, file or code)`` of every Python the check runs, in both profiles."""
    check = load_tool('scripts/device/gpu_check.py')
    found: list[tuple[str, Path | str]] = [('file', REPO / 'scripts/device/gpu_check.py')]
    for profile in ('gpu', 'rehearsal'):
        ctx = check.Context(profile, Path('/out'), Path('/scratch'), 1)
        for step in check.STEPS:
            for cmd in step.commands(ctx):
                if '-c' in cmd:
                    found.append(('code', cmd[cmd.index('-c') + 1]))
                elif cmd[1:3] == ['-m', 'pytest']:
                    for arg in cmd[3:]:
                        if arg.startswith('tests/'):
                            target = REPO / arg
                            found += [
                                ('file', f)
                                for f in sorted(target.rglob('*.py') if target.is_dir() else [target])
                            ]
                    found.append(('file', REPO / 'tests' / 'conftest.py'))
                else:
                    found += [('file', REPO / a) for a in cmd if a.endswith('.py') and (REPO / a).is_file()]
    return found


def load_time_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """``(module, level)`` of the imports that run when the module loads: module and class
    bodies, ``if`` / ``try`` blocks, but not function bodies nor a ``try`` that catches ImportError."""
    out: list[tuple[str, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((a.name, 0) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level or node.module:
                    out.extend((f'{node.module or ""}.{a.name}'.strip('.'), node.level) for a in node.names)
            elif isinstance(node, ast.Try):
                guarded = any(
                    isinstance(h.type, ast.Name) and h.type.id in ('ImportError', 'ModuleNotFoundError')
                    for h in node.handlers
                )
                if not guarded:
                    visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse), visit(node.finalbody)
            elif isinstance(node, (ast.If, ast.With)):
                visit(node.body), visit(getattr(node, 'orelse', []))
            elif isinstance(node, ast.ClassDef):
                visit(node.body)

    visit(tree.body)
    return out


def local_file(module: str, level: int, here: Path) -> Path | None:
    """The repository file a (relative) import names, if it is one of ours."""
    if level:
        base = here.parent
        for _ in range(level - 1):
            base = base.parent
        parts = module.split('.') if module else []
    elif module.split('.')[0] == 'dna_mm':
        base, parts = REPO, module.split('.')
    else:  # a test helper beside the test, or in tests/ (pytest's pythonpath)
        top = module.split('.')[0]
        folder = next((d for d in (here.parent, REPO / 'tests') if (d / f'{top}.py').is_file()), None)
        if folder is None:
            return None
        base, parts = folder, [top]
    for n in range(len(parts), -1, -1):  # `from .x import name`: name may be a module or not
        path = base.joinpath(*parts[:n])
        if path.with_suffix('.py').is_file():
            return path.with_suffix('.py')
        if (path / '__init__.py').is_file():
            return path / '__init__.py'
    return None


def third_party_imports() -> dict[str, set[str]]:
    """Top-level third-party module → the repository files that import it when they load."""
    found: dict[str, set[str]] = {}
    todo = entry_points()
    seen: set[str] = set()
    while todo:
        kind, what = todo.pop()
        key = str(what)
        if key in seen:
            continue
        seen.add(key)
        here = what if kind == 'file' else REPO / '-c'
        tree = ast.parse(what.read_text() if kind == 'file' else what)
        for module, level in load_time_imports(tree):
            local = local_file(module, level, here)
            if local is not None:
                if local.is_relative_to(REPO / 'dna_mm') and local.name != '__init__.py':
                    package_init = local.parent / '__init__.py'  # importing a module runs its packages
                    todo.append(('file', package_init))
                todo.append(('file', local))
                continue
            top = module.split('.')[0]
            if level == 0 and top not in sys.stdlib_module_names and top != '__future__':
                found.setdefault(top, set()).add(str(Path(key).relative_to(REPO)) if kind == 'file' else '-c')
    return found


def test_every_module_the_check_imports_is_on_the_machine() -> None:
    distributions = md.packages_distributions()
    imports = third_party_imports()
    assert {'torch', 'mmengine', 'mmaction', 'pytest'} <= set(imports)  # the scan reaches them
    missing = {}
    for top, files in sorted(imports.items()):
        dists = [norm(d) for d in distributions.get(top, [])]
        if not dists or not any(on_the_machine(d) for d in dists):
            missing[top] = sorted(files)[:3]
    assert not missing, f'modules neither the kit nor the image holds (module: files importing it): {missing}'


def test_the_scan_catches_an_import_the_machine_lacks() -> None:
    tree = ast.parse(
        'import av\ntry:\n    import onnx\nexcept ImportError:\n    pass\ndef f():\n    import tensorboard\n'
    )
    assert load_time_imports(tree) == [('av', 0)]
    assert not any(on_the_machine(d) for d in ('av', 'tensorboard', 'moviepy'))
    assert on_the_machine('mmcv') and on_the_machine('opencv-python') and on_the_machine('torch')


def test_every_test_that_uses_cuda_is_in_the_check() -> None:
    """A test module that asks for CUDA belongs in gpu_check's CUDA_TEST_PATHS (else no GPU runs it)."""
    check = load_tool('scripts/device/gpu_check.py')
    listed = [REPO / p for p in check.CUDA_TEST_PATHS]
    users = [
        p
        for p in (REPO / 'tests').rglob('test_*.py')
        if p != Path(__file__).resolve()
        and re.search(r"torch\.cuda\.is_available\(\)|device='cuda'|\.cuda\(\)", p.read_text())
    ]
    assert users
    outside = [str(p.relative_to(REPO)) for p in users if not any(p == q or q in p.parents for q in listed)]
    assert not outside, f'tests that use CUDA but that scripts/device/gpu_check.py does not run: {outside}'


def test_the_steps_fit_one_call_on_a_lent_gpu() -> None:
    """Every step has a cap in both profiles, and on a GPU the caps add up to ``GPU_CAPS_S`` at
    most, which with the kit's install fits one call of a lent GPU (600 s at most)."""
    check = load_tool('scripts/device/gpu_check.py')
    assert all(set(step.caps) == {'gpu', 'rehearsal'} for step in check.STEPS)
    assert sum(step.caps['gpu'] for step in check.STEPS) <= check.GPU_CAPS_S <= 600 - 40
    assert [s.name for s in check.STEPS][-1] == 'compiled'  # the compiler's time cuts nothing short


def test_the_train_step_table_adds_the_gpu_busy_time_where_it_was_profiled() -> None:
    """``benchmark_train_step.py --kernels`` rows (GPU busy time, kernels launched, both by
    operator) become two more columns of the report's table and the table of the operators that
    differ most; rows without them keep the plain table."""
    check = load_tool('scripts/device/gpu_check.py')
    row = dict(config='a.py', label='a', params=121.6e6, step_s=0.1, peak_bytes=2**30, per_s=80.0)
    profiled = [
        dict(row, busy_s=0.04, kernels=1234, by_operator={'mm': [1000, 0.03], 'neg': [0, 0.0]}),
        dict(
            row,
            config='b.py',
            label='b',
            step_s=0.15,
            busy_s=0.05,
            kernels=2000,
            by_operator={'mm': [1990, 0.045]},
        ),
    ]
    run = dict(device='GPU', batch=8, part='model', amp_dtype=None, rows=profiled)
    lines = check._train_step_markdown(None, {'timesformer': run}).splitlines()
    assert '| GPU busy | kernels |' in lines[2]
    assert lines[5].endswith('| 1.50× | 1.00 GiB | 1.00× | 80.0 | 50.0 ms | 2000 |')
    assert lines[7:] == [
        '| operator (backward node / optimizer) | a | b | Δ b |',
        '|---|---|---|---|',
        '| `mm` | 1000 / 30.00 ms | 1990 / 45.00 ms | +990 / +15.00 ms |',
        '| `neg` | 0 / 0.00 ms | 0 / 0.00 ms | +0 / +0.00 ms |',
        '| all | 1000 / 30.00 ms | 1990 / 45.00 ms | +990 / +15.00 ms |',
    ]
    assert 'GPU busy' not in check._train_step_markdown(None, {'timesformer': dict(run, rows=[row])})


def test_kernels_on_the_cpu_list_the_operators_own_time() -> None:
    """``--kernels`` on the CPU: each operator's own time, by where it ran (backward node,
    optimizer), beside the first config's."""
    check = load_tool('scripts/device/gpu_check.py')
    tool = ['tools/benchmarks/benchmark_train_step.py', '--device', 'cpu', '--batch', '1', '--reps', '1']
    configs = ['--configs', 'configs/timesformer_softmax_k400.py', 'configs/timesformer_dna_k400.py']
    proc = run_main([*tool, *configs, '--kernels', '--cfg-options', *check.TINY_TIMESFORMER])
    assert "| operators' time | operators |" in proc.stdout
    table = proc.stdout.split("the operators' own CPU time (calls / time; the 15 that differ most")[1]
    assert (
        '| operator (backward node / optimizer) | timesformer_softmax_k400 | timesformer_dna_k400 |' in table
    )
    assert re.search(r'\n\| all \| \d+ / [\d.]+ ms \| \d+ / [\d.]+ ms \| \+\d+ / ', table), table


def test_kernels_and_peak_rss_are_refused_together() -> None:
    tool = ['tools/benchmarks/benchmark_train_step.py', '--device', 'cpu', '--kernels', '--peak-rss']
    proc = run_main(tool, check=False)
    assert proc.returncode == 2 and '--kernels profiles a step of the timed run; --peak-rss' in proc.stderr
