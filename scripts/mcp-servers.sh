#!/usr/bin/env bash
# The two real MCP servers the steplab/mcp tests and bench/mcp_overhead.py talk to.
#
#   eval "$(bash scripts/mcp-servers.sh)"
#
# Idempotent and quick once done:
#   - mcp-server-time (PyPI, stdio) into its OWN virtualenv, so its `mcp` dependency can never
#     change the mcp 2.x that Steplab pins in .venv;
#   - @modelcontextprotocol/server-filesystem (npm, stdio) into an npm prefix directory, so the
#     tests run it offline with node (no `npx -y` download at test time).
# Both go under $STEPLAB_MCP_DIR (default: <repo>/var/mcp-servers; var/ is git-ignored). What is
# already installed at the pinned version is skipped. Prints the
# `export STEPLAB_MCP_TIME=... STEPLAB_MCP_FILESYSTEM=...` line (command paths) for the caller to
# eval; everything else goes to stderr. Needs python3.11 (or python3); installs nodejs and npm from
# Debian when they are missing and it runs as root.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${STEPLAB_MCP_DIR:-$ROOT/var/mcp-servers}
TIME_VERSION=${STEPLAB_MCP_TIME_VERSION:-2026.10.19}
FS_VERSION=${STEPLAB_MCP_FILESYSTEM_VERSION:-2026.8.31}
TIME_VENV=$DIR/time-venv
TIME_CMD=$TIME_VENV/bin/mcp-server-time
NPM_PREFIX=$DIR/npm
FS_PACKAGE=@modelcontextprotocol/server-filesystem
FS_CMD=$NPM_PREFIX/node_modules/.bin/mcp-server-filesystem

started=$(date +%s%N)
say() {
  local ms=$(( ($(date +%s%N) - started) / 1000000 ))
  printf '[mcp-servers %d.%01ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*" >&2
}
die() { echo "mcp-servers: $*" >&2; exit 1; }

mkdir -p "$DIR"

# --- mcp-server-time: its own virtualenv -------------------------------------------------------
python=$(command -v python3.11 || command -v python3 || true)
[ -n "$python" ] || die "no python3 on PATH: install Python 3.10+ to run mcp-server-time"
installed_time=""
if [ -x "$TIME_VENV/bin/python" ]; then
  installed_time=$("$TIME_VENV/bin/python" -c \
    'import importlib.metadata as m; print(m.version("mcp-server-time"))' 2>/dev/null || true)
fi
if [ "$installed_time" != "$TIME_VERSION" ] || [ ! -x "$TIME_CMD" ]; then
  say "installing mcp-server-time==$TIME_VERSION into $TIME_VENV"
  [ -x "$TIME_VENV/bin/python" ] || "$python" -m venv "$TIME_VENV" >&2
  "$TIME_VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "mcp-server-time==$TIME_VERSION" >&2 || die "pip could not install mcp-server-time==$TIME_VERSION (is PyPI reachable?)"
fi
[ -x "$TIME_CMD" ] || die "$TIME_CMD is missing after the install; remove $TIME_VENV and run this again"

# --- @modelcontextprotocol/server-filesystem: an npm prefix ------------------------------------
missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null \
    || die "node and npm are needed: install Node.js 18+ with npm (Debian: apt-get install nodejs npm)"
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
installed_fs=""
if [ -f "$NPM_PREFIX/node_modules/$FS_PACKAGE/package.json" ]; then
  installed_fs=$(node -p "require('$NPM_PREFIX/node_modules/$FS_PACKAGE/package.json').version" 2>/dev/null || true)
fi
if [ "$installed_fs" != "$FS_VERSION" ] || [ ! -e "$FS_CMD" ]; then
  say "installing $FS_PACKAGE@$FS_VERSION into $NPM_PREFIX"
  mkdir -p "$NPM_PREFIX"
  npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error \
    "$FS_PACKAGE@$FS_VERSION" >&2 || die "npm could not install $FS_PACKAGE@$FS_VERSION (is the npm registry reachable?)"
fi
[ -e "$FS_CMD" ] || die "$FS_CMD is missing after the install; remove $NPM_PREFIX and run this again"

say "ready: $TIME_CMD, $FS_CMD"
printf 'export STEPLAB_MCP_TIME=%q STEPLAB_MCP_FILESYSTEM=%q\n' "$TIME_CMD" "$FS_CMD"
