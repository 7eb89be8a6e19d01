# The two set-up commands (see README):
#   make demo   runs the whole pipeline on a small embedded default (CarRacing, 2-core CPU);
#               make demo SEED=2 runs it with another seed (into runs/demo-seed2)
#   make test   runs the test suite (TEST_WORKERS=2 processes, pytest-xdist)
#   make notebook  opens Jupyter on notebooks/ (quickstart.ipynb, world_model_tour.ipynb)
#   make mutate PACKAGE=rl755/zoo  generated mutants (mutmut) of one package, score per file;
#               make mutate  the curated list (scripts/dev/mutations.py); neither is part of CI
#               (docs/development.md gives their times)
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
MUTATE_ARGS ?=
PACKAGE ?=
NOTEBOOK_ARGS ?=

.PHONY: demo test lint mutate notebook venv clean-venv

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

# Mutation testing in a scratch copy. With PACKAGE: every mutant mutmut generates for that
# package, each run against the package's tests that call the mutated function; prints the
# score per file and the survivors (e.g. make mutate PACKAGE=rl755/slurm
# MUTATE_ARGS=--time_limit=1800). Without: the curated list (scripts/dev/mutations.py), one
# documented behaviour broken at a time (e.g. MUTATE_ARGS=--only=saved_controller_worst_eval).
mutate: $(STAMP)
	$(PY) scripts/dev/mutate.py $(if $(PACKAGE),--package=$(PACKAGE)) $(MUTATE_ARGS)

# e.g. make notebook NOTEBOOK_ARGS="--no-browser --ip=0.0.0.0" on a remote machine; as root
# (containers) Jupyter needs --allow-root, passed then
notebook: $(STAMP)
	$(VENV)/bin/jupyter notebook --ServerApp.root_dir=notebooks \
		$$(test "$$(id -u)" = 0 && echo --allow-root) $(NOTEBOOK_ARGS)

lint: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pre-commit run --all-files

clean-venv:
	rm -rf $(VENV)
