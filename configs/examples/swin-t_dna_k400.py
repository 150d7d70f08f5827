# Video Swin-T (MMAction2's zoo config, unchanged) with DnA in every window attention: the
# relative position table is a bias inside both branches, the shifted-window mask excludes
# keys from both.
# Initialisation needs one file, as in the zoo recipe: the ImageNet-1k Swin-T inflated into the
# 3D backbone (`pretrained` of the base), fetched at init_weights from
#   https://download.openmmlab.com/mmaction/v1.0/recognition/swin/swin_tiny_patch4_window7_224.pth
# into ~/.cache/torch/hub/checkpoints/ unless it is already there (put it there to run offline).
# Without it (from scratch): --cfg-options model.backbone.model.pretrained=None \
#   model.backbone.model.pretrained2d=False
_base_ = ['mmaction::recognition/swin/swin-tiny-p244-w877_in1k-pre_8xb8-amp-32x2x1-30e_kinetics400-rgb.py']
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)
model = dict(
    backbone=dict(_delete_=True, type='with_attention', model={{_base_.model.backbone}}, attn_cfg='dna')
)
