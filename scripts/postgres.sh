#!/bin/bash
# A private PostgreSQL server for the store tests and benchmarks (Debian 12's postgresql package).
#
#   scripts/postgres.sh start [DIR]   install postgresql if missing (apt-get), initdb a cluster in DIR
#                                     (default /tmp/slurm-energy-pg), listen on 127.0.0.1:$PGPORT
#                                     (default 55432, the next free port if taken), start it with
#                                     pg_ctl as the postgres user, create database slurm_energy_test;
#                                     prints the URL (for SLURM_ENERGY_TEST_PG_URL)
#   scripts/postgres.sh url [DIR]     print the URL of the running server
#   scripts/postgres.sh stop [DIR]    stop it (data directory kept; `rm -rf DIR` to drop it)
#   scripts/postgres.sh status [DIR]  exit 0 if running
#
# Authentication is "trust" on 127.0.0.1 only: a throwaway test server, never a production setup.
set -euo pipefail

cmd=${1:-}
DIR=${2:-${SLURM_ENERGY_PG_DIR:-/tmp/slurm-energy-pg}}
DB=slurm_energy_test
PGUSER_OS=postgres

pgbin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -n "$d" ] && echo "$d"
}

ensure_installed() {
    if [ -z "$(pgbin)" ]; then
        echo "postgres.sh: installing Debian's postgresql package" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 \
            || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
    fi
    [ -n "$(pgbin)" ] || { echo "postgres.sh: no /usr/lib/postgresql/*/bin after install" >&2; exit 1; }
}

as_pg() { runuser -u "$PGUSER_OS" -- "$@"; }

# close inherited descriptors above 2 (a caller's flock, e.g. the test cluster's lock, would
# otherwise be held by the server for its whole life)
closefds() { local fd
  for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done; return 0; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

url() {
    local port
    port=$(cat "$DIR/port")
    echo "postgresql+psycopg://postgres@127.0.0.1:${port}/${DB}"
}

running() { [ -f "$DIR/port" ] && as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; }

case "$cmd" in
start)
    ensure_installed
    BIN=$(pgbin)
    if running; then url; exit 0; fi
    mkdir -p "$DIR"
    chown "$PGUSER_OS": "$DIR"
    chmod 700 "$DIR"
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
        as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 >"$DIR/initdb.log" 2>&1 \
            || { cat "$DIR/initdb.log" >&2; exit 1; }
    fi
    port=${PGPORT:-55432}
    for _ in $(seq 1 50); do port_free "$port" && break; port=$((port + 1)); done
    echo "$port" >"$DIR/port"
    # unix socket in DIR (not /var/run/postgresql, which may not exist without the service)
    ( closefds; exec runuser -u "$PGUSER_OS" -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $DIR -c fsync=off -c synchronous_commit=off" start ) \
        </dev/null >&2 || { tail -20 "$DIR/server.log" >&2; exit 1; }
    if ! as_pg "$BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1; then
        as_pg "$BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres "$DB"
    fi
    url
    ;;
url)
    running || { echo "postgres.sh: not running (scripts/postgres.sh start $DIR)" >&2; exit 1; }
    url
    ;;
status)
    running
    ;;
stop)
    [ -n "$(pgbin)" ] || exit 0
    if running; then as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m fast -w stop >&2; fi
    ;;
*)
    echo "usage: $0 start|stop|url|status [DIR]" >&2
    exit 2
    ;;
esac
