"""The family's forms for hosts, one module per host call, each built by its ``from_host``
(:mod:`.forms` says how): ``vitdet_attention`` (ViTDet's grid), ``mha_attention``
(``nn.MultiheadAttention``), ``mvit_attention`` (MViTv2's pooling), ``video_attention``
(MMAction2 / mmcv's wrappers), ``swin_attention``, ``eva_attention``, ``uniformerv2_attention``,
``mmpretrain_attention`` and ``family_attention`` (the family module itself); with the helpers
they share (positions, windows, ``LN2d``)."""
