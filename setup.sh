#!/usr/bin/env bash
# Set-up for a fresh machine: the wasm32-wasip2 and wasm32-wasip1 targets,
# then the guests (guests/, its own cargo workspace): every guest for
# wasm32-wasip2, and `fs-cmd`, `wasi-prog` and `cf-attack` (the conformance
# suite's guest) also for wasm32-wasip1 (preview 1 twins).
# Artifacts land in guests/target/<target>/release/*.wasm.
# Safe to run again: every step is skipped (or a no-op) when already done.
set -euo pipefail
cd "$(dirname "$0")"
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
