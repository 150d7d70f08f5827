"""Data preparation and checks, offline, behind the tools of ``tools/data/``: resizing and
person crops (:mod:`.resize`, :mod:`.person_crops`), a user's own videos as a dataset
(:mod:`.custom`), the decoding check and the video kinds it is checked on
(:mod:`.decoding_check`, :mod:`.video_kinds`), the COCO and ImageNet checks (:mod:`.coco_check`,
:mod:`.imagenet`). The work returns what its tool prints, or says it through the ``echo`` the tool
passes; commands per dataset in ``docs/datasets/``."""
