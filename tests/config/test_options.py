"""``--cfg-options`` that would change nothing are caught before the run: a misspelt top-level
key, and a variable of the config file (its keys took its value when the file was read)."""

from __future__ import annotations

import logging

import pytest
from conftest import DEMO_CONFIG, run_main, tiny_run_options
from mmengine.logging import MMLogger

from dna_mm.config import read_config
from dna_mm.errors import ConfigError


class _Seen(logging.Handler):
    """The records logged while it is attached: ``(level, message)``."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))


@pytest.mark.parametrize(
    'option, message',
    [
        (
            {'train_cfgg.max_epochs': 1},
            "--cfg-options train_cfgg.max_epochs: 'train_cfgg' is not a key of the config, nor one that "
            "mmengine's runner or dna_mm reads; did you mean 'train_cfg'?",
        ),
        ({'lod_from': 'x.pth'}, "did you mean 'load_from'?"),  # a key the runner reads, not in the file
        (
            {'num_classes': 3},  # a variable of the demo file: the head and the datasets took 4
            "--cfg-options num_classes: 'num_classes' is a variable of the config file, used when the file "
            'was read: setting it changes nothing; set model.cls_head.num_classes / ',
        ),
        ({'max_epochs': 3}, 'changes nothing; set train_cfg.max_epochs instead'),
        (
            {'data_root': '/elsewhere'},  # the keys whose value it begins
            'changes nothing; set train_dataloader.dataset.ann_file / '
            'train_dataloader.dataset.data_prefix.video',
        ),
        (
            {'lr': 0.1},
            "'lr' is not a key of the config, nor one that mmengine's runner or dna_mm reads; set "
            'optim_wrapper.optimizer.lr instead',
        ),
    ],
)
def test_an_option_that_changes_nothing_names_what_was_meant(option, message) -> None:
    with pytest.raises(ConfigError) as err:
        read_config(DEMO_CONFIG, option)
    assert message in str(err.value)


def test_the_options_a_run_reads_are_merged_and_a_key_of_ones_own_is_only_noted() -> None:
    """Keys the runner or dna_mm read, new or not, parts of the config's dicts and list items
    are merged; a new key nothing reads and nothing resembles is merged with a note."""
    options = {
        'load_from': 'x.pth',  # not in the demo file: the runner reads it
        'resume': True,
        'find_unused_parameters': True,
        'label_map': 'classes.txt',
        'train_cfg.max_epochs': 2,
        'train_dataloader.dataset.pipeline.1.clip_len': 4,
        'my_own_setting': 7,
    }
    logger, seen = MMLogger.get_current_instance(), _Seen()
    logger.addHandler(seen)
    try:
        cfg = read_config(DEMO_CONFIG, options)
    finally:
        logger.removeHandler(seen)
    assert (cfg.load_from, cfg.resume, cfg.train_cfg.max_epochs, cfg.my_own_setting) == ('x.pth', True, 2, 7)
    assert cfg.train_dataloader.dataset.pipeline[1].clip_len == 4
    notes = [m for level, m in seen.records if '--cfg-options' in m and level == logging.WARNING]
    assert notes == [
        "--cfg-options my_own_setting: 'my_own_setting' is not a key of the config, nor one that "
        "mmengine's runner or dna_mm reads"
    ]


def test_train_refuses_a_misspelt_top_level_key_before_any_work(tiny_video_set, tmp_path) -> None:
    """Through the tool: one line, status 2, nothing written to the work dir."""
    work = tmp_path / 'work'
    args = ['tools/train.py', DEMO_CONFIG, '--work-dir', str(work), '--cfg-options']
    proc = run_main([*args, *tiny_run_options(tiny_video_set), 'train_cfgg.max_epochs=1'], check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith('train.py:')]
    assert ours[0].startswith("train.py: error: --cfg-options train_cfgg.max_epochs: 'train_cfgg' is not"), (
        ours
    )
    assert not any(p.suffix in ('.pth', '.py') for p in work.rglob('*'))
