#!/usr/bin/env bash
# Wheels for tools/gpu_check.sh's notebook pass, fetched here for a GPU machine that has no
# package index. From the repository root, with the GPU image's Python version:
#
#   bash tools/gpu_wheels.sh 3.12
#
# Fills .whl/ (git-ignored) with what the chapters' kernel imports beyond the image's torch and
# numpy: requirements.txt without torch, torchvision, numpy, the SQL packages and the website
# and build tooling, with dependencies, less the large ones the kernel never imports (Sphinx,
# the debugger, jedi). The device tool carries the working tree and .whl/ together in at most
# 64 MiB; the script prints their size.
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${1:?usage: bash tools/gpu_wheels.sh PYTHON_VERSION, that of the GPU image, e.g. 3.12}
PY=${PYTHON:-.venv/bin/python}
REQS=$(mktemp)
trap 'rm -f "$REQS"' EXIT
# The website, the browser test, formatting, building and Part IV's SQL engines: the notebook
# pass (the chapters that use torch) needs none of them.
grep -v -E '^(#|$|torch==|torchvision==|numpy==|jupyter-book|sphinx|pydata-sphinx|playwright|ruff|ninja|pip==|setuptools|duckdb|sqlglot|PyMySQL)' \
    requirements.txt >"$REQS"
rm -rf .whl && mkdir .whl
"$PY" -m pip download -q --disable-pip-version-check --only-binary=:all: -d .whl -r "$REQS" \
    --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any
# Dependencies of myst-nb's site builder and of IPython's completion and debugger, which
# `from myst_nb import glue` and a notebook kernel do not import.
rm -f .whl/{sphinx-,babel-,sqlalchemy-,debugpy-,jedi-,parso-,numpy-}*.whl
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
wheels=$(du -cb .whl/*.whl | tail -1 | cut -f1)
echo "$(ls .whl/*.whl | wc -l) wheels, $((wheels >> 20)) MiB; with the working tree $(((tree + wheels) >> 20)) of 64 MiB"
