# Softmax baseline of timesformer_dna_k400.py (stock TimeSformer attention).
_base_ = ['./timesformer_dna_k400.py']
# Initialisation: ImageNet softmax ViT-B/16 (timm or MMAction2 file).
model = dict(backbone=dict(attn_cfg='softmax', pretrained='checkpoints/vit_base_patch16_224.pth'))
