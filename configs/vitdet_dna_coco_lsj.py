# ViTDet-B Mask R-CNN with DnA (Q±V±), the standard ViTDet recipe: LSJ 1024, window 14 + global
# blocks 2/5/8/11, rel-pos, layer decay 0.7, drop path 0.1, AMP, MAE init, 100 epochs (184,375 it.).
_base_ = [
    '_base_/models/vitdet_mask_rcnn_lsj.py',
    '_base_/datasets/coco_instance_lsj_1024.py',
    '_base_/schedules/vitdet_adamw_layer_decay_184k.py',
    '_base_/default_runtime_det.py',
]
model = dict(backbone=dict(attn_cfg='dna'))
# As the reference config: DDP gradients all-reduced in fp16 (torch's fp16_compress_hook; a
# no-op without DDP). Name spelled as MMDetection's projects/ViTDet spells it.
custom_hooks = [dict(type='Fp16CompresssionHook'), dict(type='RNGStateHook'), dict(type='PendingGradsHook')]
