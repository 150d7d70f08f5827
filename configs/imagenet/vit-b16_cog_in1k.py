# ImageNet-1K ViT-B/16 with cog attention (Lv et al.; softmax in the first and last block; 81.4
# top-1), the recipe and the swap of vit-b16_diff_in1k.py: same width and parameter budget as
# softmax.
_base_ = ['vit-b16_diff_in1k.py']
model = dict(backbone=dict(attn_cfg='cog'))
