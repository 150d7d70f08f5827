# ViTDet-B Mask R-CNN with DnA (Q±V±) on COCO at the DnA paper's setting (Appendix C): 224x224,
# global attention, no rel-pos, AdamW lr 1e-4 / wd 0.1 / eps 1e-6, 184,375 iterations, batch 32.
_base_ = [
    '_base_/models/vitdet_mask_rcnn.py',
    '_base_/datasets/coco_instance_224.py',
    '_base_/schedules/vitdet_adamw_184k.py',
    '_base_/default_runtime_det.py',
]
# Initialisation: ImageNet DnA ViT-B/16 (the authors' file or a dna_vit_base_patch16_224 checkpoint).
model = dict(
    backbone=dict(
        attn_cfg='dna',
        init_cfg=dict(type='Pretrained', checkpoint='checkpoints/dna_vit_base_patch16_224.pth'),
    )
)
