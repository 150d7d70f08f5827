"""Dataset preparation behind ``tools/data/resize_videos.py`` (:mod:`.resize`) and
``tools/data/ntu60/person_crops.py`` (:mod:`.person_crops`); commands per dataset in
``docs/datasets/``."""
