#!/usr/bin/env bash
# Set-up for a fresh machine, in two parts.
#
# `./setup.sh` (the README's first line, before `cargo run -- demo`): what
# the binary and its demo need: the wasm32-wasip2 and wasm32-wasip1
# targets, then the guests (guests/, its own cargo workspace): every guest
# for wasm32-wasip2, and `fs-cmd`, `wasi-prog` and `cf-attack` (the
# conformance suite's guest) also for wasm32-wasip1 (preview 1 twins), and
# the C wasi-libc guest the conformance suite embeds (guests/c).
# Artifacts land in guests/target/<target>/release/*.wasm.
#
# `./setup.sh --all` (test.sh, and the tests themselves): the above, then
# what only the tests and the language executors need: PostgreSQL's server
# package; the toolchains of the language executors, from the registries
# and pinned (componentize-py from PyPI into a venv under guests/target,
# and the Python MCP SDK a test drives `connect` with; wac, the component
# composer, from crates.io into cargo's bin directory, where it is kept
# across clones because it takes minutes to compile), and the language
# executors built with them into guests/target/lang/ (until then a run
# of `python` or `js` names its missing component).
# Safe to run again: every step is skipped (or a no-op) when already done.
set -euo pipefail
cd "$(dirname "$0")"
all=false
case "${1:-}" in
  --all) all=true ;;
  "") ;;
  *) echo "setup.sh: unknown argument \`$1\` (only \`--all\`)" >&2; exit 3 ;;
esac
# The guests and the tools are built as they are, whoever calls: the CI
# builds the host's workspace through clippy's driver (.ci/run), not them.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
installed="$(rustup target list --installed)"
for target in wasm32-wasip2 wasm32-wasip1; do
  if ! grep -qx "$target" <<<"$installed"; then
    rustup target add "$target"
  fi
done
if [ -f guests/Cargo.toml ]; then
  cargo build --release --manifest-path guests/Cargo.toml --target-dir guests/target --target wasm32-wasip2 --workspace
  cargo build --release --manifest-path guests/Cargo.toml --target-dir guests/target --target wasm32-wasip1 -p fs-cmd -p wasi-prog -p cf-attack
fi

# The C wasi-libc guest (issue 14): builds guests/c/target/wasi_fs_all.wasm, or says why not.
bash guests/c/build.sh

if ! $all; then
  exit 0
fi

# PostgreSQL's server, for the shared-state tests (test.sh starts a
# throwaway one with scripts/postgres.sh): Debian's package, when missing.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null \
    || { "${sudo[@]}" apt-get update -q >/dev/null && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }
fi

# The language executors (issue 30). Each is rebuilt only when one of its
# inputs (or a toolchain's version) changed: its stamp file holds their
# digest.
COMPONENTIZE_PY_VERSION=0.25.1
WAC_VERSION=0.12.0
tools=guests/target/toolchains
componentize_py="$tools/python/bin/componentize-py"
if ! "$componentize_py" --version 2>/dev/null | grep -qx "componentize-py $COMPONENTIZE_PY_VERSION"; then
  rm -rf "$tools/python"
  python3 -m venv "$tools/python"
  "$tools/python/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION"
fi
# The official Python MCP SDK, whose client drives `gatehouse connect` in
# one test (tests/it/python/mcp_connect.py), pinned, in a venv of its own.
MCP_PY_VERSION=2.3.0
mcp_client="$tools/mcp-client"
if ! "$mcp_client/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PY_VERSION')" 2>/dev/null; then
  rm -rf "$mcp_client"
  python3 -m venv "$mcp_client"
  "$mcp_client/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION"
fi
wac="${CARGO_HOME:-$HOME/.cargo}/bin/wac"
if ! "$wac" --version 2>/dev/null | grep -qx "wac-cli $WAC_VERSION"; then
  cargo install --quiet --locked --no-default-features wac-cli --version "$WAC_VERSION"
fi
deny_sockets=guests/target/wasm32-wasip2/release/deny_sockets.wasm
lang=guests/target/lang
# rebuild NAME STAMP COMMAND...: runs COMMAND unless $lang/NAME.wasm was
# built from inputs whose digest is STAMP.
rebuild() {
  local name=$1 stamp=$2; shift 2
  if [ -f "$lang/$name.wasm" ] && [ "$(cat "$lang/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  rm -f "$lang/$name.stamp"
  "$@"
  echo "$stamp" > "$lang/$name.stamp"
}
# build_lang NAME INPUT...: guests/NAME/build.sh, stamped with its inputs
# and the toolchains' versions.
build_lang() {
  local name=$1; shift
  local stamp
  stamp=$( { echo "componentize-py $COMPONENTIZE_PY_VERSION wac $WAC_VERSION"; sha256sum "$@"; } | sha256sum | cut -d' ' -f1)
  rebuild "$name" "$stamp" bash "guests/$name/build.sh" "$PWD/$componentize_py" "$wac" "$PWD/$deny_sockets" "$PWD/$lang"
}
build_lang python guests/python/app.py guests/python/build.sh wit/executor.wit wit/deps/*.wit "$deny_sockets"
# python-http: the packages its code can import beyond the standard library
# (guests/python-http/requirements.txt, exact versions: requests, its
# dependencies and requests-wasi-http), pure-Python wheels installed into
# a directory of their own, again only when that file changed.
py_site="$tools/python-http-site"
py_requirements_digest=$(sha256sum guests/python-http/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$py_site/.gatehouse-requirements" 2>/dev/null)" != "$py_requirements_digest" ]; then
  rm -rf "$py_site"
  "$tools/python/bin/pip" install --quiet --disable-pip-version-check --target "$py_site" \
    --no-deps --no-compile --only-binary=:all: --platform any --implementation py --abi none --python-version 3.14 \
    -r guests/python-http/requirements.txt
  rm -rf "$py_site/bin"
  echo "$py_requirements_digest" > "$py_site/.gatehouse-requirements"
fi
build_lang python-http guests/python/app.py guests/python-http/http_app.py guests/python-http/build.sh \
  guests/python-http/requirements.txt guests/python-http/wit/world.wit guests/python-http/wit/deps/http.wit \
  wit/executor.wit wit/deps/*.wit "$deny_sockets"

# ComponentizeJS from npm, as package-lock.json pins it (installed again
# only when the lock changed).
js_lock_digest=$(sha256sum guests/js/package-lock.json | cut -d' ' -f1)
if [ "$(cat guests/js/node_modules/.gatehouse-lock 2>/dev/null)" != "$js_lock_digest" ]; then
  (cd guests/js && npm ci --no-audit --no-fund --loglevel=error)
  echo "$js_lock_digest" > guests/js/node_modules/.gatehouse-lock
fi
# build_js NAME [--net]: guests/js/build.mjs, stamped with its inputs and
# the lock.
build_js() {
  local name=$1; shift
  local stamp
  stamp=$( { echo "$js_lock_digest $*"; sha256sum guests/js/app.js guests/js/build.mjs guests/js/js-world.wit wit/executor.wit wit/deps/*.wit; } | sha256sum | cut -d' ' -f1)
  rebuild "$name" "$stamp" node guests/js/build.mjs "$lang" "$@"
}
build_js js
build_js js-http --net
