"""The video over time: a recognizer run along a whole video, as ``tools/infer.py --over-time``
and ``tools/data/make_long_video.py`` use it.

- :mod:`.frame_stream` reads a video in sequence, bounded in memory;
- :mod:`.windows` cuts the test pipeline's clip out of it every ``stride`` seconds;
- :mod:`.predictor` scores the windows in batches (:class:`~.predictor.OverTimePredictor`);
- :mod:`.segments` turns scores into labelled segments, :mod:`.timeline_files` writes them;
- :mod:`.overlay`, :mod:`.annotated_video`, :mod:`.relevance_overlay` and
  :mod:`.video_timeline` draw them onto the video;
- :mod:`.motion_video` writes the long demo video these are shown on.
"""
