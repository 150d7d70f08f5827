# MViTv2-S (MMAction2's zoo config for Kinetics-400, unchanged) with DnA in its 16 pooling
# attentions: keys pooled once and shared, Q- and V- pooled by their own convolution + norm,
# the decomposed relative positions a bias inside each branch from its own queries. The zoo's
# softmax checkpoint loads into it (negative branch generated: Q- = 1e-4·Q, V- = -1e-4·V on the
# pooled, normalised queries and values).
_base_ = ['mmaction::recognition/mvit/mvit-small-p244_32xb16-16x4x1-200e_kinetics400-rgb.py']
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)
model = dict(
    backbone=dict(_delete_=True, type='with_attention', model={{_base_.model.backbone}}, attn_cfg='dna')
)
# mmengine tags every dict of an `mmaction::` base with its scope, and its Runner passes that tag
# to the collate function as an argument (TypeError): the base's collate_fn, restated here.
train_dataloader = dict(collate_fn=dict(_delete_=True, type='repeat_pseudo_collate'))
