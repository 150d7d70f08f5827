# DETR R-50 (MMDetection's zoo config, unchanged) with DnA in every encoder / decoder
# attention (self and cross, with MMDetection's query / key positions and padding masks).
_base_ = ['mmdet::detr/detr_r50_8xb2-150e_coco.py']
custom_imports = dict(imports=['dna_mm'], allow_failed_imports=False)
model = dict(_delete_=True, type='with_attention', model={{_base_.model}}, attn_cfg='dna')
