#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests and the state benchmark.
#
#   scripts/postgres.sh start DIR   initdb in DIR/data, start the server on a
#                                   free loopback port (unix socket in DIR),
#                                   print its URL (superuser `gatehouse`,
#                                   database `postgres`) and write it to
#                                   DIR/url
#   scripts/postgres.sh stop DIR    stop it (fast shutdown) and remove DIR
#
# The server runs as an unprivileged user: PostgreSQL refuses to run as
# root, so under root it runs as Debian's `postgres` user (created by the
# package), which must be able to reach DIR. Authentication is `trust` on
# loopback only, and fsync is off: the data is thrown away at the end.
# Debian's `postgresql` package provides the binaries (setup.sh installs it
# when missing).
set -euo pipefail
action=${1:-}
dir=${2:-}
if [ -z "$action" ] || [ -z "$dir" ]; then
  echo "usage: scripts/postgres.sh start|stop DIR" >&2
  exit 3
fi
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "postgres.sh: no PostgreSQL server binaries under /usr/lib/postgresql (install Debian's \`postgresql\`)" >&2
  exit 1
fi
as=()
if [ "$(id -u)" = 0 ]; then
  as=(runuser -u postgres --)
fi
case "$action" in
start)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir"
    chmod 700 "$dir"
    # The user must be able to walk down to DIR.
    p=$(dirname "$dir")
    while [ "$p" != / ]; do chmod o+x "$p" 2>/dev/null || true; p=$(dirname "$p"); done
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U gatehouse --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  url="postgres://gatehouse@127.0.0.1:$port/postgres"
  echo "$url" >"$dir/url"
  echo "$url"
  ;;
stop)
  if [ -d "$dir/data" ]; then
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "postgres.sh: unknown action \`$action\` (start or stop)" >&2
  exit 3
  ;;
esac
