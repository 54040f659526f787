#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster for the tests: socket only (no TCP), in a temp dir, run as an
# unprivileged user (`postgres` when this runs as root), trust auth. Prints the URL to export as
# AGENT_SERVER_TEST_PG. `start-cluster.sh stop URL` stops it and removes its directory.
# Needs Debian's `postgresql` package (or initdb/pg_ctl on PATH).
set -euo pipefail
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
export PATH="${bindir:+$bindir:}$PATH"
command -v initdb >/dev/null || { echo "initdb not found: apt-get install -y postgresql" >&2; exit 1; }
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
if [ "${1:-}" = stop ]; then
  dir=${2#*host=}
  case "$dir" in */agent-server-pg.*) ;; *) echo "not a URL this script printed: $2" >&2; exit 2 ;; esac
  as_owner pg_ctl -D "$dir/data" -m fast -w -t 30 stop >/dev/null || true
  rm -rf "$dir"
  exit 0
fi
dir=$(mktemp -d /tmp/agent-server-pg.XXXXXX)  # /tmp: short enough for a socket path, open to the postgres user
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres "$dir"
as_owner initdb -D "$dir/data" -A trust -U agent --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
as_owner pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-k $dir -c listen_addresses='' -c fsync=off -c max_connections=200" start >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }
pg_isready -h "$dir" -t 60 >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
createdb -h "$dir" -U agent agent_server
echo "postgresql://agent@/agent_server?host=$dir"
