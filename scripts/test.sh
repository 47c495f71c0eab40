#!/usr/bin/env sh
# Set up a virtual environment in .venv (if needed), install both distributions with the test
# extras, and run lint, type checks and the whole test suite: Python (core, LSP end to end,
# the Neovim plugin in a headless Neovim) and the VS Code extension.
# Usage: ./scripts/test.sh [pytest args...]
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ./core -e ".[test]"
.venv/bin/ruff check core ds4_lsp tests bench
.venv/bin/mypy core/ds4_core ds4_lsp
.venv/bin/python -m pytest "$@"
# The VS Code extension: npm ci, tsc (strict), eslint, unit tests, and end-to-end tests against
# the ds4-lsp just installed in .venv (Node >= 20.19 and npm are on the machine).
DS4_LSP_COMMAND="$(pwd)/.venv/bin/ds4-lsp" editors/vscode/ci.sh
