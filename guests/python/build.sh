#!/usr/bin/env bash
# Builds the `python` executor: guests/target/lang/python.wasm.
#
# 1. componentize-py (PyPI, pinned by ../../setup.sh) turns app.py and
#    CPython into a component of gatehouse's `executor` world (../../wit),
#    the interpreter initialized at build time (a snapshot), so a turn
#    starts from a ready interpreter.
# 2. CPython's libc imports `wasi:sockets`, which gatehouse links only with
#    `network:sites`; `wac plug` fills those imports with `deny-sockets`
#    (../deny-sockets, built by setup.sh before this), so the component
#    imports only what this executor's manifest grants (`gatehouse
#    inspect` shows it) and a socket call inside it is refused.
#
# Usage: build.sh COMPONENTIZE_PY WAC DENY_SOCKETS_WASM OUT_DIR
set -euo pipefail
cd "$(dirname "$0")"
componentize_py=$1 wac=$2 deny_sockets=$3 out=$4
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$componentize_py" -q -d ../../wit -w executor componentize app -p . -o "$tmp/python-raw.wasm"
"$wac" plug "$tmp/python-raw.wasm" --plug "$deny_sockets" -o "$tmp/python.wasm"
mv "$tmp/python.wasm" "$out/python.wasm"
