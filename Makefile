# `make demo` and `make test` work from a fresh clone: each sets up .venv (and graphviz) itself.
VENV ?= .venv
PY := $(VENV)/bin/python
CHAKRA := $(VENV)/bin/chakra
SAMPLES ?= $(abspath tests/data/samples)
OUT ?= out

.PHONY: setup system-deps test lint demo check bench proto clean fuzz

setup: $(VENV)/.installed system-deps

$(VENV)/.installed: pyproject.toml setup.py
	python3 -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[dev,synth,dist]'
	touch $@

# graphviz renders PDFs/SVGs; poppler-utils lets tests look at a rendered page; protoc is not needed.
system-deps:
	@command -v dot >/dev/null 2>&1 && command -v pdftoppm >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq graphviz poppler-utils >/dev/null; \
	  else echo "note: install graphviz and poppler-utils for PDF/SVG output (apt-get install graphviz poppler-utils)"; fi; }

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) tools/lint_imports.py

test: setup lint
	CHAKRA_SAMPLES=$(SAMPLES) $(PY) -m pytest -q

demo: setup
	@bash tools/demo.sh "$(CHAKRA)" "$(SAMPLES)" "$(OUT)"

# The committed HEAD, cloned alone into an empty temp folder, runs `make demo` (tools/bare_clone_check.sh).
check:
	@bash tools/bare_clone_check.sh
# Seeded mutation fuzzing of every input format: N cases per format (FORMAT=et to pick one, SEED
# for other inputs). Prints per-format counts; crashing inputs go to $(OUT)/fuzz-crashes.
N ?= 2000
SEED ?= 0
fuzz: setup
	CHAKRA_SAMPLES=$(SAMPLES) $(PY) tests/fuzz/fuzzlib.py --count $(N) --seed $(SEED) \
	  $(if $(FORMAT),--format $(FORMAT)) --out $(OUT)/fuzz-crashes --work $(OUT)/fuzz-work

bench: setup
	$(PY) bench/io_bench.py

proto: $(VENV)/.installed
	$(PY) tools/gen_proto.py

clean:
	rm -rf $(OUT) build dist *.egg-info .pytest_cache .ruff_cache
