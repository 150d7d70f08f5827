"""configs/imagenet/: the paper's ImageNet recipe as configs, and the chain they start, at tiny
scale with no conversion by hand: a generated image set in ImageNet's folder layout, a tiny
DnA-ViT trained and tested on it through tools/train.py / tools/test.py, its checkpoint given as
``model.backbone.pretrained`` of the Kinetics-400 TimeSformer-DnA config trained and tested on
the demo clips, that model fine-tuned and tested with the NTU RGB+D 60
config on an X-Sub split the NTU tool writes, the ImageNet file as ViTDet-DnA's ``init_cfg``, as
timm's model (equal outputs), through the ONNX export and the analyses, and on ImageNet-A / -R /
-O sets in their layouts; each load's report is asserted."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, WNIDS, lists_of_another_label_set, run_main, tiny_imagenet_options
from mmengine.config import Config
from tolerance import REORDERED, assert_close_as

IMAGENET = REPO / 'configs' / 'imagenet'


def test_the_recipe_is_the_papers_table() -> None:
    """Table "supp_imnet_hp", value by value (the DnA ViT-B/16 config)."""
    cfg = Config.fromfile(str(IMAGENET / 'dna_vit-b16_in1k.py'))
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.eps, opt.weight_decay) == ('AdamW', 1e-3, 1e-8, 0.075)
    assert cfg.global_batch_size == 1024 and cfg.train_cfg.max_epochs == 300
    warmup, cosine = cfg.param_scheduler
    assert warmup.end == cosine.begin == 5 and warmup.start_factor * opt.lr == pytest.approx(1e-6)
    assert (cosine.eta_min, cosine.end, cosine.T_max) == (1e-5, 300, 295)
    assert cfg.model.backbone.model_name == 'dna_vit_base_patch16_224'
    assert cfg.model.backbone.drop_path_rate == 0.15
    assert cfg.model.head.loss.label_smooth_val == 0.1
    assert [(a.type, a.alpha) for a in cfg.model.train_cfg.augments] == [('Mixup', 0.8), ('CutMix', 1.0)]
    crop, flip, randaug, erase, _ = cfg.train_dataloader.dataset.pipeline[1:]
    assert (crop.scale, crop.crop_ratio_range, crop.aspect_ratio_range) == (224, (0.08, 1.0), (0.67, 1.5))
    assert (randaug.magnitude_level, randaug.magnitude_std, randaug.num_policies) == (9, 0.5, 2)
    assert flip.prob == 0.5 and erase.erase_prob == 0.25
    resize, centre = cfg.test_dataloader.dataset.pipeline[1:3]
    assert (resize.scale, centre.crop_size) == (int(224 / 0.9), 224)  # crop ratio 0.9


@pytest.mark.parametrize(
    'config, attention',
    [
        ('dna_vit-b16_in1k.py', 'qpm_vpm'),
        ('dna_vit-b16_apm_in1k.py', 'apm'),
        ('dna_vit-b16_apm_alpha_in1k.py', 'apm_alpha'),
        ('dna_vit-b16_qpm_v_in1k.py', 'qpm_v'),
        ('dna_vit-b16_q_vpm_in1k.py', 'q_vpm'),
        ('vit-b16_softmax_in1k.py', None),
        ('vit-b16_diff_in1k.py', 'diff'),
        ('vit-b16_cog_in1k.py', 'cog'),
        ('dna_vit-t16_in1k.py', 'qpm_vpm'),
        ('vit-t16_softmax_in1k.py', None),
    ],
)
def test_every_image_config_names_its_attention(config: str, attention: str | None) -> None:
    cfg = Config.fromfile(str(IMAGENET / config))
    backbone = cfg.model.backbone
    if backbone.type == 'with_attention':
        assert backbone.attn_cfg == attention and backbone.model.model_name == 'vit_base_patch16_224'
    elif attention is None:
        assert not backbone.model_name.startswith('dna_')
    else:
        assert backbone.model_name.startswith('dna_vit_')
        assert (backbone.get('attn_cfg') or {}).get('variant', 'qpm_vpm') == attention
    tiny = '-t16' in config
    assert cfg.train_cfg.max_epochs == (100 if tiny else 300)
    assert cfg.model.head.in_channels == (192 if tiny else 768)


@pytest.fixture
def image_folders(tmp_path) -> Path:
    """ImageNet's layout, 4 classes named by WordNet ids: train/<wnid>/*.JPEG (8 each),
    val/<wnid>/*.JPEG (3 each); each class its own colour, with noise."""
    import cv2

    rng = np.random.default_rng(0)
    root = tmp_path / 'imagenet'
    for split, n in (('train', 8), ('val', 3)):
        for c, wnid in enumerate(WNIDS):
            (root / split / wnid).mkdir(parents=True)
            for i in range(n):
                img = np.full((40, 48, 3), 40.0)
                img[..., c % 3] = 200 if c < 3 else 120
                img += rng.normal(0, 20, img.shape)
                cv2.imwrite(str(root / split / wnid / f'{wnid}_{i}.JPEG'), img.clip(0, 255).astype(np.uint8))
    return root


def _tiny_video(pretrained: str, lists: dict, videos: Path) -> list[str]:
    """``--cfg-options`` making a TimeSformer-B config (the video_8x32 pipelines) a 2-block model of
    the tiny image model's widths on 32-pixel crops, 8 frames every 2, reading ``lists``."""
    sizes = {
        'train': ['0.short_side=40', '3.scale_range=(32,40)', '4.size=32'],
        'val': ['0.short_side=32', '3.scale=(-1,32)', '4.crop_size=32'],
        'test': ['0.short_side=32', '3.scale=(-1,32)', '4.crop_size=32'],
    }
    opts = [
        f'model.backbone.pretrained={pretrained}',
        'model.backbone.img_size=32',
        'model.backbone.patch_size=8',
        'model.backbone.embed_dims=192',
        'model.backbone.num_heads=3',
        'model.backbone.num_transformer_layers=2',
        'model.cls_head.in_channels=192',
        'train_cfg.max_epochs=1',
    ]
    for split, ann in lists.items():
        opts += [
            f'{split}_dataloader.dataset.ann_file={ann}',
            f'{split}_dataloader.dataset.data_prefix.video={videos}',
        ]
        opts += [
            f'{split}_dataloader.{k}' for k in ('batch_size=2', 'num_workers=0', 'persistent_workers=False')
        ]
        opts += [f'{split}_dataloader.dataset.pipeline.1.frame_interval=2']
        opts += [f'{split}_dataloader.dataset.pipeline.{o}' for o in sizes[split]]
    return opts


def _report(text: str, filename: str) -> str:
    """The load report ``load_pretrained`` logged for ``filename`` (its first line and details)."""
    start = text.index(f'loaded {filename} into ')
    lines = text[start:].splitlines()
    return '\n'.join([lines[0], *[ln for ln in lines[1:] if ln.startswith('  ')][:4]])


def test_imagenet_checkpoint_starts_the_video_and_detection_models(
    image_folders, tiny_video_set, tmp_path
) -> None:
    config = str(IMAGENET / 'dna_vit-t16_in1k.py')
    work = tmp_path / 'imagenet'
    run_main(
        ['tools/train.py', config, '--work-dir', str(work), '--global-batch', '8']
        + ['--cfg-options', *tiny_imagenet_options(image_folders, train=True)]
    )
    ckpt = str(work / 'epoch_1.pth')
    test = run_main(
        ['tools/test.py', config, ckpt, '--work-dir', str(work / 'test')]
        + ['--cfg-options', *tiny_imagenet_options(image_folders, train=False)]
    )
    assert re.search(
        r'Test results: top-1: \d+\.\d\d$', test.stdout.strip().splitlines()[-1]
    )  # 4 classes: no top-5

    # link 2: the checkpoint as it is, as the backbone's `pretrained` of the Kinetics-400
    # TimeSformer-DnA config (tiny: the image model's widths, 32-pixel crops of the demo clips)
    video = tmp_path / 'video'
    k400 = str(REPO / 'configs' / 'timesformer_dna_k400.py')
    k400_lists = lists_of_another_label_set(tiny_video_set, tmp_path / 'k400_lists')  # as MMAction2's
    lists = {
        'train': k400_lists / 'train.txt',
        'val': k400_lists / 'test.txt',
        'test': k400_lists / 'test.txt',
    }
    opts = _tiny_video(ckpt, lists, tiny_video_set / 'videos')
    train = run_main(
        ['tools/train.py', k400, '--work-dir', str(video), '--global-batch', 'none', '--cfg-options', *opts]
    )
    report = _report(train.stdout + train.stderr, ckpt)
    assert 'into DnATimeSformer (layout: timm_vit' in report
    assert 'generated 0 negative-branch tensors; missing 0; unexpected 0' in report  # a DnA image model
    assert 'not in an image model, kept at init: time_embed, ' in report and 'temporal_fc' in report
    test = ['tools/test.py', k400, str(video / 'epoch_1.pth'), '--work-dir', str(video / 'test')]
    test = run_main([*test, '--cfg-options', *opts])
    assert 'Test results: top-1:' in test.stdout

    # link 2b: that video model fine-tuned on an NTU-style split (X-Sub lists written by the NTU
    # tool from NTU file names; the demo clips as actions A001-A004), then tested
    import shutil

    ntu = tmp_path / 'ntu'
    (ntu / 'videos').mkdir(parents=True)
    for split, performer in (('train', 1), ('test', 3)):  # X-Sub: performer 1 trains, 3 tests
        for n, line in enumerate((tiny_video_set / f'{split}.txt').read_text().splitlines()):
            path, label = line.rsplit(' ', 1)
            name = f'S001C001P{performer:03d}R{n + 1:03d}A{int(label) + 1:03d}_rgb.avi'
            shutil.copy(tiny_video_set / 'videos' / path, ntu / 'videos' / name)
    run_main(
        ['tools/data/ntu60/build_annotations.py', '--video-dir', str(ntu / 'videos')]
        + ['--out-dir', str(ntu / 'xsub'), '--protocol', 'xsub']
    )
    xsub = {
        'train': ntu / 'xsub' / 'train.txt',
        'val': ntu / 'xsub' / 'test.txt',
        'test': ntu / 'xsub' / 'test.txt',
    }
    ntu_opts = _tiny_video(str(video / 'epoch_1.pth'), xsub, ntu / 'videos')
    ntu_config = str(REPO / 'configs' / 'timesformer_dna_ntu60.py')
    train = run_main(
        [
            'tools/train.py',
            ntu_config,
            '--work-dir',
            str(ntu / 'work'),
            '--global-batch',
            'none',
            '--cfg-options',
            *ntu_opts,
        ]
    )
    report = _report(train.stdout + train.stderr, str(video / 'epoch_1.pth'))
    assert 'into DnATimeSformer (layout: timesformer' in report  # the video recognizer's checkpoint
    assert 'generated 0 negative-branch tensors; missing 0; unexpected 0' in report
    test = run_main(
        ['tools/test.py', ntu_config, str(ntu / 'work' / 'epoch_1.pth'), '--work-dir', str(ntu / 'test')]
        + ['--cfg-options', *ntu_opts]
    )
    assert 'Test results: top-1:' in test.stdout

    # link 3: the same file as ViTDet-DnA's init_cfg (the COCO config's backbone, tiny)
    from mmengine.logging import MMLogger
    from mmengine.registry import MODELS, init_default_scope

    init_default_scope('mmdet')
    backbone = Config.fromfile(str(REPO / 'configs' / 'vitdet_dna_coco.py')).model.backbone
    backbone.update(embed_dim=192, depth=2, num_heads=3, patch_size=8, img_size=64, pretrain_img_size=32)
    backbone.init_cfg = dict(type='Pretrained', checkpoint=ckpt)
    logged: list[str] = []
    logger = MMLogger.get_current_instance()
    handler = __import__('logging').Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    logger.addHandler(handler)
    try:
        MODELS.build(backbone).init_weights()
    finally:
        logger.removeHandler(handler)
    report = _report('\n'.join(logged), ckpt)
    assert 'into ViTDet (layout: ' in report and 'generated 0 negative-branch tensors' in report
    assert 'unexpected 0' in report

    # link 4: the same file as timm's dna_vit_tiny_patch16_224 (pretrained_cfg_overlay), equal to
    # the MMPretrain classifier it was saved from; and through the analysis and export tools
    import timm
    import torch

    from dna_mm.checkpoint import load_whole_model

    init_default_scope('mmpretrain')
    cfg = Config.fromfile(config)
    parser_opts = dict(
        o.split('=', 1) for o in tiny_imagenet_options(image_folders, train=False) if o.startswith('model.')
    )
    cfg.merge_from_dict({k: int(v) for k, v in parser_opts.items()})
    classifier = MODELS.build(cfg.model).eval()
    load_whole_model(classifier, ckpt)
    arch = dict(num_classes=4, img_size=32, patch_size=8, depth=2)
    overlay = dict(file=ckpt, num_classes=4)  # the file's classes (timm drops a head of another size)
    vit = timm.create_model(
        'dna_vit_tiny_patch16_224', pretrained=True, pretrained_cfg_overlay=overlay, **arch
    ).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = classifier(x, mode='tensor')
        assert_close_as(vit(x), expected, ulps=REORDERED)
    model_args = [f'{k}={v}' for k, v in arch.items()]
    run_main(
        [
            'tools/deployment/export_onnx.py',
            'timm:dna_vit_tiny_patch16_224',
            ckpt,
            '--out',
            str(tmp_path / 'vit.onnx'),
        ]
        + ['--cfg-options', *model_args]
    )
    assert (tmp_path / 'vit.onnx').stat().st_size > 0
    run_main(
        [
            'tools/analysis/analyze_attention.py',
            'timm:dna_vit_tiny_patch16_224',
            ckpt,
            '--out',
            str(tmp_path / 'a'),
        ]
        + ['--analyses', 'alpha', '--input-dir', str(image_folders / 'val'), '--num-samples', '2']
        + ['--cfg-options', *model_args]
    )
    assert (tmp_path / 'a' / 'analysis.json').is_file()
    # the same analysis through the config (its test loader, its normalisation)
    opts = [o for o in tiny_imagenet_options(image_folders, train=False) if o.startswith(('model.', 'test_'))]
    run_main(
        ['tools/analysis/analyze_attention.py', config, ckpt, '--out', str(tmp_path / 'c')]
        + ['--analyses', 'alpha', 'entropy', '--num-samples', '2', '--cfg-options', *opts]
    )
    import json

    runs = [json.loads((tmp_path / d / 'analysis.json').read_text())['runs'][0] for d in ('a', 'c')]
    by_timm, by_config = ([(a['layer'], a['per_head']) for a in run['alpha']] for run in runs)
    assert by_config == by_timm and len(by_config) == 2  # the same α, read through either route
    assert runs[1]['num_samples'] == 2 and {e['num_maps'] for e in runs[1]['entropy']} == {2}

    # the robustness sets (their folder layouts, generated): ImageNet-A and -R as two of the four
    # classes (the validation images), ImageNet-O as images of two classes the model never saw
    import shutil

    for name in ('a', 'r'):
        for wnid in WNIDS[:2]:
            shutil.copytree(image_folders / 'val' / wnid, tmp_path / f'imagenet-{name}' / wnid)
    for k, wnid in enumerate(['n09999991', 'n09999992']):
        (tmp_path / 'imagenet-o' / wnid).mkdir(parents=True)
        for i in range(3):
            shutil.copy(
                image_folders / 'val' / WNIDS[2 + k] / f'{WNIDS[2 + k]}_{i}.JPEG',
                tmp_path / 'imagenet-o' / wnid / f'o_{i}.jpg',
            )
    sets = ['--imagenet-a', str(tmp_path / 'imagenet-a'), '--imagenet-r', str(tmp_path / 'imagenet-r')]
    sets += ['--imagenet-o', str(tmp_path / 'imagenet-o'), '--imagenet-val', str(image_folders / 'val')]
    out = tmp_path / 'robustness.json'
    printed = run_main(
        ['tools/analysis/eval_imagenet_variants.py', config, ckpt, *sets, '--train-root', str(image_folders)]
        + ['--out', str(out), '--beta', '2', '--cfg-options', *opts]
    ).stdout
    results = json.loads(out.read_text())
    assert set(results) == {'imagenet-a', 'imagenet-r', 'imagenet-o'}
    assert results['imagenet-a'] == results['imagenet-r']  # the same images
    assert results['imagenet-a']['images'] == 6 and set(results['imagenet-a']) == {
        'acc',
        'rmsce',
        'aurra',
        'images',
    }
    assert results['imagenet-o']['images'] == 6 and results['imagenet-o']['in_distribution'] == 6
    assert all(
        0 <= v <= 100
        for m in results.values()
        for k, v in m.items()
        if k not in ('images', 'in_distribution')
    )
    assert 'imagenet-o (6 images, 6 in-distribution): auroc: ' in printed
