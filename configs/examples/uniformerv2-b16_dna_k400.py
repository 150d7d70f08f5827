# UniFormerV2-B/16 (MMAction2's zoo config for Kinetics-400, unchanged) with DnA in its 12 CLIP
# blocks (nn.MultiheadAttention) and in its 4 global UniBlocks (the Extractor's cross-attention:
# the temporal CLS token over every token of the layer). The zoo's softmax checkpoints load into
# it (in_proj_* read, negative branch generated).
# Initialisation, as in the zoo recipe: the base's Kinetics-710 checkpoint (init_cfg of the
# backbone and of the head), fetched at init_weights from
#   https://download.openmmlab.com/mmaction/v1.0/recognition/uniformerv2/kinetics710/uniformerv2-base-p16-res224_clip-pre_u8_kinetics710-rgb_20221219-77d34f81.pth
# into ~/.cache/torch/hub/checkpoints/ unless it is already there (put it there to run offline).
# From scratch, a config inheriting this one sets model.backbone.model.init_cfg=None and
# model.cls_head.init_cfg=dict(_delete_=True, type='TruncNormal', layer='Linear', std=0.02).
_base_ = [
    'mmaction::recognition/uniformerv2/uniformerv2-base-p16-res224_clip-kinetics710-pre_8xb32-u8_kinetics400-rgb.py'
]
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)
model = dict(
    backbone=dict(_delete_=True, type='with_attention', model={{_base_.model.backbone}}, attn_cfg='dna')
)
