"""tools/data/build_custom_dataset.py: a generated tree of real clips with class names that hold
blanks and non-ASCII letters, an empty class (an error naming it), an unreadable video (reported,
left out); the split, the recipe, resuming; (slow) then train, test, infer and a confusion matrix
on the written config, unchanged."""

from __future__ import annotations

import csv
import math
import pickle
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, load_tool, run_main, run_tool
from mmaction.registry import DATASETS
from mmengine.config import Config

from dna_mm.apis.inference import collect_videos
from dna_mm.errors import DataError, UserError
from dna_mm.preparation.custom import BuildRequest, build_dataset, read_source, size_recipe, stratified_split
from dna_mm.preparation.custom.recipe import base_values, pretrained_parts
from dna_mm.preparation.custom.source import Sample

build = load_tool('tools/data/build_custom_dataset.py')
DEMO_BASE = str(REPO / 'configs' / 'timesformer_dna_demo.py')
#: the demo's four motion classes, named as a user might
NAMES = ['still', 'left right', 'haut – bas', 'діагональ ↗']
#: --cfg-options making the demo base a tiny model trained for one epoch (the first four: the model)
TINY_DEMO = [
    'model.backbone.embed_dims=32',
    'model.backbone.num_heads=2',
    'model.backbone.num_transformer_layers=1',
    'model.cls_head.in_channels=32',
    'train_cfg.max_epochs=1',
]


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
    out = tmp_path / 'built lists'
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
    # the command it proposes runs as pasted: the folder's blank quoted
    proposed = next(line for line in printed.splitlines() if line.startswith('next: '))
    command = shlex.split(proposed.removeprefix('next: '))
    assert command == ['python', 'tools/train.py', str(out / 'config.py')]
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


@pytest.mark.parametrize('spelt', ['as given', 'through a link'])
@pytest.mark.parametrize('name', ['train.txt', 'test.txt', 'config.py'])
def test_an_out_where_the_build_would_write_over_an_input_is_refused(tree, tmp_path, name, spelt) -> None:
    """SRC as OUT/train.txt (written over) or OUT/test.txt (removed: the list of a split not
    written this time), --base as OUT/config.py: one line naming --out and the input, before any
    work, by any spelling of OUT; the input as it was, nothing written."""
    mine = tmp_path / 'mine'
    mine.mkdir()
    out = mine if spelt == 'as given' else tmp_path / 'link'
    if out != mine:
        out.symlink_to(mine)
    given = mine / name
    if name == 'config.py':
        given.write_text(f'_base_ = [{DEMO_BASE!r}]\n')
        src, base, what = str(tree), str(given), '--base config'
    else:
        given.write_text(''.join(f'{p},{p.parent.name}\n' for p in sorted(tree.rglob('clip *.mp4'))))
        src, base, what = str(given), DEMO_BASE, 'SRC list'
    before = given.read_text()
    proc = run_main(
        ['tools/data/build_custom_dataset.py', src, '--out', str(out), '--base', base, '--load-from', 'none'],
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == (
        f'build_custom_dataset.py: error: --out {out}: {out / name} is the {what} {given}: it would be '
        'overwritten; give another path'
    ), proc.stderr
    assert given.read_text() == before and [p.name for p in mine.iterdir()] == [name]
    request = BuildRequest(src=src, out=str(out), base=base, load_from='none')  # the package's route too
    with pytest.raises(UserError, match=f'is the {what} '):
        build_dataset(request, REPO, print)
    assert given.read_text() == before


@pytest.mark.parametrize('where', ['the source', 'above it', 'a class folder'])
def test_an_out_holding_source_videos_is_refused(tree, tmp_path, where) -> None:
    """An --out that is the source folder, holds it, or is one of its class folders: the build
    leaves out what lies under --out, so it would read no video (a class folder: would drop that
    class). One line naming --out, not "class folder ... holds no video"; nothing written. A new
    folder inside the source is fine."""
    out = {'the source': tree, 'above it': tmp_path, 'a class folder': tree / NAMES[0]}[where]
    before = sorted(tmp_path.rglob('*'))
    proc = run_main(
        [
            'tools/data/build_custom_dataset.py',
            str(tree),
            '--out',
            str(out),
            '--base',
            DEMO_BASE,
            '--load-from',
            'none',
        ],
        check=False,
    )
    lists = tree / 'lists'
    why = 'the build leaves out what lies under --out (where it writes), so it would read no video'
    line = {
        'the source': f'--out {out} is the source folder {tree}: {why}',
        'above it': f'--out {out} holds the source folder {tree}: {why}',
        'a class folder': (
            f'--out {out} holds 3 video(s) of the source folder {tree} (e.g. {out / "clip 1.mp4"}), which '
            'the build would leave out'
        ),
    }[where]
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == (
        f'build_custom_dataset.py: error: {line}; give a folder outside it (or a new one inside it, such '
        f'as {lists})'
    ), proc.stderr
    assert sorted(tmp_path.rglob('*')) == before
    assert build.main([str(tree), '--out', str(lists), '--base', DEMO_BASE, '--load-from', 'none']) == 0


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
    tiny = TINY_DEMO
    run_main(['tools/train.py', config, '--work-dir', str(work), '--cfg-options', *tiny])
    ckpt = str(work / 'epoch_1.pth')
    test = run_main(
        ['tools/test.py', config, ckpt, '--dump', str(tmp_path / 'p.pkl'), '--work-dir', str(work / 'test')]
        + ['--cfg-options', *tiny[:4]]
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


# -- clips shorter than the base's span; direction classes ------------------------------------


@pytest.fixture(scope='module')
def camera_moves(tmp_path_factory) -> Path:
    """SRC/<move>/clip n.mp4: pans left and right over a still picture, 35-47 frames a clip (the
    default base spans 8 x 32 = 256 frames), 3 clips a class."""
    from dna_mm.synthetic.videos import camera_move_clip, write_video

    src = tmp_path_factory.mktemp('moves') / 'camera moves'
    for c, move in enumerate(['pan left', 'pan right']):
        for i in range(3):
            frames = camera_move_clip(move, 64, 48, 35 + 6 * i + c, seed=i)
            write_video(src / move / f'clip {i}.mp4', frames, fps=8, codec='libx264')
    return src


def _frame_indices(dataset_cfg: dict, draws: int = 8) -> list[np.ndarray]:
    """The frame indices the dataset's pipeline samples (its steps up to SampleFrames, no
    decoding), ``draws`` times per video."""
    steps = list(dataset_cfg['pipeline'])
    upto = next(i for i, s in enumerate(steps) if s['type'] == 'SampleFrames') + 1
    dataset = DATASETS.build(dict(dataset_cfg, pipeline=steps[:upto]))
    return [dataset[i]['frame_inds'] for i in range(len(dataset)) for _ in range(draws)]


def test_clip_sampling_fits_short_clips_and_flip_can_go(camera_moves, tmp_path, capsys) -> None:
    out = tmp_path / 'built'
    args = [str(camera_moves), '--out', str(out), '--load-from', 'none', '--no-flip', '--workers', '1']
    assert build.main(args) == 0
    printed = capsys.readouterr().out
    assert (
        'clip sampling: 8 frames every 4 (the base: every 32), a span of 32 frames; the clips have '
        '35 frames at the shortest, 41.5 at the median'
    ) in printed
    assert 'horizontal flip: off (1 Flip step taken out of the training pipeline)' in printed
    cfg = Config.fromfile(str(out / 'config.py'))
    assert not any(step.type == 'Flip' for step in cfg.train_dataloader.dataset.pipeline)
    for split in ('train', 'val', 'test'):
        sample = next(s for s in cfg[f'{split}_dataloader'].dataset.pipeline if s.type == 'SampleFrames')
        assert (sample.clip_len, sample.frame_interval, sample.out_of_bound_opt) == (8, 4, 'repeat_last')
    for inds in _frame_indices(cfg.train_dataloader.dataset):
        assert len(inds) == 8 and np.all(np.diff(inds) > 0), inds  # in order, never wrapped
    # the base's sampling on the same clips wraps around and runs backwards
    base = Config.fromfile(str(REPO / 'configs' / 'timesformer_dna_k400.py'))
    stock = dict(cfg.train_dataloader.dataset, pipeline=base.train_dataloader.dataset.pipeline)
    assert any(np.any(np.diff(inds) < 0) for inds in _frame_indices(stock))


def test_from_scratch_on_the_default_base_clears_the_image_checkpoint(camera_moves, tmp_path, capsys) -> None:
    """The default base fine-tunes (its backbone loads the ImageNet DnA-ViT): from scratch, the
    path goes and the lr is SGD's from-scratch rule, not the fine-tuning lr scaled down."""
    out = tmp_path / 'built'
    assert build.main([str(camera_moves), '--out', str(out), '--load-from', 'none', '--workers', '1']) == 0
    printed = capsys.readouterr().out
    cfg = Config.fromfile(str(out / 'config.py'))
    assert cfg.model.backbone.pretrained is None and cfg.load_from is None
    assert "cleared: model.backbone.pretrained='checkpoints/dna_vit_base_patch16_224.pth'" in printed
    g = cfg.global_batch_size
    assert cfg.optim_wrapper.optimizer.lr == pytest.approx(0.1 * g / 256)
    assert (
        f'lr {0.1 * g / 256:g} (from scratch on a fine-tuning base (its lr 0.005): SGD 0.1 x {g} / 256)'
        in printed
    )
    assert cfg.auto_scale_lr.enable is False  # the global batch is the one answer
    assert any(step.type == 'Flip' for step in cfg.train_dataloader.dataset.pipeline)


def test_the_default_checkpoint_path_is_absolute(camera_moves, tmp_path) -> None:
    out = tmp_path / 'built'
    assert build.main([str(camera_moves), '--out', str(out), '--workers', '1']) == 0
    cfg = Config.fromfile(str(out / 'config.py'))
    assert cfg.model.backbone.pretrained == str(REPO / 'checkpoints' / 'timesformer_dna_k400.pth')


# -- every zoo base in configs/examples: a runnable config, or refused with the reason ----------

#: example -> --cfg-options making it tiny (None: the tool refuses the base, with these words)
ZOO_BASES = {
    'uniformerv2-b16_dna_k400.py': [
        'model.backbone.model.patch_size=32',
        'model.backbone.model.width=32',
        'model.backbone.model.layers=2',
        'model.backbone.model.heads=4',
        'model.backbone.model.return_list=[0,1]',
        'model.backbone.model.n_layers=2',
        'model.backbone.model.n_dim=32',
        'model.backbone.model.n_head=4',
        'model.backbone.model.mlp_dropout=[0.5,0.5]',
        'model.cls_head.in_channels=32',
    ],
    'mvit-s_dna_k400.py': [  # arch is a name ('small') in the base: the tiny one in a file, below
        'model.backbone.model.adaptive_kv_stride=[1,8,8]',
        'model.cls_head.in_channels=32',
    ],
    'swin-t_dna_k400.py': [  # arch is a name ('tiny') in the base: the tiny one in a file, below
        'model.backbone.model.out_indices=[1]',
        'model.cls_head.in_channels=32',
    ],
    'mmaction_timesformer_jointST_dna_k400.py': [
        'model.backbone.model.embed_dims=32',
        'model.backbone.model.num_heads=2',
        'model.backbone.model.num_transformer_layers=1',
        'model.backbone.model.transformer_layers.num_layers=1',
        'model.backbone.model.transformer_layers.transformerlayers.attn_cfgs.0.embed_dims=32',
        'model.backbone.model.transformer_layers.transformerlayers.attn_cfgs.0.num_heads=2',
        'model.backbone.model.transformer_layers.transformerlayers.ffn_cfgs.embed_dims=32',
        'model.backbone.model.transformer_layers.transformerlayers.ffn_cfgs.feedforward_channels=64',
        'model.cls_head.in_channels=32',
    ],
    'videomae_vit-b_dna_k400.py': None,
    'detr_r50_dna_coco.py': None,
    'mmpretrain_vit-b16_dna_in1k.py': None,
}
#: what --cfg-options cannot say (a dict where the base has a string): a file inheriting the config
TINY_FILES = {
    'mvit-s_dna_k400.py': 'model = dict(backbone=dict(model=dict(arch=dict(_delete_=True, embed_dims=16, '
    'num_layers=2, num_heads=1, downscale_indices=[1]))))\n',
    'swin-t_dna_k400.py': 'model = dict(backbone=dict(model=dict(arch=dict(_delete_=True, embed_dims=16, '
    'depths=[2, 2], num_heads=[2, 4]))))\n',
}
REFUSED = {
    'videomae_vit-b_dna_k400.py': 'the base config does not train (no train_dataloader or optim_wrapper',
    'detr_r50_dna_coco.py': "the base config trains on 'CocoDataset'",
    'mmpretrain_vit-b16_dna_in1k.py': "the base config trains on 'ImageNet'",
}


def test_every_example_is_covered() -> None:
    assert sorted(ZOO_BASES) == sorted(p.name for p in (REPO / 'configs' / 'examples').glob('*.py'))


def _pretrained_left(node, path='model') -> list[str]:
    """Every pretrained initialisation left in a model config."""
    if isinstance(node, (list, tuple)):
        return [x for i, v in enumerate(node) for x in _pretrained_left(v, f'{path}[{i}]')]
    if not isinstance(node, dict):
        return []
    left = []
    for key, value in node.items():
        if (key == 'pretrained' and value) or (key == 'clip_pretrained' and value):
            left.append(f'{path}.{key}')
        elif isinstance(value, dict) and value.get('type') == 'Pretrained':
            left.append(f'{path}.{key}')
        else:
            left += _pretrained_left(value, f'{path}.{key}')
    return left


@pytest.mark.parametrize('example', sorted(ZOO_BASES))
def test_zoo_bases_build_a_runnable_config_from_scratch(example, camera_moves, tmp_path, capsys) -> None:
    out, base = tmp_path / 'built', str(REPO / 'configs' / 'examples' / example)
    args = [str(camera_moves), '--out', str(out), '--base', base, '--load-from', 'none', '--workers', '1']
    if ZOO_BASES[example] is None:
        with pytest.raises(SystemExit) as done:
            build.main(args)
        assert done.value.code == 2 and REFUSED[example] in capsys.readouterr().err
        return
    assert build.main(args) == 0
    printed = capsys.readouterr().out
    cfg = Config.fromfile(str(out / 'config.py'))
    assert _pretrained_left(cfg.model) == [] and not cfg.get('load_from')
    optimizer, g, zoo = cfg.optim_wrapper.optimizer, cfg.global_batch_size, Config.fromfile(base)
    if pretrained_parts(zoo):  # a base that fine-tunes: the optimizer's from-scratch rule
        expected = {'SGD': 0.1 * g / 256, 'AdamW': 5e-4 * (g / 512) ** 0.5}[optimizer.type]
    else:  # a base that starts from scratch too (MViTv2's zoo recipe): its lr, scaled
        _, g0, lr0 = base_values(zoo)
        expected = lr0 * g / g0
    assert optimizer.lr == pytest.approx(expected)
    assert cfg.auto_scale_lr.enable is False
    steps = [
        s.type for split in ('train', 'val', 'test') for s in cfg[f'{split}_dataloader'].dataset.pipeline
    ]
    assert 'PytorchVideoWrapper' not in steps
    if example in ('uniformerv2-b16_dna_k400.py', 'mvit-s_dna_k400.py'):  # the zoo's RandAugment
        assert (
            'TorchVisionWrapper' in steps and "needs pytorchvideo, which dna_mm does not install" in printed
        )
    work, config = tmp_path / 'work', out / 'config.py'
    if example in TINY_FILES:
        config = tmp_path / 'tiny.py'
        config.write_text(f"_base_ = ['{out / 'config.py'}']\n" + TINY_FILES[example])
    tiny = [*ZOO_BASES[example], 'train_cfg.max_epochs=1', 'train_dataloader.num_workers=0']
    tiny.append('train_dataloader.persistent_workers=False')
    run_main(
        ['tools/train.py', str(config), '--work-dir', str(work), '--no-validate', '--cfg-options', *tiny]
    )
    assert (work / 'epoch_1.pth').is_file()


# -- the config a run saves, through every tool, each in a new process -------------------------


@pytest.mark.integration
def test_every_tool_runs_the_config_a_run_saved(tree, tmp_path) -> None:
    """The built config trained (a tiny model: the only options), then its saved copy
    ``work_dir/config.py`` given unchanged to every tool, each a new Python process: nothing is
    registered beforehand but what the tool imports (the saved config names GlobalBatchHook,
    DnARunner, the resumable loop, ...)."""
    out, work = tmp_path / 'built', tmp_path / 'work'
    assert build.main([str(tree), '--out', str(out), '--base', DEMO_BASE, '--load-from', 'none']) == 0
    tiny = TINY_DEMO
    run_tool(['tools/train.py', str(out / 'config.py'), '--work-dir', str(work), '--cfg-options', *tiny])
    saved = str(work / 'config.py')
    assert "type='GlobalBatchHook'" in (work / 'config.py').read_text()
    log = next(work.rglob('*.log')).read_text(encoding='utf-8')
    assert 'top1_acc' in log and 'top5' not in log  # 4 classes: no top-5 in training either
    resumed = run_tool(['tools/train.py', saved, '--resume', '--cfg-options', 'train_cfg.max_epochs=2'])
    assert 'epoch_1.pth' in resumed.stdout + resumed.stderr
    ckpt = str(work / 'epoch_2.pth')
    test = run_tool(['tools/test.py', saved, ckpt, '--confusion-matrix', str(tmp_path / 'cm.png')])
    assert 'Test results: top-1:' in test.stdout and 'top-5' not in test.stdout  # 4 classes
    matrix = list(csv.reader(open(tmp_path / 'cm.csv', encoding='utf-8')))
    assert matrix[0][1:] == sorted(NAMES) and sum(int(v) for row in matrix[1:] for v in row[1:]) == 4
    listed = str(out / 'val.txt')
    infer = run_tool(
        ['tools/infer.py', saved, ckpt, listed, '--video-root', str(tree), '--out', str(tmp_path / 'p.csv')]
    )
    assert 'top-1 on the 4 labelled videos:' in infer.stdout
    rows = list(csv.DictReader(open(tmp_path / 'p.csv', encoding='utf-8')))
    truth = {str(tree / p): sorted(NAMES)[label] for p, label in _lines(out / 'val.txt')}
    assert rows and all(r['true_name'] == truth[r['video']] for r in rows)
    run_tool(
        [
            'tools/extract_features.py',
            saved,
            ckpt,
            '--videos',
            listed,
            '--video-root',
            str(tree),
            '--out',
            str(tmp_path / 'f'),
        ]
    )
    assert len(list((tmp_path / 'f').rglob('*.npy'))) == 4
    run_tool(
        [
            'tools/analysis/analyze_attention.py',
            saved,
            ckpt,
            '--out',
            str(tmp_path / 'a'),
            '--analyses',
            'alpha',
            '--num-samples',
            '2',
        ]
    )
    assert (tmp_path / 'a' / 'analysis.json').is_file()
    clip = str(tree / NAMES[0] / 'clip 1.mp4')
    run_tool(['tools/analysis/relevance_maps.py', saved, ckpt, '--input', clip, '--out', str(tmp_path / 'r')])
    assert (tmp_path / 'r' / 'clip 1_relevance.png').is_file()
    flops = run_tool(['tools/analysis/get_flops.py', saved])
    assert 'GFLOPs' in flops.stdout
    run_tool(['tools/deployment/export_onnx.py', saved, ckpt, '--out', str(tmp_path / 'm.onnx')])
    assert (tmp_path / 'm.onnx').stat().st_size > 0


def test_base_by_package_name_reads_the_shipped_config(tmp_path) -> None:
    """``--base dna_mm::…`` is the shipped config, as ``--base FILE``; an unknown name is named."""
    from dna_mm.preparation.custom.build import load_base

    name, by_name = load_base('dna_mm::timesformer_dna_demo.py', tmp_path)
    path, by_file = load_base(DEMO_BASE, tmp_path)
    assert name == 'dna_mm::timesformer_dna_demo.py' and path == DEMO_BASE
    assert by_name.to_dict() == by_file.to_dict()
    with pytest.raises(FileNotFoundError, match='dna_mm::no_such.py: dna_mm ships no such config'):
        load_base('dna_mm::no_such.py', tmp_path)


@pytest.mark.parametrize('per_class', [6, 12])
def test_the_example_clips_hold_what_their_docstring_says(per_class, tmp_path) -> None:
    """tools/data/make_example_clips.py at its smallest and its default count: every clip, the
    truncated one beside the first class's clips, the empty one, the notes; the folder reads as
    the workflow reads it (the clips listed, the truncated and empty ones unreadable)."""
    out = tmp_path / 'clips'
    run_main(["tools/data/make_example_clips.py", str(out), "--per-class", str(per_class), "--size", "32x32"])
    videos = collect_videos(str(out))
    assert len(videos) == 6 * per_class + 2 and (out / 'tilt up' / 'notes.txt').is_file()
    assert len(list(out.glob('*/phone/*'))) == 6 * 2 and (out / 'zoom arrière').is_dir()
    for name, why in (
        ('pan left/clip 99 (truncated).mp4', 'without its index'),
        ('tilt up/clip 98 (empty).mp4', 'empty'),
    ):
        with pytest.raises(DataError, match=why):
            read_source_header(out / name)


def read_source_header(path: Path) -> None:
    """Open ``path`` as the workflow's check does (PyAV, the header)."""
    from dna_mm.datasets.transforms import video_size

    video_size(str(path))


@pytest.mark.parametrize(
    'tool, out, line',
    [
        ('make_example_clips.py', 'notes.txt', 'OUT {tmp}/notes.txt is a file, not a folder'),
        (
            'make_example_clips.py',
            'notes.txt/clips',
            "OUT {tmp}/notes.txt/clips cannot be made: Not a directory: '{tmp}/notes.txt/clips'",
        ),
        (
            'make_long_video.py',
            'notes.txt/long.mp4',
            'OUT {tmp}/notes.txt/long.mp4: {tmp}/notes.txt is a file, not a folder',
        ),
        (
            'make_long_video.py',
            'long.mp4',
            'OUT {tmp}/long.mp4 is a folder: give the path of the file to write',
        ),
    ],
    ids=['clips-a-file', 'clips-under-a-file', 'video-under-a-file', 'video-a-folder'],
)
def test_the_example_writers_refuse_an_out_they_cannot_write_in_one_line(tool, out, line, tmp_path) -> None:
    """The writers of example clips and of a long video: an OUT that cannot be written is one
    line naming it (status 2) before any video is made, not ``OSError``'s traceback."""
    (tmp_path / 'notes.txt').write_text('')
    (tmp_path / 'long.mp4').mkdir()
    size = ['--size', '32x32'] if tool == 'make_example_clips.py' else ['--size', '32', '--minutes', '0.01']
    proc = run_main([f'tools/data/{tool}', str(tmp_path / out), *size], check=False)
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == f'{tool}: error: ' + line.format(
        tmp=tmp_path
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ['long.mp4', 'notes.txt']
