#!/usr/bin/env bash
# Set-up for a fresh machine: the wasm32-wasip2 target, then the guests.
# Safe to run again: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")"
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
if [ -f guests/Cargo.toml ]; then
  cargo build --release --manifest-path guests/Cargo.toml --target wasm32-wasip2
fi
