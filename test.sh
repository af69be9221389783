#!/usr/bin/env bash
# Every test: set-up (target, guests), then the whole workspace's tests.
set -euo pipefail
cd "$(dirname "$0")"
bash ./setup.sh
cargo test --workspace "$@"
