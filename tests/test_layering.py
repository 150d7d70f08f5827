"""The package's layering (``docs/development.md``, "The house"): every import inside ``dna_mm``,
at module level or inside a function, goes to the importer's own part or to a part listed
under it in :data:`ALLOWED`. Read with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

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
    'family': (),
    'utils': (),
    'ops': ('family',),
    'converters': ('errors', 'family'),
    'checkpoint': ('errors', 'converters'),
    'models.scopes': ('errors',),  # which registry builds a config
    'models.attention': ('errors', 'family', 'ops', 'models.scopes'),
    'models.layers': ('errors', 'family', 'models.attention'),
    'models.necks': ('models.layers', 'models.scopes'),
    'models.sites': ('errors', 'models.attention'),  # where a model's attentions are
    'models.fitting': ('errors', 'family', 'converters', 'models.attention'),
    # backbones and adapters: siblings, each on the family, its layers and the fitting of weights
    'models.backbones': HOSTS_BASE,
    'models.adapters': HOSTS_BASE,
    'models': ('models',),
    'build': ('errors', 'utils', 'models.scopes'),  # config -> model, the one home
    'datasets': ('errors', 'utils'),
    'analysis': ('errors', 'family', 'models', 'checkpoint', 'datasets', 'evaluation', 'build'),
    'evaluation': ('errors', 'datasets'),  # + ImageNet's folders (imagenet_variants)
    'deployment': ('errors', 'models', 'checkpoint', 'build'),
    'engine': ('errors', 'datasets', 'models'),
    'benchmarks': ('errors', 'utils', 'ops', 'models', 'datasets', 'deployment', 'build'),
    'apis': (
        'errors',
        'family',
        'utils',
        'converters',
        'checkpoint',
        'models',
        'datasets',
        'engine',
        'analysis',
        'build',
    ),
    'launch': ('',),  # the package's entry points: anything
    'tools': ('utils',),  # python -m dna_mm.tools: the shipped tools/ scripts (utils.mim_compat)
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
    assert not _allowed('datasets.custom.recipe', 'apis.config')  # the data tools' logic: below apis
    assert _allowed('models.backbones.timm_vit', 'family') and _allowed('apis.runner', 'engine.loops')
    assert 'family' in {target for _, target in _imports(PACKAGE / 'ops' / 'dna_attention.py')}
    mha = PACKAGE / 'models' / 'layers' / 'mha_attention.py'
    assert 'models.attention.builder' in {target for _, target in _imports(mha)}
