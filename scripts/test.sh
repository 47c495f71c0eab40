#!/usr/bin/env sh
# Set up a virtual environment in .venv (if needed), install both distributions with the test
# extras, and run lint plus the whole test suite. Usage: ./scripts/test.sh [pytest args...]
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ./core -e ".[test]"
.venv/bin/ruff check core ds4_lsp tests bench
.venv/bin/python -m pytest "$@"
