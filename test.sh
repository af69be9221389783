#!/usr/bin/env bash
# Every test: set-up (target, guests, PostgreSQL's package), then the whole
# workspace's tests, then the host's suite once more with its state in
# PostgreSQL, with a throwaway PostgreSQL server (scripts/postgres.sh)
# for the shared-state tests: its URL is in GATEHOUSE_TEST_DATABASE_URL, and
# it is stopped and removed at the end, pass or fail. A URL already in the
# environment is used as it is (nothing is started).
set -euo pipefail
cd "$(dirname "$0")"
bash ./setup.sh --all
if [ -z "${GATEHOUSE_TEST_DATABASE_URL:-}" ]; then
  pgdir=$(mktemp -d /tmp/gatehouse-pg.XXXXXX)
  trap 'bash ./scripts/postgres.sh stop "$pgdir"' EXIT
  GATEHOUSE_TEST_DATABASE_URL=$(bash ./scripts/postgres.sh start "$pgdir")
  export GATEHOUSE_TEST_DATABASE_URL
fi
cargo test --workspace "$@"
# The host's suite again, on PostgreSQL: every test environment gets a
# migrated database of its own instead of its SQLite files (the tests of
# those files themselves stay on SQLite; tests/it/support/mod.rs, Env::bare).
GATEHOUSE_TEST_BACKEND=postgresql cargo test --test it "$@"
