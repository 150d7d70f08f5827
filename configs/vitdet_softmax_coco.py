# Softmax baseline of vitdet_dna_coco.py (the paper's ViT row).
_base_ = ['./vitdet_dna_coco.py']
model = dict(
    backbone=dict(
        attn_cfg='softmax',
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/vit_base_patch16_224.pth'),
    )
)
