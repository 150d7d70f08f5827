# ImageNet-1K ViT-T/16 with softmax attention (the baseline of dna_vit-t16_in1k.py: 58.9 top-1),
# 100 epochs, the same recipe.
_base_ = ['dna_vit-t16_in1k.py']
model = dict(backbone=dict(model_name='vit_tiny_patch16_224'))
