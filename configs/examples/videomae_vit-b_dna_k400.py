# VideoMAE ViT-B (MMAction2's zoo config, unchanged) with DnA in every attention: the zoo's
# softmax checkpoint loads into it (q_bias / v_bias read, negative branch generated). A test
# config, as its base: add train_dataloader, train_cfg and optim_wrapper to fine-tune it.
_base_ = ['mmaction::recognition/videomae/vit-base-p16_videomae-k400-pre_16x4x1_kinetics-400.py']
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)
model = dict(
    backbone=dict(_delete_=True, type='with_attention', model={{_base_.model.backbone}}, attn_cfg='dna')
)
