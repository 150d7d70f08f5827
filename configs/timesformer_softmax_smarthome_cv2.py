# Softmax baseline of timesformer_dna_smarthome_cv2.py (stock TimeSformer attention).
_base_ = ['./timesformer_dna_smarthome_cv2.py']
# Initialisation: the Kinetics-400 softmax TimeSformer.
model = dict(backbone=dict(attn_cfg='softmax', pretrained='checkpoints/timesformer_softmax_k400.pth'))
