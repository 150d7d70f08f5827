# Differential-attention baseline of timesformer_dna_k400.py.
_base_ = ['./timesformer_dna_k400.py']
# Initialisation: ImageNet softmax ViT-B/16 (timm or MMAction2 file) (λ and the RMSNorm start fresh).
model = dict(backbone=dict(attn_cfg='diff', pretrained='checkpoints/vit_base_patch16_224.pth'))
