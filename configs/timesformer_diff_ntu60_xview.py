# Differential-attention baseline of timesformer_dna_ntu60_xview.py.
_base_ = ['./timesformer_dna_ntu60_xview.py']
# Initialisation: the Kinetics-400 Diff TimeSformer.
model = dict(backbone=dict(attn_cfg='diff', pretrained='checkpoints/timesformer_diff_k400.pth'))
