"""The package's layering (``docs/development.md``, "The house"): every import inside ``dna_mm``,
at module level or inside a function, goes to the importer's own part or to a part listed
under it in :data:`ALLOWED`. Read with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from conftest import REPO, run_cmd

PACKAGE = REPO / 'dna_mm'
HOSTS_BASE = (
    'errors',
    'family',
    'converters',
    'models.scopes',
    'models.attention',
    'models.layers',
    'models.fitting',
)
#: part (a module or folder of dna_mm, dotted) → what it may import besides itself; the longest
#: part that names a module is its part, and an entry allows that module and all below it
ALLOWED: dict[str, tuple[str, ...]] = {
    'errors': (),
    'family': ('errors',),
    'utils': ('errors',),
    'ops': ('family',),
    'converters': ('errors', 'family'),
    'checkpoint': ('errors', 'converters'),
    'models.scopes': ('errors',),  # which registry builds a config
    'models.attention': ('errors', 'family', 'ops', 'models.scopes'),
    'models.layers': ('errors', 'family', 'models.attention'),
    'models.necks': ('errors', 'models.layers', 'models.scopes'),
    'models.sites': ('errors', 'models.attention'),  # where a model's attentions are
    'models.fitting': ('errors', 'family', 'converters', 'models.attention'),
    # backbones and adapters: siblings, each on the family, its layers and the fitting of weights
    'models.backbones': HOSTS_BASE,
    'models.adapters': HOSTS_BASE,
    'models': ('models',),
    # a run's config: read and built into its model (config.build, the one home), prepared, checked
    'config.options': (),  # what --cfg-options would change
    'config.new_style': ('errors', 'utils'),  # new-style configs' mistakes in one line
    'config.build': (
        'errors',
        'family',  # an attention's name with a method's settings (dna:apm+gated)
        'utils',
        'models.scopes',
        'models.attention',
        'config.options',
        'config.new_style',
    ),
    'config.timm_models': ('errors', 'utils'),  # a tool's timm:NAME model
    'config': ('errors', 'family', 'utils', 'models.scopes', 'models.attention', 'engine.distributed'),
    'datasets': ('errors', 'utils'),  # what training reads
    'synthetic': ('errors', 'datasets'),  # generated sets
    'preparation': ('errors', 'utils', 'datasets', 'synthetic'),  # offline preparation and checks
    'analysis': (
        'errors',
        'family',
        'models',
        'checkpoint',
        'datasets',
        'synthetic',
        'evaluation',
        'config.build',
        'config.model',  # a model it does not train, its values checked first
        'config.timm_models',
    ),
    'evaluation': ('errors', 'utils', 'datasets', 'preparation.imagenet'),  # imagenet_variants: its folders
    'deployment': (
        'errors',
        'family',  # the attentions named in the file's metadata as the tools name them
        'utils',
        'models',
        'checkpoint',
        'datasets',
        'config.build',
        'config.model',
        'config.timm_models',
    ),
    # the training runtime: the runner, its ranks and global batch, loops, hooks
    'engine': ('errors', 'utils', 'converters', 'checkpoint', 'datasets', 'models'),
    'benchmarks': (
        'errors',
        'family',  # a method's member and settings (dna:apm, dna+gated), as the demos read them
        'utils',
        'ops',
        'models',
        'datasets',
        'synthetic',
        'preparation.encoding',
        'deployment',
        'config.build',
        'config.check',  # the model's values checked before a train step builds it
        'config.timm_models',
        'engine.step_by_options',  # a train step's optimizer steps as a run's does
    ),
    # the applications: inference (apis), the video over time
    'apis': (
        'errors',
        'utils',
        'checkpoint',
        'datasets',
        'preparation.runner',
        'config.build',
        'config.model',
        'over_time',
        '_moved',
    ),
    'over_time': ('errors', 'utils', 'datasets', 'synthetic', 'analysis'),
    'launch': ('',),  # the package's entry points: anything
    # python -m dna_mm.tools (the shipped tools/ scripts) and the tools' plumbing (cli, torchrun)
    'tools': (
        'errors',
        'utils',
        'family',  # the attentions a tool's flag names (dna:apm+gated): read once for every tool
        'models.attention.builder',
        '_moved',
    ),
    '_moved': ('',),  # the old import paths, for one release
    '__init__': ('',),
}


def _part(module: str) -> str:
    """The part of ``module`` (dotted, relative to dna_mm): the longest :data:`ALLOWED` key."""
    parts = module.split('.')
    for n in range(len(parts), 0, -1):
        if '.'.join(parts[:n]) in ALLOWED:
            return '.'.join(parts[:n])
    raise AssertionError(f'dna_mm.{module} is in no part of ALLOWED: add it')


def _module(path: Path) -> tuple[str, list[str]]:
    """``path`` as a module name relative to dna_mm (``'__init__'`` for the package itself) and
    the package its relative imports start from."""
    parts = list(path.relative_to(PACKAGE).with_suffix('').parts)
    package = parts[:-1]
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts) or '__init__', package


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of dna_mm in ``path``, relative to dna_mm (``''`` for
    ``import dna_mm`` itself, which only registers)."""
    _, package = _module(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split('.')[0] == 'dna_mm']
            found += [(node.lineno, name.partition('.')[2]) for name in names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            if node.module:
                found.append((node.lineno, '.'.join([*base, node.module])))
            else:  # from . import a, b: modules (or names) of that package
                found += [(node.lineno, '.'.join([*base, a.name])) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'dna_mm':
            found.append((node.lineno, node.module.partition('.')[2]))
    return found


def _allowed(source: str, target: str) -> bool:
    if target == '':  # import dna_mm: registration
        return True
    mine = _part(source)
    return any(
        entry == '' or target == entry or target.startswith(entry + '.') for entry in (mine, *ALLOWED[mine])
    )


def test_every_import_follows_the_layering() -> None:
    broken = []
    for path in sorted(PACKAGE.rglob('*.py')):
        source, _ = _module(path)
        for line, target in _imports(path):
            if not _allowed(source, target):
                broken.append(f'dna_mm/{path.relative_to(PACKAGE)}:{line} imports dna_mm.{target}')
    assert not broken, 'imports against the layering (docs/development.md):\n' + '\n'.join(broken)


def test_the_check_sees_an_import_against_the_layering() -> None:
    assert not _allowed('ops.dna_attention', 'models.attention.functional')  # ops below models
    assert not _allowed('models.attention.dna', 'converters.attention')  # beside, not below
    assert not _allowed('models.adapters.swap', 'models.backbones.pretrained')  # siblings
    assert not _allowed('datasets.video_reader', 'apis.inference')
    assert not _allowed('preparation.custom.recipe', 'config.prepare')  # the data tools' logic: below config
    assert not _allowed('config.build', 'engine.runner')  # config -> model needs no runtime
    assert _allowed('models.backbones.timm_vit', 'family') and _allowed('engine.runner', 'engine.loops')
    assert 'family' in {target for _, target in _imports(PACKAGE / 'ops' / 'dna_attention.py')}
    mha = PACKAGE / 'models' / 'layers' / 'mha_attention.py'
    assert 'models.attention.builder' in {target for _, target in _imports(mha)}


#: what a training run imports, and the applications that must stay out of it
TRAINING = (
    'errors',
    'utils',
    'family',
    'ops',
    'converters',
    'checkpoint',
    'models',
    'datasets',
    'engine',
    'config',
)
APPLICATIONS = ('over_time', 'analysis', 'benchmarks', 'deployment', 'apis', 'preparation', 'synthetic')


def _reach(part: str) -> set[str]:
    """Every part that ``part`` may import, directly or through the parts it may import."""
    seen, todo = set(), [part]
    while todo:
        for entry in ALLOWED[todo.pop()]:
            target = _part(entry) if entry else '__init__'
            if entry and entry not in seen:
                seen.add(entry)
                todo.append(target)
    return seen


def test_training_reaches_no_application() -> None:
    """The table itself: no training part may reach the video over time, the analyses or the
    benchmarks (nor the other applications), however many steps it takes."""
    parts = [p for p in ALLOWED if p.split('.')[0] in TRAINING]
    leaks = {p: sorted(r for r in _reach(p) if r.split('.')[0] in APPLICATIONS) for p in parts}
    assert not {p: r for p, r in leaks.items() if r}, leaks


def test_a_training_run_imports_no_application() -> None:
    """What ``tools/train.py`` and ``tools/test.py`` import (dna_mm, its config and engine
    packages) loads none of the application packages."""
    code = (
        'import sys, dna_mm, dna_mm.config, dna_mm.engine; '
        f'print(sorted(m for m in sys.modules if m.split(".")[:2][-1] in {APPLICATIONS!r} '
        'and m.startswith("dna_mm.")))'
    )
    res = run_cmd([sys.executable, '-c', code])
    loaded = [m for m in ast.literal_eval(res.stdout.strip().splitlines()[-1]) if m != 'dna_mm.apis']
    assert loaded == [], loaded
