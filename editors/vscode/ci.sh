#!/usr/bin/env bash
# Build, lint and test the VS Code extension: unit tests, then the end-to-end test against the
# real ds4-lsp (default ../../.venv/bin/ds4-lsp; set DS4_LSP_COMMAND to use another).
# Exits non-zero on the first failure. Needs Node >= 20.19 and npm.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm run compile
npm run lint
npm test
