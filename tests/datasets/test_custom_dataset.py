"""tools/data/build_custom_dataset.py: a generated tree of real clips with class names that hold
blanks and non-ASCII letters, an empty class (an error naming it), an unreadable video (reported,
left out); the split, the recipe, resuming; (slow) then train, test, infer and a confusion matrix
on the written config, unchanged."""

from __future__ import annotations

import csv
import math
import pickle
import shutil
from pathlib import Path

import pytest
from conftest import REPO, load_tool, run_main
from mmaction.registry import DATASETS
from mmengine.config import Config

from dna_mm.apis.inference import collect_videos
from dna_mm.datasets.custom import read_source, size_recipe, stratified_split
from dna_mm.datasets.custom.source import Sample
from dna_mm.errors import DataError

build = load_tool('tools/data/build_custom_dataset.py')
DEMO_BASE = str(REPO / 'configs' / 'timesformer_dna_demo.py')
#: the demo's four motion classes, named as a user might
NAMES = ['still', 'left right', 'haut – bas', 'діагональ ↗']


@pytest.fixture
def tree(tiny_video_set, tmp_path) -> Path:
    """SRC/<class>/<clip n>.mp4, 3 clips a class (the demo clips, by their label), plus a broken
    'video' in the last class."""
    src = tmp_path / 'my videos'
    for line in [
        *(tiny_video_set / 'train.txt').read_text().splitlines(),
        *(tiny_video_set / 'test.txt').read_text().splitlines(),
    ]:
        path, label = line.rsplit(' ', 1)
        folder = src / NAMES[int(label)]
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(tiny_video_set / 'videos' / path, folder / f'clip {len(list(folder.iterdir())) + 1}.mp4')
    (src / NAMES[3] / 'broken clip.mp4').write_bytes(b'\x00' * 100)
    return src


def _lines(path: Path) -> list[tuple[str, int]]:
    return [
        (p, int(label))
        for p, label in (ln.rsplit(' ', 1) for ln in path.read_text(encoding='utf-8').splitlines())
    ]


def test_folder_to_lists_label_map_and_config(tree, tmp_path, capsys) -> None:
    out = tmp_path / 'built'
    (tree / 'empty class').mkdir()
    args = [str(tree), '--out', str(out), '--base', DEMO_BASE, '--load-from', 'none', '--workers', '1']
    with pytest.raises(SystemExit) as done:
        build.main(args)
    assert done.value.code == 2
    assert f'class folder {tree / "empty class"} holds no video' in capsys.readouterr().err
    (tree / 'empty class').rmdir()
    assert build.main(args) == 0
    printed = capsys.readouterr().out
    broken = tree / NAMES[3] / 'broken clip.mp4'
    assert 'checked 13 videos (0 from the last run): 1 unreadable' in printed
    assert f'  {broken}: ' in printed and (out / 'unreadable.txt').read_text(encoding='utf-8').startswith(
        f'{broken}\t'
    )
    assert (out / 'classes.txt').read_text(encoding='utf-8').splitlines() == sorted(NAMES)
    train, val = _lines(out / 'train.txt'), _lines(out / 'val.txt')
    assert not (out / 'test.txt').exists()
    assert len(train) == 8 and len(val) == 4 and not {p for p, _ in train} & {p for p, _ in val}
    assert sorted(label for _, label in val) == [0, 1, 2, 3]  # stratified: one of each class
    classes = sorted(NAMES)
    for path, label in train + val:
        assert path.split('/')[0] == classes[label] and 'broken' not in path
    # the lists as the dataset and tools/infer.py read them: paths with blanks, labels last
    dataset = DATASETS.build(
        dict(
            type='RobustVideoDataset',
            ann_file=str(out / 'train.txt'),
            data_prefix=dict(video=str(tree)),
            pipeline=[],
            num_classes=4,
        )
    )
    read = [dataset.get_data_info(i) for i in range(len(dataset))]
    assert [(d['filename'], d['label']) for d in read] == [(str(tree / p), i) for p, i in train]
    assert collect_videos(str(out / 'val.txt'), str(tree)) == [str(tree / p) for p, _ in val]
    cfg = Config.fromfile(str(out / 'config.py'))
    assert cfg.num_classes == cfg.model.cls_head.num_classes == 4
    assert cfg.model.backbone.pretrained is None and cfg.load_from is None  # --load-from none
    assert cfg.train_dataloader.dataset.ann_file == str((out / 'train.txt').resolve())
    assert cfg.test_dataloader.dataset.ann_file == str((out / 'val.txt').resolve())  # no test split
    assert cfg.train_dataloader.dataset.data_prefix.video == str(tree.resolve())
    assert (cfg.global_batch_size, cfg.train_dataloader.batch_size) == (8, 8)
    assert cfg.train_cfg.max_epochs == 100  # at least 1000 steps of 8 clips
    # the demo validates and saves at its end: so does the longer run
    assert cfg.train_cfg.val_interval == cfg.default_hooks.checkpoint.interval == 100
    warmup, cosine = cfg.param_scheduler  # the demo's, stretched: 5 warm-up epochs, then cosine
    assert (warmup.end, cosine.begin, cosine.T_max, cosine.end) == (5, 5, 95, 100)
    # again: the checks are reused, the split is the same
    assert build.main(args) == 0
    assert 'checked 13 videos (13 from the last run)' in capsys.readouterr().out
    assert _lines(out / 'val.txt') == val


def test_list_file_with_names_indices_and_splits(tmp_path) -> None:
    (tmp_path / 'a.csv').write_text('path,label\n"x, 1.mp4",cat\ny.mp4,dog\nz.mp4,cat\n', encoding='utf-8')
    source = read_source(str(tmp_path / 'a.csv'))
    assert source.classes == ['cat', 'dog'] and source.samples[0] == Sample('x, 1.mp4', 0)
    (tmp_path / 'b.txt').write_text('v/my clip.mp4 1\nw.mp4 0\nq.mp4,0,test\n')
    source = read_source(str(tmp_path / 'b.txt'))
    assert source.classes == ['0', '1'] and source.samples[0].path == 'v/my clip.mp4'
    assert source.samples[2] == Sample('q.mp4', 0, 'test')
    (tmp_path / 'c.txt').write_text('a.mp4 0\nb.mp4 2\n')
    with pytest.raises(DataError, match='class index 1 has no video'):
        read_source(str(tmp_path / 'c.txt'))
    (tmp_path / 'd.txt').write_text('a.mp4 0\nb.mp4 cat\n')
    with pytest.raises(DataError, match='d.txt:1: an index label among class names'):
        read_source(str(tmp_path / 'd.txt'))


def test_stratified_split_is_fixed_by_the_seed() -> None:
    samples = [Sample(f'{c}/{i}.mp4', c) for c in range(3) for i in range(10 * (c + 1))]
    splits, notes = stratified_split(samples, 0.2, 0.1, seed=0)
    again, _ = stratified_split(list(reversed(samples)), 0.2, 0.1, seed=0)
    assert splits == again and not notes
    for c in range(3):
        n = 10 * (c + 1)
        assert sum(s.label == c for s in splits['val']) == round(0.2 * n)
        assert sum(s.label == c for s in splits['test']) == round(0.1 * n)
    assert stratified_split(samples, 0.2, 0.1, seed=1)[0] != splits
    # a given split is kept, the rest split; a one-video class stays in train
    given = [Sample('t.mp4', 0, 'val'), Sample('only.mp4', 1), *samples[:5]]
    splits, notes = stratified_split(given, 0.2, 0.0, classes=['a', 'b'])
    assert splits['val'] == [Sample('t.mp4', 0, 'val')] and Sample('only.mp4', 1) in splits['train']
    assert notes == []


def test_recipe_is_sized_to_the_data() -> None:
    base = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_k400.py'))  # 64 clips, lr 0.005, 15 epochs
    big = size_recipe(base, 20000)
    assert (big.global_batch, big.batch_size, big.lr, big.epochs, big.warmup_epochs) == (64, 8, 0.005, 15, 1)
    milestones = next(s for s in big.param_scheduler if s['type'] == 'MultiStepLR')['milestones']
    assert milestones == [11, 14] and big.val_interval is big.checkpoint_interval is None  # every epoch
    small = size_recipe(base, 300)  # 300 / 32 < 10 steps an epoch: 16 (19 steps)
    assert (small.global_batch, small.lr) == (16, 0.005 * 16 / 64)
    assert small.epochs == math.ceil(1000 / math.ceil(300 / 16)) == 53 and small.warmup_epochs == 3
    assert next(s for s in small.param_scheduler if s['type'] == 'MultiStepLR')['milestones'] == [39, 49]


@pytest.mark.slow
def test_train_test_infer_and_confusion_matrix_on_the_built_config(tree, tmp_path) -> None:
    """The written config, unchanged, with tools/train.py (a tiny model for one epoch: the only
    command-line options), tools/test.py, tools/infer.py on the test list, and MMAction2's
    confusion-matrix script on the dumped predictions."""
    out = tmp_path / 'built'
    assert build.main([str(tree), '--out', str(out), '--base', DEMO_BASE, '--load-from', 'none']) == 0
    config, work = str(out / 'config.py'), tmp_path / 'work'
    tiny = [
        'model.backbone.embed_dims=32',
        'model.backbone.num_heads=2',
        'model.backbone.num_transformer_layers=1',
        'model.cls_head.in_channels=32',
        'train_cfg.max_epochs=1',
    ]
    run_main(['tools/train.py', config, '--work-dir', str(work), '--cfg-options', *tiny])
    ckpt = str(work / 'epoch_1.pth')
    test = run_main(
        ['tools/test.py', config, ckpt, '--dump', str(tmp_path / 'p.pkl'), '--cfg-options', *tiny[:4]]
    )
    assert 'Test results: top-1:' in test.stdout
    infer = run_main(
        [
            'tools/infer.py',
            config,
            ckpt,
            str(out / 'val.txt'),
            '--video-root',
            str(tree),
            '--out',
            str(tmp_path / 'p.csv'),
            '--cfg-options',
            *tiny[:4],
        ]
    )
    rows = list(csv.DictReader(open(tmp_path / 'p.csv', encoding='utf-8')))
    assert {r['class_name'] for r in rows} <= set(NAMES) and len({r['video'] for r in rows}) == 4
    assert infer.returncode == 0
    stock = Path(__import__('mmaction').__file__).parent / '.mim/tools/analysis_tools/confusion_matrix.py'
    run_main(
        [
            'dna_mm/launch.py',
            str(stock),
            config,
            str(tmp_path / 'p.pkl'),
            '--out',
            str(tmp_path / 'cm.pkl'),
            '--label-file',
            str(out / 'classes.txt'),
        ]
    )
    matrix = pickle.load(open(tmp_path / 'cm.pkl', 'rb'))
    assert tuple(matrix.shape) == (4, 4) and int(matrix.sum()) == 4
