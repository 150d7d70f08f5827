# dna_mm — every target creates the environment (.venv/) first if it is missing.
#   make install       environment in .venv/ (mmcv wheel cached in ~/.cache/dna_mm)
#   make test          the test suite (what CI runs)
#   make test-slow     the tests marked slow
#   make demo          train + test TimeSformer-DnA on the embedded synthetic video set (installs
#                      mmcv without its compiled ops if nothing is installed; make install adds them)
#   make demo-compare  the same for the softmax baseline, then both results
#   make demo-det      train + test a tiny ViTDet-DnA Mask R-CNN on generated COCO-format shapes
#   make demo-study    softmax / DnA / Diff × 5 seeds on the demo set: mean ± std, paired 95 % interval,
#                      attention on the target, accuracy vs distractors (work_dirs/study; resumes)
#   make bench         attention benchmark (CPU, and CUDA when present)
#   make bench-ops     top-level operators of one attention forward + backward and of a tiny train step, per member
#   (the demos, the study and the benchmarks take any registered attention by name, your own after
#    --import MODULE or FILE.py: python tools/demos/demo.py --attn relu --import docs/attention/relu_attention.py)
#   make lint          ruff: lint (incl. import order) and format check (config: pyproject.toml)
#   make format        apply ruff's fixes and format
#   make test-pythons  the suite on the other supported Pythons (PYTHONS, each in .venv-<name>)
#   make test-gpu      the CUDA tests, marked cuda (fp32/bf16/fp16, SDPA kernels, Triton at real shapes, AMP)
#   make mmcv-sm90     mmcv's ops cross-compiled for sm_90 (H100) without a GPU, nvcc from the index (.venv-sm90)
#   make device-mmcv   mmcv with CUDA ops (sm_90) for the GPU machines' stack, for the kit (after device-rehearsal)
#   make device-kit    .device/: Python 3.12 wheels for a GPU machine (scripts/device/gpu_check.sh)
#   make device-rehearsal  that GPU check on this CPU, in a Python 3.12 env built like the GPU image's
SHELL := /bin/bash
# PYTHON=python3.12: that interpreter, in its own environment (.venv-python3.12)
VENV ?= .venv$(if $(PYTHON),-$(notdir $(PYTHON)))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dna_mm_installed
# either install: the full one, or mmcv without its compiled ops (MMCV_OPS=0: video recognition)
STAMP_LITE := $(VENV)/.dna_mm_installed_lite
PYTEST_ARGS ?= -q
# make test / test-slow: pytest-xdist workers, one per core (at most TEST_MAX_WORKERS); TEST_WORKERS=0 runs serially
TEST_WORKERS ?= auto
TEST_MAX_WORKERS ?= 8
# make test-pythons: interpreters by name or path (pyenv: $$(pyenv root)/versions/3.12.1/bin/python3.12)
PYTHONS ?= python3.12

.PHONY: install lint format test test-slow test-pythons test-gpu mmcv-sm90 device-mmcv demo demo-compare demo-det bench bench-ops device-kit device-rehearsal clean

# install always runs the script (each step it finds done is skipped): MMCV_CUDA_ARCHS="8.0 9.0"
# or a GPU that appeared rebuilds mmcv's ops for it
install:
	VENV=$(VENV) bash scripts/install/install_env.sh

$(STAMP): setup.py scripts/install/install_env.sh $(filter-out requirements/device-%,$(wildcard requirements/*.txt))
	VENV=$(VENV) bash scripts/install/install_env.sh

# the demos need no compiled mmcv ops: a new machine gets mmcv without them (seconds, not minutes)
$(STAMP_LITE): setup.py scripts/install/install_env.sh $(filter-out requirements/device-%,$(wildcard requirements/*.txt))
	VENV=$(VENV) MMCV_OPS=0 bash scripts/install/install_env.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --maxprocesses $(TEST_MAX_WORKERS) -m "not slow" $(PYTEST_ARGS) tests

test-slow: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --maxprocesses $(TEST_MAX_WORKERS) -m slow --timeout 3600 -o faulthandler_timeout=3000 $(PYTEST_ARGS) tests

test-pythons:
	for python in $(PYTHONS); do $(MAKE) test PYTHON=$$python || exit 1; done

# the GPU build path on a machine without a GPU (a cluster's login node): not in CI (tens of minutes)
mmcv-sm90:
	time VENV=.venv-sm90 MMCV_CUDA_ARCHS=9.0 bash scripts/install/install_env.sh

test-gpu: $(STAMP)
	$(PY) -m pytest -m cuda -rs $(PYTEST_ARGS) tests

demo: $(STAMP_LITE)
	$(PY) tools/demos/demo.py --attn dna

demo-compare: $(STAMP_LITE)
	$(PY) tools/demos/demo.py --attn dna softmax

demo-det: $(STAMP)
	$(PY) tools/demos/demo_det.py --attn dna

.PHONY: demo-study
demo-study: $(STAMP_LITE)
	$(PY) tools/analysis/study.py --methods softmax dna diff --seeds 5 --out work_dirs/study

bench: $(STAMP)
	$(PY) tools/benchmarks/benchmark_attention.py

bench-ops: $(STAMP)
	$(PY) tools/benchmarks/benchmark_operators.py

device-mmcv:
	bash scripts/device/build_mmcv.sh

device-kit: $(STAMP)
	bash scripts/device/build_kit.sh

device-rehearsal: device-kit
	bash scripts/device/rehearse.sh

clean:
	rm -rf work_dirs .pytest_cache
