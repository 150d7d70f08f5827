"""Dataset preparation: re-encode videos to a short side, NTU RGB+D person-centric crops.

The two tools (``tools/data/resize_videos.py``, ``tools/data/ntu60/person_crops.py``) are thin
CLIs over :mod:`.resize` and :mod:`.person_crops`; both run on :mod:`.runner` (parallel,
resumable, atomic, verified) with :mod:`.encoding` (PyAV / libx264) and :mod:`.verification`
(decord). :mod:`.skeleton` reads NTU's ``.skeleton`` files, :mod:`.geometry` places the crop.
See ``docs/datasets/`` for the commands per dataset.
"""
