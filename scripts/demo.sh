#!/usr/bin/env sh
# Set up .venv (if needed), install ds4, and plan the next model call for the bundled real Pi
# session. The database goes to .ds4/demo.db so the demo leaves your default database alone.
# Usage: ./scripts/demo.sh ["another request"]
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet ./core .
REQUEST="${1:-Let's get back to porting user-message-selector.ts: which patterns from oauth-selector and theme.ts did we say it should follow?}"
exec .venv/bin/ds4 --db .ds4/demo.db plan --session examples/pi-mono-v1-large-session.jsonl "$REQUEST"
