#!/usr/bin/env bash
# Builds the `python-http` executor: guests/target/lang/python-http.wasm.
#
# The `python` executor (../python/app.py, copied here beside http_app.py)
# built for wit/world.wit: gatehouse's `executor` world plus
# `wasi:http/outgoing-handler`, the transport http_app.py gives `requests`
# (requests-wasi-http's adapter) and `urllib.request`.
#
# 1. componentize-py (PyPI, pinned by ../../setup.sh) turns http_app.py,
#    app.py, the packages of requirements.txt (installed by setup.sh into
#    SITE) and CPython into a component of that world, the interpreter
#    initialized at build time (a snapshot).
# 2. `wac plug` fills CPython's `wasi:sockets` imports with `deny-sockets`,
#    as for `python`, so the component imports no `wasi:sockets`: its
#    network is wasi:http alone, which gatehouse links only with
#    `network:sites`.
#
# Usage: build.sh COMPONENTIZE_PY WAC DENY_SOCKETS_WASM OUT_DIR [SITE]
# (SITE defaults to ../target/toolchains/python-http-site).
set -euo pipefail
cd "$(dirname "$0")"
componentize_py=$1 wac=$2 deny_sockets=$3 out=$4
site=$(realpath "${5:-../target/toolchains/python-http-site}")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/app" "$tmp/wit/deps"
cp ../python/app.py http_app.py "$tmp/app/"
cp wit/world.wit "$tmp/wit/"
cp wit/deps/http.wit ../../wit/deps/*.wit "$tmp/wit/deps/"
cp ../../wit/executor.wit "$tmp/wit/deps/"
"$componentize_py" -q -d "$tmp/wit" -w python-http-executor componentize http_app \
  -p "$tmp/app" -p "$site" -o "$tmp/python-http-raw.wasm"
"$wac" plug "$tmp/python-http-raw.wasm" --plug "$deny_sockets" -o "$tmp/python-http.wasm"
mv "$tmp/python-http.wasm" "$out/python-http.wasm"
