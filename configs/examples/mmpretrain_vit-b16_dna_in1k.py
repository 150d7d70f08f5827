# ViT-B/16 (MMPretrain's zoo config for ImageNet-1k, unchanged) with DnA in its 12 attentions.
# The zoo's softmax checkpoint loads into it (negative branch generated: Q- = 1e-4·Q,
# V- = -1e-4·V, α of the authors' start); the layer scale and drop path stay the host's.
_base_ = ['mmpretrain::vision_transformer/vit-base-p16_64xb64_in1k.py']
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)
model = dict(
    backbone=dict(_delete_=True, type='with_attention', model={{_base_.model.backbone}}, attn_cfg='dna')
)
