# TimeSformer-B/16 with DnA (Q±V±) in temporal and spatial attention: Toyota Smarthome CV1 fine-tuning.
# Recipe (the paper, Appendix C.2): 8x32 clips, SGD lr 0.005, 15 epochs, lr x0.1 at 11 and 14.
_base_ = [
    '_base_/models/timesformer_dna.py',
    '_base_/datasets/smarthome_cv1.py',
    '_base_/schedules/sgd_15e.py',
    '_base_/default_runtime.py',
]
# Initialisation: the Kinetics-400 DnA TimeSformer.
# Any supported layout loads (softmax checkpoints get a negative branch, see README).
model = dict(
    backbone=dict(pretrained='checkpoints/timesformer_dna_k400.pth'),
    cls_head=dict(num_classes={{_base_.num_classes}}),
)
