# The two set-up commands (README.md):
#   make demo   runs the whole pipeline on a small embedded default (CarRacing, 2-core CPU,
#               about 15 minutes); make demo SEED=2 runs it with another seed (runs/demo-seed2)
#   make test   runs the test suite (TEST_WORKERS=2 processes, pytest-xdist)
#   make notebook  opens Jupyter on notebooks/ (quickstart.ipynb, world_model_tour.ipynb)
#   make docs      builds the documentation site into site/ (strict: a broken link fails)
#   make docs-serve  serves it on http://127.0.0.1:8000 while you edit
#   make docs-check  opens the built site in headless Chromium (scripts/dev/browser_check.py)
#   make bench     every benchmark at its quick setting (benchmarks/quick.py; docs/benchmarks.md)
#   make mutate PACKAGE=rl755/zoo  generated mutants (mutmut) of one package, score per file;
#               make mutate SAMPLE=15 PACKAGE=rl755/zoo  a seeded sample of 15 of them, its score
#               with a 95% interval (MUTATE_ARGS=--copy=DIR goes on with a stopped run);
#               make mutate  the curated list (scripts/dev/mutations/*.toml); neither is part of CI
#               (docs/development.md gives their times and the scores per package)
# Each creates .venv and installs what is missing from requirements.txt first.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SEED ?= 0
# pytest-xdist processes for make test (tests/conftest.py groups what must share one)
TEST_WORKERS ?= 2
ifeq ($(SEED),0)
DEMO_DIR ?= runs/demo
else
DEMO_DIR ?= runs/demo-seed$(SEED)
endif
PRESET ?= demo
PYTEST_ARGS ?=
# e.g. make bench BENCH_ARGS=--check (CI: exit 1 on a ratio below half its target, or half
# its committed figure when that misses the target, in each of three runs)
BENCH_ARGS ?=
MUTATE_ARGS ?=
PACKAGE ?=
NOTEBOOK_ARGS ?=

.PHONY: demo test lint mutate notebook venv clean-venv docs docs-serve docs-check bench

venv: $(STAMP)

$(STAMP): requirements.txt setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) scripts/pipeline.py --preset=$(PRESET) --out_dir=$(DEMO_DIR) --seed=$(SEED)

test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Every benchmark in benchmarks/ at a quick setting, one after the other (sized for about 5
# minutes on 2 idle cores; about 20 on 2 cores shared by other jobs at load 13-27): writes benchmarks/results/quick.json (each ratio beside its target), then
# docs/benchmarks.md's table from it. With BENCH_ARGS=--check a regression fails before that.
bench: $(STAMP)
	$(PY) benchmarks/quick.py $(BENCH_ARGS)
	$(PY) benchmarks/docs_table.py --write

# Mutation testing in a scratch copy. With PACKAGE: every mutant mutmut generates for that
# package, each run against the package's tests that call the mutated function; prints the
# score per file and the survivors (e.g. make mutate PACKAGE=rl755/slurm
# MUTATE_ARGS=--time_limit=1800). With SAMPLE=N: N mutants drawn at random from each package
# (of PACKAGE, default all of rl755/), score per package with its 95% interval. Without
# either: the curated list (scripts/dev/mutations/*.toml), one
# documented behaviour broken at a time (e.g. MUTATE_ARGS=--only=saved_controller_worst_eval).
mutate: $(STAMP)
	$(PY) scripts/dev/mutate.py $(if $(PACKAGE),--package=$(PACKAGE)) \
	  $(if $(SAMPLE),--sample=$(SAMPLE)) $(MUTATE_ARGS)

# e.g. make notebook NOTEBOOK_ARGS="--no-browser --ip=0.0.0.0" on a remote machine; as root
# (containers) Jupyter needs --allow-root, passed then
notebook: $(STAMP)
	$(VENV)/bin/jupyter notebook --ServerApp.root_dir=notebooks \
		$$(test "$$(id -u)" = 0 && echo --allow-root) $(NOTEBOOK_ARGS)

# The documentation site (mkdocs.yml): strict, so a broken link or anchor fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict

# The built site (make docs) in headless Chromium: every page renders, the search answers;
# screenshots go to a scratch directory (Debian: apt-get install chromium)
docs-check: $(STAMP)
	$(PY) scripts/dev/browser_check.py --out_dir="$$(mktemp -d)"

lint: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pre-commit run --all-files

clean-venv:
	rm -rf $(VENV)
