# ImageNet-1K DnA-ViT-B/16, ablation variant Q±V (the paper's Table "ablation_qv": 81.7 top-1), the
# recipe of dna_vit-b16_in1k.py.
_base_ = ['dna_vit-b16_in1k.py']
model = dict(backbone=dict(attn_cfg=dict(type='DnAAttention', variant='qpm_v')))
