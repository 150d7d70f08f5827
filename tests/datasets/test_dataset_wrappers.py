"""mmengine's dataset wrappers around dna_mm's robust datasets: ``ClassBalancedDataset``
oversamples by the list's labels; an unreadable video inside a ``ConcatDataset`` is skipped in
validation and listed, or skipped with ``--skip-unreadable``, in a test, as in a dataset of its
own."""

from __future__ import annotations

import shutil

from conftest import DEMO_CONFIG, run_main, tiny_run_options


def _child(tmp_path, root, videos) -> str:
    """The demo config trained class-balanced, validated and tested on two lists, the second
    one's videos from ``videos``."""
    config = tmp_path / 'wrapped.py'
    config.write_text(
        f"""_base_ = [{DEMO_CONFIG!r}]
train_dataloader = dict(dataset=dict(_delete_=True, type='ClassBalancedDataset', oversample_thr=0.5,
    dataset=dict(_base_.train_dataloader.dataset, ann_file='{root}/train.txt',
                 data_prefix=dict(video='{root}/videos'))))
lists = [dict(_base_.test_dataloader.dataset, ann_file='{root}/test.txt', data_prefix=dict(video=v))
         for v in ('{root}/videos', '{videos}')]
val_dataloader = dict(dataset=dict(_delete_=True, type='ConcatDataset', datasets=lists))
test_dataloader = dict(dataset=dict(_delete_=True, type='ConcatDataset', datasets=lists))
"""
    )
    return str(config)


def test_wrapped_datasets_balance_classes_and_skip_or_list_unreadable_videos(
    tiny_video_set, tmp_path
) -> None:
    videos = tmp_path / 'videos'
    shutil.copytree(tiny_video_set / 'videos', videos)
    broken = (tiny_video_set / 'test.txt').read_text().split()[0]
    (videos / broken).write_bytes(b'\x00not a video' * 64)
    config = _child(tmp_path, tiny_video_set, videos)
    model = [
        o for o in tiny_run_options(tiny_video_set) if o.split('_', 1)[0] not in ('train', 'val', 'test')
    ]
    opts = ['--cfg-options', *model, 'train_cfg.max_epochs=1', 'train_cfg.val_interval=1']
    proc = run_main(['tools/train.py', config, '--work-dir', str(tmp_path / 'w'), *opts])
    log = proc.stdout + proc.stderr
    assert f'validation: skipped unreadable video {videos / broken}' in log, log[-3000:]
    assert 'metrics over 7 of 8 videos; 1 unreadable video(s) skipped' in log
    test = ['tools/test.py', config, str(tmp_path / 'w/epoch_1.pth'), '--work-dir', str(tmp_path / 't')]
    proc = run_main([*test, *opts], check=False)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert '1 of the 8 test videos cannot be read; no metric computed' in proc.stderr
    proc = run_main([*test, '--skip-unreadable', *opts])
    assert '(1 unreadable videos skipped: metrics over 7 of 8)' in proc.stdout, proc.stdout[-3000:]
