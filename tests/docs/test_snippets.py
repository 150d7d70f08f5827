"""The docs run: every fenced ``python`` block of README.md, configs/README.md and docs/ (any
depth) is run as a reader would use it.

* a config (a block that sets ``_base_``): written to a file of its own, read by
  :func:`dna_mm.config.read_config` with its pretrained weights cleared (nothing is downloaded),
  checked (:func:`dna_mm.config.check_config`, which names a misspelt or merged ``attn_cfg``; a
  config made for testing, as MMAction2's VideoMAE files, as a test's) and its model built
  (:func:`dna_mm.config.build_part`);
* any other block: a complete file, run as ``python FILE`` in an empty folder.

A block not meant to run (a tool's output, an excerpt of keys) says so in its info string,
```` ```python no-run ```` (docs/development.md, "Tests"); those are not run, and stay few.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

#: the pages whose blocks run
PAGES = [REPO / 'README.md', REPO / 'configs' / 'README.md', *sorted((REPO / 'docs').rglob('*.md'))]
#: a fenced block: its indent, fence, info string and body (up to the same fence at the same indent)
FENCE = re.compile(
    r'^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$',
    re.M | re.S,
)
#: the info string's word that keeps a block from running
NO_RUN = 'no-run'


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: the page, the line of its opening fence, its info string's
    words and its code (the fence's indent taken off)."""

    page: Path
    line: int
    info: tuple[str, ...]
    code: str

    @property
    def name(self) -> str:
        return f'{self.page.relative_to(REPO)}:{self.line}'

    @property
    def language(self) -> str:
        return self.info[0] if self.info else ''

    @property
    def runs(self) -> bool:
        return self.language == 'python' and NO_RUN not in self.info[1:]

    @property
    def is_config(self) -> bool:
        """Whether the block sets ``_base_`` at its top level (an MMEngine config)."""
        body = ast.parse(self.code).body
        return any(
            isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == '_base_' for t in node.targets)
            for node in body
        )


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order."""
    text = page.read_text(encoding='utf-8')
    found = []
    for match in FENCE.finditer(text):
        indent = len(match['indent'])
        code = ''.join(line[indent:] for line in match['body'].splitlines(keepends=True))
        line = text.count('\n', 0, match.start()) + 1
        found.append(Block(page, line, tuple(match['info'].split()), code))
    return found


ALL = [block for page in PAGES for block in blocks(page)]
PYTHON = [block for block in ALL if block.language == 'python']
CONFIGS = [block for block in PYTHON if block.runs and block.is_config]
FILES = [block for block in PYTHON if block.runs and not block.is_config]


def test_the_blocks_are_found_and_few_are_not_run() -> None:
    pages = {b.page.relative_to(REPO).as_posix() for b in CONFIGS}
    assert pages >= {'README.md', 'docs/adding_dna.md', 'docs/installation.md'}, pages
    assert FILES and all(b.page.suffix == '.md' for b in FILES)
    not_run = [b.name for b in PYTHON if not b.runs]
    assert len(not_run) < len(PYTHON) / 2, not_run
    # Python is spelt `python` (the runs read that word): another spelling would not run
    others = [b.name for b in ALL if b.language.lower() in ('py', 'python3', 'pycon', 'ipython', 'py3')]
    assert not others, f'write ```python (or ```python {NO_RUN}): {others}'
    unknown = [b.name for b in PYTHON if set(b.info[1:]) - {NO_RUN}]
    assert not unknown, f'the only word after python is {NO_RUN}: {unknown}'


@pytest.mark.parametrize('block', CONFIGS, ids=lambda b: b.name)
def test_a_config_block_builds(block: Block, tmp_path) -> None:
    from dna_mm.config import build_part, check_config, read_config
    from dna_mm.config.check import TRAIN_KEYS

    path = tmp_path / 'config.py'
    path.write_text(block.code)
    cfg = read_config(path, clear_pretrained=True)
    check_config(cfg, 'train' if all(cfg.get(key) for key in TRAIN_KEYS) else 'test')  # a test config
    build_part(cfg)


@pytest.mark.integration
@pytest.mark.parametrize('block', FILES, ids=lambda b: b.name)
def test_a_file_block_runs(block: Block, tmp_path) -> None:
    (tmp_path / 'snippet.py').write_text(block.code)
    # as a user runs it: Triton compiles (the suite's own processes interpret it without CUDA)
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    proc = subprocess.run(
        [sys.executable, 'snippet.py'], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f'{block.name} exited {proc.returncode}:\n{proc.stderr[-4000:]}'
