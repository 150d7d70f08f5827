# ImageNet-1K ViT-B/16 with softmax attention (the paper's baseline, DeiT-B; 81.1 top-1), the same
# recipe: timm's vit_base_patch16_224 architecture, trained from scratch.
_base_ = [
    '_base_/vit_b16_classifier.py',
    '_base_/imagenet_deit_224.py',
    '_base_/adamw_cosine_300e.py',
    '_base_/default_runtime.py',
]
model = dict(backbone=dict(model_name='vit_base_patch16_224'))
