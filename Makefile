# Two commands for a new user: `make demo` and `make test`. Each creates .venv when it is missing.
# TORCH_SPEC pins torch, installed first so that nothing later pulls another build. Where pip
# sees only PyPI, Linux gets the multi-GB CUDA build of that pin; for the CPU build there, e.g.
# `make test TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.ihprobe-installed

.PHONY: demo test test-fast bench corpus wordnet reference hooks lint docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_SPEC) numpy  # numpy first: torch warns on import without it
	$(BIN)/python -c "import torch; print(f'torch=={torch.__version__.split(\"+\")[0]}')" > $(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e ".[dev,llc,cluster,docs]"
	touch $@

# The natural-text corpus (docs/science.md): documentation from Debian packages, installed here
# when missing (needs root and apt), then copied, split and tokenized by `ihprobe corpus build`.
DOC_PACKAGES := vim-runtime python3.11-doc perl-doc git-doc
corpus: $(STAMP)
	dpkg -s $(DOC_PACKAGES) >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DOC_PACKAGES))
	$(BIN)/ihprobe corpus build

# WordNet 3.0 for the antonym and synonym tasks of FV scores (ihprobe/causal/word_tasks.py), read
# at run time from /usr/share/wordnet; installed here when missing (needs root and apt).
wordnet:
	dpkg -s wordnet-base >/dev/null 2>&1 || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wordnet-base)

# The natural-text reference (reference/natural-docs/README.md): seed 0 of the pilot d128-lr3e-3
# trained on the corpus (about 2 core-hours; resumed after a kill, reused once finished), then its
# final checkpoint, live probes and recipe exported into the committed folder.
REFERENCE ?= reference/natural-docs
reference: corpus
	nice -n 10 $(BIN)/python -m lab.studies natural --pilot d128-lr3e-3 --seed 0 \
	  --export $(REFERENCE)

demo: $(STAMP)
	$(BIN)/ihprobe demo --out runs/demo

# Both run the doctests of ihprobe and check its array annotations (pyproject.toml's addopts).
# --dist loadgroup: tests that share a trained model carry one xdist_group and so share a worker.
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q -m "not slow" -x

bench: $(STAMP)
	for b in lab/benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The docs site (mkdocs.yml) into site/; --strict: a warning (a broken link, a missing page, a
# docstring the API pages cannot read) fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check ihprobe tests lab notebooks
	$(BIN)/ruff format --check ihprobe tests lab notebooks

hooks:
	git config core.hooksPath hooks
	@echo "git hooks installed from hooks/"

clean:
	rm -rf $(VENV) runs .pytest_cache site
