"""configs/README.md names every config under configs/ (outside _base_); a brace pattern such as
``timesformer_{softmax,diff,dna}_ntu60.py`` names each of its expansions."""

from __future__ import annotations

import itertools
import re

from conftest import REPO

CONFIGS = REPO / 'configs'


def _expand(name: str) -> list[str]:
    """``a_{x,y}_b{1,2}.py`` -> the four names."""
    parts = re.split(r'\{([^}]*)\}', name)
    choices = [[p] if i % 2 == 0 else p.split(',') for i, p in enumerate(parts)]
    return [''.join(c) for c in itertools.product(*choices)]


def test_the_readme_names_every_config() -> None:
    text = (CONFIGS / 'README.md').read_text(encoding='utf-8')
    named = {n for code in re.findall(r'`([^`\s]+\.py)`', text) for n in _expand(code)}
    configs = {str(p.relative_to(CONFIGS)) for p in CONFIGS.rglob('*.py') if '_base_' not in p.parts}
    assert sorted(configs - named) == []
    assert _expand('t_{a,b}_{x,y}.py') == ['t_a_x.py', 't_a_y.py', 't_b_x.py', 't_b_y.py']
