"""A member of the user's own, in a module file of theirs, goes through every tool that takes an
attention by name (issue #60: no closed list of members): ``--import FILE`` (or a dotted module)
and its short name, in the video demo, the denoising study, the attention benchmark and the
operator count; the same option in each (``dna_mm.tools.cli.IMPORT_FLAG``). An unknown name is
one line naming the value and the registered members, exit status 2, before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, load_tool, run_main, run_tool
from mmengine.registry import MODELS

from dna_mm.tools.cli import IMPORT_FLAG, import_modules, known_names

#: the user's file: softmax at half the scale, ``softmax(s/2 · Q Kᵀ + b) V``, named ``halfscale``
MEMBER = '''
from mmengine.registry import MODELS

from dna_mm.models.attention import AttentionBase
from dna_mm.models.attention.functional import single_bias


@MODELS.register_module()
class HalfScaleAttention(AttentionBase):
    short_name = 'halfscale'
    label = 'softmax at half scale'

    def attend(self, heads, attn_mask, attn_bias, eager):
        bias = single_bias(attn_bias, type(self).__name__)
        out, attn = self.softmax_branch(
            heads['q'], heads['k'], heads['v'], attn_mask, bias, eager, scale=self.scale / 2
        )
        return out, ({'attn': attn} if eager else {})
'''
MODULE, TYPE, SHORT = 'half_scale_attention', 'HalfScaleAttention', 'halfscale'
#: the demo's runs made seconds-long: a one-block model 32 wide, a few clips, no loader workers
TINY = [
    'model.backbone.embed_dims=32',
    'model.backbone.num_heads=2',
    'model.backbone.num_transformer_layers=1',
    'model.cls_head.in_channels=32',
    'train_dataloader.batch_size=2',
    *(f'{split}_dataloader.num_workers=0' for split in ('train', 'val', 'test')),
    'train_dataloader.dataset.indices=8',
    'val_dataloader.dataset.indices=4',
    'test_dataloader.dataset.indices=4',
]
#: the tools that take an attention by name, and the option they take it by
TOOLS = {
    'tools/demos/demo.py': '--attn',
    'tools/demos/demo_det.py': '--attn',
    'tools/analysis/study.py': '--methods',
    'tools/benchmarks/benchmark_attention.py': '--methods',
    'tools/benchmarks/benchmark_operators.py': '--attn',
}


@pytest.fixture
def own_member(tmp_path, monkeypatch):
    """The user's file in ``tmp_path``; after the test, its module, its registration and the
    paths an import put first (``sys.path``, ``PYTHONPATH``) are gone, so other tests see the
    shipped family only."""
    path = tmp_path / f'{MODULE}.py'
    path.write_text(MEMBER)
    monkeypatch.setattr(sys, 'path', list(sys.path))
    monkeypatch.setenv('PYTHONPATH', os.environ.get('PYTHONPATH', ''))
    yield path
    sys.modules.pop(MODULE, None)
    MODELS._module_dict.pop(TYPE, None)


# -- the option ----------------------------------------------------------------------------------
@pytest.mark.parametrize('tool', sorted(TOOLS))
def test_every_tool_spells_the_option_alike(tool) -> None:
    module = load_tool(tool)
    args = module.parse_args([IMPORT_FLAG, 'a.b', 'c.py'])
    assert args.imports == ['a.b', 'c.py'] and module.parse_args([]).imports == []


def test_a_file_is_imported_by_its_name_for_this_process_and_the_ones_it_starts(own_member) -> None:
    assert import_modules([str(own_member)]) == [MODULE]
    assert sys.modules[MODULE].__file__ == str(own_member) and TYPE in MODELS.module_dict
    assert sys.path[0] == str(own_member.parent)
    assert os.environ['PYTHONPATH'].split(os.pathsep)[0] == str(own_member.parent)
    assert import_modules([str(own_member), 'json']) == [MODULE, 'json']  # again: the same module


def test_a_dotted_module_is_imported_by_its_name(own_member) -> None:
    sys.path.insert(0, str(own_member.parent))
    assert import_modules([MODULE]) == [MODULE] and TYPE in MODELS.module_dict


@pytest.mark.parametrize(
    'spec, message',
    [
        ('{tmp}/nothing.py', '--import {tmp}/nothing.py does not exist'),
        ('no_such_module_here', "--import no_such_module_here: no module named 'no_such_module_here'"),
        ('json.no_such_part', "--import json.no_such_part: no module named 'json.no_such_part'"),
        ('{tmp}/json.py', "--import {tmp}/json.py: a module named 'json' is imported already"),
        (
            '{tmp}/unparsed.py',
            "--import {tmp}/unparsed.py: SyntaxError: expected ':' ({tmp}/unparsed.py, line 2)",
        ),
        (
            '{tmp}/needs.py',
            "--import {tmp}/needs.py: ModuleNotFoundError: No module named 'not_installed_xyz' "
            '({tmp}/needs.py, line 1)',
        ),
        (
            '{tmp}/raises.py',
            "--import {tmp}/raises.py: NameError: name 'undefined_here' is not defined "
            '({tmp}/raises.py, line 2)',
        ),
    ],
)
def test_an_import_that_cannot_be_made_is_one_line(tmp_path, monkeypatch, spec, message) -> None:
    """A missing module or file, a name taken, and the user's module failing in its own code (a
    syntax error, a module it imports that is not installed, an error as it runs): the error and
    its line."""
    monkeypatch.setattr(sys, 'path', list(sys.path))
    monkeypatch.setenv('PYTHONPATH', '')
    (tmp_path / 'json.py').write_text('')
    (tmp_path / 'unparsed.py').write_text('import torch\nif torch\n')
    (tmp_path / 'needs.py').write_text('import not_installed_xyz\n')
    (tmp_path / 'raises.py').write_text('x = 1\nundefined_here + x\n')
    spec, message = spec.format(tmp=tmp_path), message.format(tmp=tmp_path)
    proc = run_main(['tools/benchmarks/benchmark_operators.py', IMPORT_FLAG, spec], check=False)
    assert proc.returncode == 2 and f'benchmark_operators.py: error: {message}' in proc.stderr, proc.stderr
    assert 'Traceback' not in proc.stderr and not proc.stdout


@pytest.mark.parametrize(
    'name, code, line',
    [
        (
            'unparsed_member',
            'import torch\nif torch\n',
            "a module of your own does not parse: SyntaxError: expected ':'",
        ),
        (  # found, and failing inside: not a PYTHONPATH matter
            'needs_member',
            'import not_installed_xyz\n',
            "Failed to import needs_member: ModuleNotFoundError: No module named 'not_installed_xyz'",
        ),
        (
            'relative_member',
            'from .helpers import TAG\n',
            'Failed to import relative_member: ImportError: attempted relative import with no known parent '
            'package',
        ),
        (  # any other error as it runs: a traceback of 38 lines, status 1, before
            'raises_member',
            'x = 1\nundefined_here + x\n',
            "a module of your own failed as it was imported: NameError: name 'undefined_here' is not defined",
        ),
    ],
)
def test_a_config_importing_a_module_that_fails_is_one_line(tmp_path, monkeypatch, name, code, line) -> None:
    """``custom_imports`` of a module of one's own that fails in its own code (a syntax error, a
    module it imports that is not installed, a relative import in a file that is no package's, an
    error as it runs): mmengine imports it as the config is read; the error and its file and line,
    as ``--import`` says it, status 2, nothing made."""
    (tmp_path / f'{name}.py').write_text(code)
    config = tmp_path / 'config.py'
    config.write_text(
        f"_base_ = ['{REPO}/configs/timesformer_dna_demo.py']\n"
        f"custom_imports = dict(imports=['dna_mm', '{name}'], allow_failed_imports=False)\n"
    )
    monkeypatch.setattr(sys, 'path', [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, name, raising=False)
    proc = run_main(['tools/train.py', str(config), '--work-dir', str(tmp_path / 'work')], check=False)
    where = f'({tmp_path}/{name}.py, line {code.count(chr(10))})'
    assert proc.returncode == 2 and f'train.py: error: custom_imports: {line} {where}' in proc.stderr, (
        proc.stderr
    )
    assert 'PYTHONPATH' not in proc.stderr
    assert 'Traceback' not in proc.stderr and not (tmp_path / 'work').exists(), proc.stderr


def test_a_name_is_looked_up_and_an_unknown_one_names_the_choices() -> None:
    from dna_mm.errors import ConfigError
    from dna_mm.models.attention import DnAAttention, attention_class

    assert known_names('--attn', ['dna', 'DnAAttention'], attention_class) == [DnAAttention] * 2
    closest = r"^--attn dnaa: attention type 'dnaa' is not registered; did you mean DnAAttention / dna\? "
    closest += r"\(valid: .*dna"
    with pytest.raises(ConfigError, match=closest):
        known_names('--attn', ['dna', 'dnaa'], attention_class)


@pytest.mark.parametrize('tool', sorted(TOOLS))
def test_an_unknown_member_is_one_line_before_any_work(tool, tmp_path) -> None:
    """Every tool, the value and the registered members named, status 2, nothing made."""
    out = ['--work-dir', str(tmp_path / 'out')] if 'demo' in tool else []
    out = ['--out', str(tmp_path / 'out')] if 'study' in tool else out
    proc = run_main([tool, TOOLS[tool], 'dna', 'nope', *out], check=False)
    line = next((ln for ln in proc.stderr.splitlines() if ': error: ' in ln), proc.stderr)
    assert proc.returncode == 2 and f': error: {TOOLS[tool]} nope: ' in line, proc.stderr
    assert all(name in line for name in ('softmax', 'dna', 'diff', 'cog', 'DnAAttention')), line
    assert line.endswith(f'a member of your own: {IMPORT_FLAG} its module'), line
    assert 'Traceback' not in proc.stderr and not (tmp_path / 'out').exists()


# -- the tools, with the user's member ------------------------------------------------------------
@pytest.mark.integration
def test_the_demo_trains_and_tests_a_member_of_ones_own(own_member, tmp_path) -> None:
    """``demo.py --attn halfscale --import FILE``: tools/train.py and tools/test.py import it too."""
    cmd = ['tools/demos/demo.py', '--attn', SHORT, IMPORT_FLAG, str(own_member), '--epochs', '1']
    data = os.path.relpath(tmp_path / 'data', REPO)  # as the default, data/demo: relative to the checkout
    cmd += ['--data-root', data, '--work-dir', str(tmp_path / 'work')]
    out = run_tool([*cmd, '--cfg-options', *TINY], timeout=600).stdout
    assert f'custom_imports.imports=[dna_mm,{MODULE}]' in out, out[-3000:]
    assert f'[{SHORT}] Test results: top-1: ' in out and f'  {SHORT} top-1 ' in out, out[-3000:]
    saved = tmp_path / 'work' / SHORT / 'timesformer_dna_demo.py'
    assert f"attn_cfg='{SHORT}'" in saved.read_text()
    # the config the run saved tests its checkpoint from another folder (the clips found); its
    # member is imported by name: one line without its folder on PYTHONPATH, then it runs
    test = [
        sys.executable,
        str(REPO / 'tools/test.py'),
        str(saved),
        str(tmp_path / 'work' / SHORT / 'epoch_1.pth'),
    ]
    test += ['--work-dir', str(tmp_path / 't')]
    paths = [
        d for d in os.environ.get('PYTHONPATH', '').split(os.pathsep) if d and d != str(own_member.parent)
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    lost = subprocess.run(test, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert lost.returncode == 2 and 'Traceback' not in lost.stderr, lost.stderr[-3000:]
    assert f"custom_imports: Failed to import {MODULE} (No module named '{MODULE}')" in lost.stderr
    env['PYTHONPATH'] = os.pathsep.join([str(own_member.parent), *paths])
    again = subprocess.run(test, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and 'Test results: top-1: ' in again.stdout, again.stderr[-3000:]


@pytest.mark.integration
def test_the_study_compares_a_member_of_ones_own_to_dna(own_member, tmp_path) -> None:
    """The study's tiniest setting with the user's member beside DnA: trained, tested, evaluated
    in the study's process (its attention mass measured) and named in the table as it says."""
    out = tmp_path / 'study'
    cmd = ['tools/analysis/study.py', '--methods', SHORT, 'dna', '--reference', 'dna', '--seeds', '1']
    cmd += ['--epochs', '1', '--distractors', '2', '--likeness', 'demo', '--heldout-per-class', '1']
    cmd += [IMPORT_FLAG, str(own_member), '--data-root', str(tmp_path / 'demo'), '--out', str(out)]
    log = run_tool([*cmd, '--cfg-options', *TINY], timeout=900).stdout
    assert '[2/2] dna seed 0: top-1' in log, log[-3000:]
    study = json.loads((out / 'study.json').read_text())
    assert study['summary']['methods'] == [SHORT, 'dna']
    run = next(r for r in study['runs'] if r['method'] == SHORT)
    assert {s['name'] for s in run['sets']} == {'demo_test', 'demo_2'}
    assert {r['branch'] for r in run['sets'][0]['mass']} == {'attn'}  # its one map, measured
    table = (out / 'table.md').read_text()
    assert '| softmax at half scale |' in table and 'top-1 − DnA' in table, table


def test_the_attention_benchmark_measures_a_member_of_ones_own(own_member, tmp_path) -> None:
    md = tmp_path / 'attention.md'
    args = ['--methods', SHORT, 'dna_eager', IMPORT_FLAG, str(own_member), '--tiny', '--reps', '1']
    args += ['--device', 'cpu', '--shapes', 'temporal', 'vitdet_global', '--out', str(md)]
    run_main(['tools/benchmarks/benchmark_attention.py', *args])
    text = md.read_text()
    assert text.count('**cpu, ') == 2  # the core and module scopes
    assert text.count('| shape | softmax | dna_fast | dna_eager | halfscale | DnA eager / fast |') == 2, text
    assert text.count('| vitdet_global [1, 64, 64] + rel-pos bias | 1.00×') == 2, text


def test_a_fresh_process_of_the_attention_benchmark_imports_the_member(own_member) -> None:
    """CPU, real shapes: the time and the memory peak come from fresh processes, which import the
    user's module first."""
    from dna_mm.benchmarks import attention as bench

    (name,) = import_modules([str(own_member)])
    rows = bench.measure('cpu', 'temporal', [SHORT], 1, 'float32', 'core', 1, imports=(name,))
    assert rows[SHORT]['ms'] > 0 and rows[SHORT]['peak_mb'] >= 0


def test_the_operator_count_counts_a_member_of_ones_own(own_member, tmp_path) -> None:
    from dna_mm.benchmarks.operators import FOLDED, MODULES_ROUTE

    figures = tmp_path / 'operators.json'
    args = ['--attn', SHORT, IMPORT_FLAG, str(own_member), '--no-train-step', '--shape', '2', '9', '32']
    args += ['--heads', '2', '--json', str(figures)]
    proc = run_main(['tools/benchmarks/benchmark_operators.py', *args])
    assert f'| {TYPE} | ' in proc.stdout, proc.stdout
    rows = list(json.loads(figures.read_text())['module'])
    assert rows[0] == 'SoftmaxAttention' and TYPE in rows and 'DiffAttention' not in rows
    assert rows[-2:] == [MODULES_ROUTE, FOLDED]
