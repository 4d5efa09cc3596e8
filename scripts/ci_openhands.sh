#!/usr/bin/env bash
# The OpenHands adapter's checks. openhands-sdk needs Python 3.12 or newer and the
# repository's .venv is 3.11, so this makes (once) a second virtualenv, .venv-openhands
# (gitignored), with the dev extra (which then includes openhands-sdk), and runs there:
# mypy (strict, Python 3.12) on the adapter and its test, the test, and the example.
# PYTHON312 picks the interpreter (default: the first of python3.13, python3.12 and pyenv's
# 3.12+ versions that runs).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-openhands
is_312() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
PY=""
if [ -n "${PYTHON312:-}" ]; then
  candidates=("$PYTHON312")
else
  # A pyenv shim exists for every version pyenv has, but runs only the selected ones:
  # each candidate is tried, not just found.
  candidates=(python3.13 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python)
fi
for candidate in "${candidates[@]}"; do
  if is_312 "$candidate"; then PY=$candidate; break; fi
done
if [ -z "$PY" ]; then
  echo "error: the OpenHands adapter's tests need Python 3.12+ (openhands-sdk does);" \
    "set PYTHON312 to one (tried: ${candidates[*]})" >&2
  exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q -e '.[dev,worker,broker]'
"$VENV/bin/pip" check

# No network at test time: litellm reads its model price map from its own package.
export LITELLM_LOCAL_MODEL_COST_MAP=True OPENHANDS_SUPPRESS_BANNER=1
"$VENV/bin/mypy" --python-version 3.12 streams/sdk/adapters/openhands.py tests/sdk/test_openhands.py
"$VENV/bin/pytest" -q tests/sdk/test_openhands.py tests/sdk/test_examples.py -k "openhands"
