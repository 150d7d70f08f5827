"""Generated data, for the demos, the tests and the benchmarks: nothing is downloaded.

- :mod:`.motion_clips`: the embedded demo set (a target's motion among moving clutter);
- :mod:`.videos`: video files of any codec and camera move, written by PyAV;
- :mod:`.coco_shapes`: a COCO-format detection set of shapes for the detector demo.
"""
