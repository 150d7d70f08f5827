# Softmax baseline of vitdet_dna_coco_lsj.py: MMDetection's ViTDet-B Mask R-CNN recipe (projects/ViTDet,
# fp16 gradient compression included), for which MMDetection reports 51.6 box / 45.7 mask AP.
_base_ = ['./vitdet_dna_coco_lsj.py']
model = dict(backbone=dict(attn_cfg='softmax'))
