"""The benchmarks' work: the models, inputs and steps they build and how they time them. Their
command lines are thin: ``tools/benchmarks/benchmark_{attention,operators,train_step,data,onnx}.py``,
``tools/benchmarks/triton_kernel_table.py``, ``tools/benchmarks/tune_short_kernel.py`` and
``tools/benchmarks/benchmark_preparation.py`` parse their flags, call one function here and write
its figures; the figures: ``docs/benchmarks.md``.

=================  ==========================================================================
``attention``      the family's fwd+bwd time and peak memory at TimeSformer-B / ViTDet-B shapes
``operators``      the operators one attention's fwd+bwd and a tiny TimeSformer train step run
``train_step``     configs' models: parameters, train-step time, peak memory (GPU or RSS)
``data``           a config's data pipeline and DataLoader throughput
``deployment``     exported models' latency: PyTorch eager against onnxruntime
``kernels``        the fused Triton kernels' resources, compiled ahead of time
``short_kernel``   the packed short-sequence kernels' launch configurations, timed on the device
``preparation``    the data preparation: keyframe interval against decoding, tool throughput
``timing``         the one timing loop all of them use, and a fresh process for a memory peak
=================  ==========================================================================

Models come from their configs through :func:`dna_mm.config.build.read_config` /
:func:`~dna_mm.config.build.build_part` (pretrained weights cleared: timing does not depend on them).

**Why not** ``torch.utils.benchmark``: its ``Timer`` measures one statement at a time
(``timeit`` / ``blocked_autorange`` run it in blocks and report their spread), and ``Compare``
tabulates measurements made apart. What these benchmarks report is a ratio between calls
measured in the same run (DnA against softmax, a config against the first, onnxruntime against
eager), on machines shared with other jobs; so the compared calls take turns call by call, the
order rotating every round (:func:`.timing.time_in_turns`), and load that drifts during the run
(another job, the CPU's clock, a cache another call left) hits them alike, which timing one after
the other in blocks does not give. A call is also often one step of a stateful object (a train
step that updates its optimizer, a clip through a pipeline whose random state is set per round by
the order function) timed alone, with the process's CPU time beside its wall time (decoding
threads count) and, on CUDA, its own peak memory: the ``Timer`` measures wall time of a block and
neither of the others. The CUDA handling is what it does: the device synchronised before and after
each call, inside the timed span.
"""
