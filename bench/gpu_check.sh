#!/usr/bin/env bash
# The training side of the paper recipes on one GPU, as JSON lines (bench/gpu_check.py says what is checked).
#
#   bash bench/gpu_check.sh                    # a CUDA machine with this package's dependencies
#   bash bench/gpu_check.sh --cpu              # the same code paths at small sizes (CI runs this)
#   bash bench/gpu_check.sh --wheels DIR       # a bare machine with only torch and transformers: install the
#                                              # wheels that bench/gpu_wheels.sh put in DIR first (no network)
#
# PYTHON picks the interpreter (default: .venv/bin/python if present, else python3). Exit status 1 if a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) wheels="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
if [ -n "$wheels" ]; then
  site=$(mktemp -d)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check --target "$site" "$wheels"/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec "$PY" bench/gpu_check.py ${args[@]+"${args[@]}"}
