# ImageNet-1K ViT-B/16 with cog attention (Lv et al.; softmax in the first and last block; 81.4
# top-1), the same recipe: timm's ViT-B/16 with its attention swapped (with_attention), same width
# and parameter budget as softmax.
_base_ = [
    '_base_/vit_b16_classifier.py',
    '_base_/imagenet_deit_224.py',
    '_base_/adamw_cosine_300e.py',
    '_base_/default_runtime.py',
]
model = dict(
    backbone=dict(
        _delete_=True,
        type='with_attention',
        model=dict(type='TIMMBackbone', model_name='vit_base_patch16_224', drop_path_rate=0.15),
        attn_cfg='cog',
    )
)
