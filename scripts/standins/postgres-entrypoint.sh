#!/bin/bash
# The stand-in postgres image's entrypoint: the part of the official image's docker-entrypoint.sh
# that deploy/compose.yaml relies on. On an empty PGDATA: initdb with POSTGRES_USER (default
# postgres) and POSTGRES_PASSWORD (required, as the official image requires it), password
# (scram-sha-256) logins from any address, then the database POSTGRES_DB (default: the user's
# name). Runs the server as the postgres user, listening on every interface.
set -euo pipefail
PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "POSTGRES_PASSWORD is not set" >&2; exit 1; }
  initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    psql -v ON_ERROR_STOP=1 --username="$user" --dbname=postgres -c "CREATE DATABASE \"$db\"" >/dev/null
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  fi
  echo "initialised $PGDATA: user $user, database $db"
fi
if [ $# = 0 ] || [ "$1" = postgres ]; then
  [ $# = 0 ] || shift
  exec postgres -c listen_addresses='*' "$@"
fi
exec "$@"
