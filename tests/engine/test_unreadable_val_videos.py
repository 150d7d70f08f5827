"""Validation during training skips an unreadable validation video (``UnreadableVideosValLoop``,
the runtime's ``val_cfg``): one warning naming it, the metric over the others with the count,
and the run goes on."""

from __future__ import annotations

import re

from conftest import DEMO_CONFIG, run_main, tiny_run_options


def test_an_unreadable_validation_video_is_skipped_and_named(tiny_video_set, tmp_path) -> None:
    videos = tmp_path / 'videos'
    videos.mkdir()
    for f in (tiny_video_set / 'videos').iterdir():
        (videos / f.name).symlink_to(f)
    (videos / 'truncated.mp4').write_bytes(b'\x00\x00\x00\x18ftypmp42' + bytes(range(256)) * 8)
    val = tmp_path / 'val.txt'
    val.write_text((tiny_video_set / 'test.txt').read_text() + 'truncated.mp4 1\n')
    opts = tiny_run_options(tiny_video_set, epochs=2) + [
        f'val_dataloader.dataset.ann_file={val}',
        f'val_dataloader.dataset.data_prefix.video={videos}',
        'train_cfg.val_interval=1',
    ]
    proc = run_main(
        ['tools/train.py', DEMO_CONFIG, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *opts]
    )
    log = proc.stdout + proc.stderr
    named = re.findall(rf'validation: skipped unreadable video {re.escape(str(videos))}/truncated\.mp4 ', log)
    assert len(named) == 1, log[-3000:]  # named once (mmengine drops a repeated warning)
    counts = re.findall(
        r'validation at epoch (\d), iteration \d+: metrics over 4 of 5 videos; 1 unreadable', log
    )
    assert counts == ['1', '2'], log[-3000:]  # each validation's count
    assert len(re.findall(r'Epoch\(val\) \[2\]\[\d+/\d+\].*acc/top1', log)) == 1, log[-3000:]
    assert 'Traceback' not in log
    assert (tmp_path / 'w' / 'epoch_2.pth').exists()
