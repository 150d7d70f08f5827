"""The docs' links lead somewhere: every relative link of README.md, configs/README.md and docs/
names a file of the checkout, and every ``#anchor`` a heading of its page (GitHub's anchors); every
path they quote (`` `tools/test.py` ``) is a file of the checkout, or of the repository tree that
MMAction2's / MMDetection's wheels install (``.mim``: ``tools/``, ``configs/``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

PAGES = [REPO / 'README.md', REPO / 'configs' / 'README.md', *sorted((REPO / 'docs').rglob('*.md'))]
#: a Markdown link or image: its target up to an optional ``#anchor``
LINK = re.compile(r'\]\((?P<target>[^)\s#]*)(?:#(?P<anchor>[^)\s]+))?\)')
HEADING = re.compile(r'^#{1,6} (.+?)\s*$', re.M)
FENCED = re.compile(r'^(`{3,}|~{3,}).*?^\1', re.M | re.S)
#: a quoted path that starts at one of the checkout's top folders
QUOTED = re.compile(r'`((?:dna_mm|tools|configs|docs|tests|scripts|requirements)/[\w./\-]*\w)`')


def mim_roots() -> list[Path]:
    """The repository trees the OpenMMLab wheels install (``<package>/.mim``)."""
    import mmaction
    import mmdet

    return [Path(package.__file__).parent / '.mim' for package in (mmaction, mmdet)]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    blanks as ``-``."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors(page: Path) -> set[str]:
    return {anchor(h) for h in HEADING.findall(FENCED.sub('', page.read_text(encoding='utf-8')))}


def test_anchor_follows_github() -> None:
    assert anchor('Does DnA denoise? The demo as a controlled experiment') == (
        'does-dna-denoise-the-demo-as-a-controlled-experiment'
    )
    assert anchor('`mmaction::` bases and mmengine 0.10.7') == 'mmaction-bases-and-mmengine-0107'


@pytest.mark.parametrize('page', PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_leads_to_a_file_and_heading_of_the_checkout(page: Path) -> None:
    text = FENCED.sub('', page.read_text(encoding='utf-8'))
    broken = []
    for m in LINK.finditer(text):
        target, where = m['target'], m['anchor']
        if re.match(r'[a-z]+:', target):  # https:, mailto:
            continue
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f'{target}: no such file')
        elif where and path.suffix == '.md' and where not in anchors(path):
            broken.append(f'{target}#{where}: no such heading in {path.relative_to(REPO)}')
    assert not broken, broken


@pytest.mark.parametrize('page', PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_quoted_path_is_a_file_of_the_checkout_or_of_the_openmmlab_trees(page: Path) -> None:
    roots = [REPO, page.parent, *mim_roots()]
    missing = [
        path
        for path in QUOTED.findall(page.read_text(encoding='utf-8'))
        if not any((root / path).exists() for root in roots)
    ]
    assert not missing, missing
