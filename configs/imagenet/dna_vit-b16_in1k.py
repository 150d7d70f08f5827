# ImageNet-1K DnA-ViT-B/16 (Q±V±, the paper's method; its Table "imagenet1k": 81.9 top-1), the
# recipe of Table "supp_imnet_hp", 300 epochs at a global batch of 1024. Its checkpoint starts
# every video and detection config (checkpoints/dna_vit_base_patch16_224.pth).
_base_ = [
    '_base_/vit_b16_classifier.py',
    '_base_/imagenet_deit_224.py',
    '_base_/adamw_cosine_300e.py',
    '_base_/default_runtime.py',
]
model = dict(backbone=dict(model_name='dna_vit_base_patch16_224'))
