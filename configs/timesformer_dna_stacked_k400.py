# timesformer_dna_k400.py with both branches of each temporal attention (8 tokens a sequence) in one
# SDPA call over the queries of both stacked (DnAAttention kernel='sdpa_stacked': Q = [Q+; -Q-],
# V = [V+, V-], the output's two diagonal blocks kept); the spatial attentions keep two calls. Same
# function, same weights.
_base_ = ['./timesformer_dna_k400.py']
model = dict(
    backbone=dict(
        attn_cfg=dict(
            _delete_=True,
            temporal=dict(type='DnAAttention', variant='qpm_vpm', kernel='sdpa_stacked'),
            spatial=dict(type='DnAAttention', variant='qpm_vpm'),
        )
    )
)
