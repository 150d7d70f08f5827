# dna_mm — every target creates the environment (.venv/) first if it is missing.
#   make install       environment in .venv/ (mmcv wheel cached in ~/.cache/dna_mm)
#   make test          the test suite (what CI runs)
#   make test-slow     the tests marked slow
#   make demo          train + test TimeSformer-DnA on the embedded synthetic video set
#   make demo-compare  the same for the softmax baseline, then both results
#   make bench         attention benchmark (CPU, and CUDA when present)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.dna_mm_installed
PYTEST_ARGS ?= -q

.PHONY: install test test-slow demo demo-compare bench clean

install: $(STAMP)

$(STAMP): setup.py tools/install_env.sh $(wildcard requirements/*.txt)
	bash tools/install_env.sh

test: $(STAMP)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS) tests

test-slow: $(STAMP)
	$(PY) -m pytest -m slow $(PYTEST_ARGS) tests

demo: $(STAMP)
	$(PY) tools/demo.py --attn dna

demo-compare: $(STAMP)
	$(PY) tools/demo.py --attn dna softmax

bench: $(STAMP)
	$(PY) tools/analysis/benchmark_attention.py

clean:
	rm -rf work_dirs .pytest_cache
