# timesformer_dna_k400.py with both attentions through the fused Triton kernel (dna_mm.ops: CUDA
# of compute capability 8.0+, head dims 32 / 64 / 128) instead of two SDPA calls; same weights.
_base_ = ['./timesformer_dna_k400.py']
model = dict(backbone=dict(attn_cfg=dict(kernel='triton')))
