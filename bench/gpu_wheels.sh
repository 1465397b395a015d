#!/usr/bin/env bash
# The wheels bench/gpu_check.sh needs on a machine that has only torch and transformers (Python 3.12, x86-64
# Linux): DeepSpeed (built here as a pure-Python wheel), the graders' math-verify, and the packages they
# need that such images lack.
#   bash bench/gpu_wheels.sh DIR      then, there: bash bench/gpu_check.sh --wheels DIR
# About 6 MB in all. Versions: the ones .ci/install resolves here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash bench/gpu_wheels.sh DIR}
mkdir -p "$out"
PY=${PYTHON:-.venv/bin/python}
# DeepSpeed, and the graders' sdist-only dependencies, built here as pure-Python wheels
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$out" deepspeed==0.19.8 antlr4-python3-runtime==4.9.3 \
  pylatexenc==2.10
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d "$out" \
  hjson==3.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  math-verify==0.9.0 latex2sympy2_extended==1.11.0
ls -l "$out"
