# timesformer_softmax_k400.py with each temporal attention (8 tokens a sequence) in the packed
# short-sequence Triton kernel that DnA's timesformer_dna_triton_temporal_k400.py runs (its one-branch
# form; CUDA of compute capability 8.0+): the baseline that config is measured against. Same weights.
_base_ = ['./timesformer_softmax_k400.py']
model = dict(
    backbone=dict(
        attn_cfg=dict(
            _delete_=True, temporal=dict(type='SoftmaxAttention', kernel='triton'), spatial='softmax'
        )
    )
)
