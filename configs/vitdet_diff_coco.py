# Differential-attention baseline of vitdet_dna_coco.py (λ and the RMSNorm start fresh).
_base_ = ['./vitdet_dna_coco.py']
model = dict(
    backbone=dict(
        attn_cfg='diff', init_cfg=dict(type='Pretrained', checkpoint='checkpoints/vit_base_patch16_224.pth')
    )
)
