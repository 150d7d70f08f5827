"""Your own videos, round two: the written config reads with the reader the build checked the
videos with (an index-less .mkv decord cannot open); the decoding check holds readers to the
upright picture (rotation metadata); a folder split into train/ and test/ gets a validation
set, with a note. Real clips written here with PyAV."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest
from conftest import REPO, load_tool
from mmengine.config import Config
from mmengine.dataset import Compose

from dna_mm.datasets.video_reader import KeyframeReader, frames_in_sequence
from dna_mm.preparation.custom import stratified_split
from dna_mm.preparation.custom.pipelines import read_with_pyav
from dna_mm.preparation.custom.source import Sample
from dna_mm.preparation.decoding_check import report

build = load_tool('tools/data/build_custom_dataset.py')
DEMO_BASE = str(REPO / 'configs' / 'timesformer_dna_demo.py')


def frames(n: int, width: int = 64, height: int = 48, seed: int = 0):
    rng = np.random.default_rng(seed)
    for t in range(n):
        img = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
        img[:8, :16] = 255  # a corner that shows which way the picture is turned
        x = (3 * t) % (width - 8)
        img[20:28, x : x + 8] = (220, 30, 30)
        yield img


class Unseekable(io.RawIOBase):
    """A write-only byte sink that cannot seek, as a pipe: Matroska is then written without
    its index (no Cues, no duration), as a phone app or a live capture writes it."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, b) -> int:
        self.data += bytes(b)
        return len(b)


def write(
    path: Path,
    n: int,
    codec: str = 'mpeg4',
    rotation: int = 0,
    container: str | None = None,
    fps: int = 25,
    size: tuple[int, int] = (64, 48),
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sink = Unseekable() if container == 'pipe' else None
    with av.open(sink if sink is not None else str(path), 'w', format='matroska' if sink else None) as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = *size, 'yuv420p'
        if rotation:
            stream.set_display_rotation(rotation)
        for img in frames(n, *size):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format='rgb24')))
        out.mux(stream.encode())
    if sink is not None:
        path.write_bytes(bytes(sink.data))
    return path


def test_the_decoding_check_holds_readers_to_the_upright_picture(tmp_path) -> None:
    """A clip with a 90-degree display matrix: both readers return it upright, as FFmpeg shows
    it, and the check calls them exact (it called every such clip wrong)."""
    path = write(tmp_path / 'portrait.mp4', 12, rotation=90, size=(320, 240))  # decord: >= 192 wide
    _, reference = frames_in_sequence(str(path))
    assert reference[0].shape == (320, 240, 3)  # upright: the stored 320x240 turned
    np.testing.assert_array_equal(KeyframeReader(str(path)).get_batch([0])[0], reference[0])
    table, exact = report([path], ('dna_mm', 'decord'))
    assert exact, table
    assert table.splitlines()[-1].endswith('| exact | exact |'), table


def test_the_written_config_reads_an_index_less_mkv_as_the_build_did(tmp_path, capsys) -> None:
    src = tmp_path / 'clips'
    for name in ('left', 'right'):
        for i in range(3):
            write(src / name / f'clip {i}.mkv', 24, container='pipe')
            write(src / name / f'clip {i}.mp4', 24)
    out = tmp_path / 'built'
    assert build.main([str(src), '--out', str(out), '--base', DEMO_BASE, '--load-from', 'none']) == 0
    printed = capsys.readouterr().out
    assert 'checked 12 videos (0 from the last run): 0 unreadable' in printed
    assert "decoding: dna_mm's PyAV reader, the one the videos were checked with" in printed
    cfg = Config.fromfile(str(out / 'config.py'))
    for split in ('train', 'val', 'test'):
        steps = [s.type for s in cfg[f'{split}_dataloader'].dataset.pipeline]
        assert steps[:3] == ['ScaledPyAVInit', 'SampleFrames', 'SortedDecordDecode'], steps
    mkv = str(src / 'left' / 'clip 0.mkv')
    with av.open(mkv) as container:
        assert container.duration is None or container.streams.video[0].frames == 0  # no index
    packed = Compose(cfg.test_dataloader.dataset.pipeline)(
        dict(filename=mkv, label=0, start_index=0, modality='RGB')
    )
    assert tuple(packed['inputs'].shape) == (1, 3, 8, 32, 32)


def test_read_with_pyav_keeps_the_arguments() -> None:
    pipelines = {
        'train': [dict(type='DecordInit', io_backend='disk', num_threads=2), dict(type='SampleFrames'),
                  dict(type='DecordDecode', mode='efficient')],
        'test': [dict(type='ScaledDecordInit', short_side=224), dict(type='SortedDecordDecode')],
    }  # fmt: skip
    assert read_with_pyav(pipelines) == 3
    assert pipelines['train'][0] == dict(type='ScaledPyAVInit', io_backend='disk', num_threads=2)
    assert pipelines['train'][2] == dict(type='SortedDecordDecode')
    assert pipelines['test'][0] == dict(type='ScaledPyAVInit', short_side=224)


def test_a_folder_split_into_train_and_test_gets_a_validation_set() -> None:
    samples = [Sample(f'train/{c}/{i}.mp4', c, 'train') for c in range(2) for i in range(10)]
    samples += [Sample(f'test/{c}/{i}.mp4', c, 'test') for c in range(2) for i in range(3)]
    splits, notes = stratified_split(samples, 0.2, 0.0)
    assert sorted(splits) == ['test', 'train', 'val']
    assert [sum(s.label == c for s in splits['val']) for c in range(2)] == [2, 2]
    assert len(splits['train']) == 16 and len(splits['test']) == 6
    assert notes == ['no val folder: val drawn from the train folder (20 % of each class, --val-ratio)']
    assert not {s.path for s in splits['val']} & {s.path for s in splits['train']}


def test_a_given_val_folder_is_kept() -> None:
    samples = [Sample(f'train/{i}.mp4', 0, 'train') for i in range(10)] + [Sample('val/0.mp4', 0, 'val')]
    splits, notes = stratified_split(samples, 0.2, 0.0)
    assert splits['val'] == [Sample('val/0.mp4', 0, 'val')] and len(splits['train']) == 10 and not notes


def test_a_csv_list_is_a_list_not_a_video(tmp_path) -> None:
    from dna_mm.apis.inference import collect_labelled_videos

    for name in ('a.mp4', 'b c.mp4'):
        write(tmp_path / name, 4)
    (tmp_path / 'list.csv').write_text('path,label\na.mp4,2\n"b c.mp4",pouring\n', encoding='utf-8')
    assert collect_labelled_videos(str(tmp_path / 'list.csv')) == {
        str(tmp_path / 'a.mp4'): 2,
        str(tmp_path / 'b c.mp4'): None,
    }


def test_mixed_frame_rates_are_said_and_sampled_by_time_on_request(tmp_path, capsys) -> None:
    src = tmp_path / 'mixed'
    for name in ('a', 'b'):
        for i in range(3):
            write(src / name / f'{i} phone.mp4', 60, fps=60)
            write(src / name / f'{i} camera.mp4', 25, fps=25)
    out = tmp_path / 'built'
    args = [str(src), '--out', str(out), '--base', DEMO_BASE, '--load-from', 'none', '--workers', '1']
    assert build.main(args) == 0
    printed = capsys.readouterr().out
    assert (
        'note: the clips mix frame rates (25-60 fps): 8 frames every 2 are 0.64 s of a 25 fps clip' in printed
    )
    assert '--sample-by-time samples every' in printed
    assert build.main([*args, '--sample-by-time']) == 0
    printed = capsys.readouterr().out
    assert 'clip sampling by time: 8 frames every' in printed
    cfg = Config.fromfile(str(out / 'config.py'))
    step = cfg.test_dataloader.dataset.pipeline[1]
    assert step.type == 'SampleFramesBySeconds' and 'frame_interval' not in step
    pipeline = Compose(cfg.test_dataloader.dataset.pipeline[:3])
    spans = {}
    for name in ('0 phone.mp4', '0 camera.mp4'):
        got = pipeline(dict(filename=str(src / 'a' / name), label=0, start_index=0, modality='RGB'))
        spans[name] = (got['frame_inds'][-1] - got['frame_inds'][0]) / got['avg_fps']
    assert spans['0 phone.mp4'] == pytest.approx(spans['0 camera.mp4'], abs=0.03)  # the same seconds
