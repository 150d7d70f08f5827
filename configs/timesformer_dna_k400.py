# TimeSformer-B/16 with DnA (Q±V±) in temporal and spatial attention: Kinetics-400 pre-training.
# Recipe (the paper, Appendix C.2): 8x32 clips, SGD lr 0.005, 15 epochs, lr x0.1 at 11 and 14.
_base_ = [
    '_base_/models/timesformer_dna.py',
    '_base_/datasets/k400.py',
    '_base_/schedules/sgd_15e.py',
    '_base_/default_runtime.py',
]
# Initialisation: ImageNet DnA ViT-B/16 (the authors' file or a dna_vit_base_patch16_224 checkpoint).
# Any supported layout loads (softmax checkpoints get a negative branch, see README).
model = dict(
    backbone=dict(pretrained='checkpoints/dna_vit_base_patch16_224.pth'),
    cls_head=dict(num_classes={{_base_.num_classes}}),
)
