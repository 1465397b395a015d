#!/usr/bin/env bash
# The wheels bench/gpu_check.sh needs on a machine that has only torch and transformers (Python 3.12, x86-64
# Linux): DeepSpeed (built here as a pure-Python wheel) and the packages it needs that such images lack.
#   bash bench/gpu_wheels.sh DIR      then, there: bash bench/gpu_check.sh --wheels DIR
# About 5 MB in all. Versions: the ones .ci/install resolves here.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash bench/gpu_wheels.sh DIR}
mkdir -p "$out"
PY=${PYTHON:-.venv/bin/python}
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$out" deepspeed==0.19.8
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d "$out" \
  hjson==3.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
ls -l "$out"
