# timesformer_dna_k400.py with both branches of each attention in one SDPA call over 2H heads
# (DnAAttention kernel='sdpa_2h': Q = [Q+, -Q-], K = [K, K], V = [V+, α V-]) instead of two; same
# function, same weights.
_base_ = ['./timesformer_dna_k400.py']
model = dict(backbone=dict(attn_cfg=dict(kernel='sdpa_2h')))
