# timesformer_dna_k400.py with each temporal attention (8 tokens a sequence) through the fused Triton
# kernel, whose short-sequence form packs many sequences into one tile (dna_mm.ops: CUDA of compute
# capability 8.0+); the spatial attentions keep two SDPA calls. Same function, same weights.
_base_ = ['./timesformer_dna_k400.py']
model = dict(
    backbone=dict(
        attn_cfg=dict(
            _delete_=True,
            temporal=dict(type='DnAAttention', variant='qpm_vpm', kernel='triton'),
            spatial=dict(type='DnAAttention', variant='qpm_vpm'),
        )
    )
)
