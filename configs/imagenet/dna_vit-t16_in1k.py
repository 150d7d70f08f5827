# ImageNet-1K DnA-ViT-T/16 (Q±V±; the paper's Table "accuracy_comparison": 61.9 top-1 against
# ViT-T's 58.9), 100 epochs, the ViT-B recipe otherwise.
_base_ = ['dna_vit-b16_in1k.py']
embed_dims = 192
max_epochs = 100
model = dict(backbone=dict(model_name='dna_vit_tiny_patch16_224'), head=dict(in_channels=embed_dims))
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5, convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - 5,
        eta_min=1e-5,
        by_epoch=True,
        begin=5,
        end=max_epochs,
        convert_to_iter_based=True,
    ),
]
