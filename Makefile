# PyTorch from the Inside: every command a reader or maintainer needs.
# Each target sets up what it needs (a .venv with the pinned requirements, the booktools
# helper package and, once it exists, the mylinearops extension), so it works from a clean clone.
#
#   make book                      build the website into _build/html (the main job)
#   make test                      run every test: unit tests, extension tests, strict nbval
#   make refresh                   re-execute all notebooks and store their outputs
#   make notebook NB=chapters/tensors.ipynb   execute one notebook, store and check its outputs
#   make sync                      rewrite the Colab bootstrap cell in every notebook
#   make check                     static checks of the committed notebooks
#   make clean                     remove build outputs (keeps .venv)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
STAMP  := $(VENV)/.book-requirements

.PHONY: setup book test refresh notebook sync check clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps --no-build-isolation --editable .
	touch $@

book: setup
	$(VENV)/bin/jupyter-book build . --builder html --nitpick --warningiserror --keep-going
	@echo "Website: _build/html/index.html"

test: setup
	$(PY) -m pytest

refresh: setup
	$(PY) -m booktools.nbtools refresh

notebook: setup
	@test -n "$(NB)" || { echo "usage: make notebook NB=chapters/<name>.ipynb"; exit 2; }
	$(PY) -m booktools.nbtools refresh $(NB)
	$(PY) -m pytest $(NB)

sync: setup
	$(PY) -m booktools.nbtools sync

check: setup
	$(PY) -m booktools.nbtools check

clean:
	rm -rf _build
