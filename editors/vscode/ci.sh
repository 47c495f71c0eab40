#!/usr/bin/env bash
# Build, lint and test the VS Code extension: unit tests, then the end-to-end test against the
# real ds4-lsp (default ../../.venv/bin/ds4-lsp; set DS4_LSP_COMMAND to use another).
# Exits non-zero on the first failure. Needs Node >= 20.19 and npm.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
# The stamp test/e2e-real/run.sh reads to skip its own `npm ci` (the same lockfile installed).
cat package.json package-lock.json | sha256sum | cut -c1-16 >node_modules/.ds4-npm-ci
npm run compile
npm run lint
npm test
