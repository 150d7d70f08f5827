"""A config file that inherits is read as written or refused in one line: a variable of its
``_base_`` set anew without the keys that took its value (mmengine merges it after the base was
read: it would change nothing), a line that does not parse or run, a ``_base_`` that is not there.
``--cfg-options`` into a key of a variable dict are refused the same way, naming keys a run reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DEMO_CONFIG, REPO, run_main
from mmengine.config import Config

from dna_mm.config import read_config
from dna_mm.config.options import base_variable_problems, option_problems
from dna_mm.errors import ConfigError, MissingFileError

VITDET_DEMO = str(REPO / 'configs' / 'vitdet_dna_demo.py')
SHIPPED = sorted(p.relative_to(REPO).as_posix() for p in (REPO / 'configs').rglob('*.py'))


def _child(tmp_path: Path, *lines: str, base: str = DEMO_CONFIG, name: str = 'child.py') -> str:
    """A config file inheriting ``base`` (the demo), with ``lines`` after its ``_base_``."""
    path = tmp_path / name
    path.write_text('\n'.join([f'_base_ = [{base!r}]', *lines, '']))
    return str(path)


#: what follows a variable's name in the refusal of a child config
SETS = 'is a variable of its _base_, used when the base was read: setting'


@pytest.mark.parametrize(
    'line, message',
    [
        (
            'max_epochs = 1',
            f"'max_epochs' {SETS} it here changes nothing; set train_cfg.max_epochs in this file too",
        ),
        (
            'num_classes = 10',
            f"'num_classes' {SETS} it here changes nothing; set model.cls_head.num_classes / "
            'train_dataloader.dataset.num_classes / val_dataloader.dataset.num_classes (and 1 more) in this '
            'file too',
        ),
        (
            "data_root = '/nonexistent'",
            f"'data_root' {SETS} it here changes nothing; set train_dataloader.dataset.ann_file / "
            'train_dataloader.dataset.data_prefix.video / val_dataloader.dataset.ann_file (and 3 more) in '
            'this file too',
        ),
        (
            'loader = dict(batch_size=2)',  # a key of a variable dict
            f"'loader' {SETS} loader.batch_size here changes nothing; set train_dataloader.batch_size / "
            'val_dataloader.batch_size / test_dataloader.batch_size in this file too',
        ),
    ],
    ids=['max_epochs', 'num_classes', 'data_root', 'loader.batch_size'],
)
def test_a_child_that_changes_a_base_variable_alone_is_refused(tmp_path, line, message) -> None:
    child = _child(tmp_path, line)
    with pytest.raises(ConfigError) as err:
        read_config(child)
    assert str(err.value) == f'config {child}: {message}'


def test_a_child_that_sets_the_keys_with_its_variable_or_adds_its_own_is_read(tmp_path) -> None:
    """The variable and the keys set together (what the demo does over its own base), a new
    variable, a variable set to its base's value: read as written; the same variable alone is not."""
    kept = _child(
        tmp_path,
        'num_classes = 10',
        'model = dict(cls_head=dict(num_classes=num_classes))',
        'max_epochs = 2',
        'train_cfg = dict(max_epochs=max_epochs)',
        'my_own = 3',
        'clip_len = 8  # the base has 8',
    )
    cfg = read_config(kept)
    assert (cfg.model.cls_head.num_classes, cfg.train_cfg.max_epochs, cfg.my_own) == (10, 2, 3)
    alone = _child(tmp_path, 'num_classes = 10', 'my_own = 3', name='alone.py')
    with pytest.raises(ConfigError, match=f"^config {alone}: 'num_classes' is a variable of its _base_"):
        read_config(alone)


@pytest.mark.parametrize('path', SHIPPED)
def test_every_shipped_config_is_read_and_sets_no_base_variable_to_no_effect(path) -> None:
    cfg = read_config(REPO / path)
    assert base_variable_problems(str(REPO / path), cfg) == []


def test_the_tools_refuse_such_a_child_in_one_line_before_any_work(tmp_path) -> None:
    no_data = "train_dataloader = dict(dataset=dict(ann_file='/no/train.txt'))"  # before the fix: fast
    child = _child(tmp_path, 'max_epochs = 1', no_data)
    work = tmp_path / 'work'
    proc = run_main(['tools/train.py', child, '--work-dir', str(work)], check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours[0] == (
        f"train.py: error: config {child}: 'max_epochs' {SETS} it here changes nothing; set "
        'train_cfg.max_epochs in this file too'
    )
    assert not work.exists()


@pytest.mark.parametrize(
    'lines, message',
    [
        (
            ['model = dict(backbone=dict(num_heads=4,,))'],
            'line 2: SyntaxError: invalid syntax: model = dict(backbone=dict(num_heads=4,,))',
        ),
        (
            ['max_epochs = 2', 'num_classes = undefined_name'],
            "line 3: NameError: name 'undefined_name' is not defined",
        ),
    ],
    ids=['SyntaxError', 'NameError'],
)
def test_a_config_whose_python_fails_is_one_line_naming_its_file_and_line(tmp_path, lines, message) -> None:
    child = _child(tmp_path, *lines)
    with pytest.raises(ConfigError) as err:
        read_config(child)
    assert str(err.value) == f'config {child}, {message}'
    outer = _child(tmp_path, base=child, name='outer.py')  # the base's file and line, not the child's
    with pytest.raises(ConfigError) as err:
        read_config(outer)
    assert str(err.value) == f'config {child}, {message}'


def test_train_prints_a_syntax_error_in_a_config_as_one_line(tmp_path) -> None:
    child = _child(tmp_path, 'model = dict(backbone=dict(num_heads=4,,))')
    proc = run_main(['tools/train.py', child, '--work-dir', str(tmp_path / 'work')], check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours[0] == f'train.py: error: config {child}, line 2: SyntaxError: invalid syntax: ' + (
        'model = dict(backbone=dict(num_heads=4,,))'
    )


def test_a_missing_base_names_the_config_whose_base_it_is(tmp_path) -> None:
    missing = DEMO_CONFIG.replace('demo.py', 'demoo.py')
    child = _child(tmp_path, base=missing)
    with pytest.raises(MissingFileError) as err:
        read_config(child)
    assert str(err.value) == (
        f'config {child}: its _base_ {missing} does not exist (did you mean timesformer_dna_demo.py?)'
    )
    shipped = _child(tmp_path, base='dna_mm::timesformer_dna_demoo.py', name='shipped.py')
    with pytest.raises(
        MissingFileError, match=f'^config {shipped}: _base_ dna_mm::timesformer_dna_demoo.py: .*'
    ):
        read_config(shipped)


@pytest.mark.parametrize(
    'config, option, keys',
    [
        (DEMO_CONFIG, 'loader.batch_size', 'train_dataloader.batch_size / val_dataloader.batch_size / test_'),
        (
            VITDET_DEMO,
            'metainfo.classes',
            'train_dataloader.dataset.metainfo.classes / val_dataloader.dataset.',
        ),
    ],
    ids=['demo', 'vitdet_demo'],
)
def test_an_option_into_a_variable_dict_is_refused_naming_the_keys_a_run_reads(config, option, keys) -> None:
    """The demo's dataloaders took ``loader``'s batch size, the detection demo's datasets took
    ``metainfo``'s classes: a key of either, set alone, would change nothing."""
    top = option.split('.')[0]
    with pytest.raises(ConfigError) as err:
        read_config(config, {option: ['a', 'b', 'c', 'd'] if top == 'metainfo' else 2})
    assert str(err.value).startswith(
        f'--cfg-options {option}: {top!r} is a variable of the config file, used when the file was read: '
        f'setting a key of it changes nothing; set {keys}'
    )
    cfg = read_config(config, {'train_cfg.max_epochs': 1, 'model.backbone.num_heads': 2})  # real keys merge
    assert (cfg.train_cfg.max_epochs, cfg.model.backbone.num_heads) == (1, 2)


def test_the_keys_named_instead_of_a_variable_are_keys_a_run_reads_never_another_variable() -> None:
    """``data_root`` whose value only the variable ``dataset`` holds now (the dataloaders' paths
    set elsewhere): nothing a run reads to name; a note, not ``set dataset.data_prefix.video``."""
    cfg = Config(
        dict(
            data_root='/data',
            dataset=dict(data_prefix=dict(video='/data/videos')),
            train_dataloader=dict(
                dataset=dict(ann_file='/else/train.txt', data_prefix=dict(video='/else/videos'))
            ),
        )
    )
    errors, notes = option_problems(cfg, {'data_root': '/x'})
    assert errors == [] and notes == [
        "--cfg-options data_root: 'data_root' is a variable of the config file, used when the file was read: "
        'setting it changes nothing'
    ]
    cfg.train_dataloader.dataset.ann_file = '/data/train.txt'
    errors, _ = option_problems(cfg, {'data_root': '/x'})
    assert errors[0].endswith('set train_dataloader.dataset.ann_file instead')


@pytest.mark.parametrize(
    'name, line',
    [
        ('mmaction::nope.py', 'config mmaction::nope.py: not a zoo config mmengine reads (PACKAGE::'),
        ('nopkg::a/b.py', 'config nopkg::a/b.py: not a zoo config mmengine reads: mmengine does not support'),
        ('mmaction::recognition/nope.py', 'config mmaction::recognition/nope.py: file "'),
    ],
)
def test_a_zoo_name_mmengine_cannot_read_is_one_line(name: str, line: str) -> None:
    """``tools/train.py mmaction::nope.py`` (no folder), an unknown package, a file the package
    does not have: mmengine's ``ValueError`` / ``AssertionError`` / ``FileNotFoundError`` tracebacks
    before; one line naming the name and the form a zoo name takes."""
    proc = run_main(['tools/train.py', name], check=False)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py: error:')]
    assert proc.returncode == 2 and len(errors) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert errors[0].removeprefix('train.py: error: ').startswith(line), errors[0]
