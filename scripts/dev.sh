#!/usr/bin/env bash
# make run: find or start PostgreSQL, migrate, seed the demo tenant, print a
# fresh demo token with a ready `claude mcp add` line, and serve the API.
#
# PostgreSQL, in this order: DATABASE_URL if set; a server on 127.0.0.1:5432
# (trust authentication, user postgres); a private cluster under .data/ made
# from this machine's PostgreSQL binaries (port 54329); `docker compose up -d db`.
set -euo pipefail
cd "$(dirname "$0")/.."

export PUBLIC_URL="${PUBLIC_URL:-http://127.0.0.1:8080}"
DB_NAME="${DB_NAME:-codelotse}"

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# Before touching anything (the database, the demo token): is the API's
# address already taken, by a first `make run` or anything else? Then stop
# here, so the demo token that the running server accepts stays valid.
listen="${LISTEN_ADDR:-}"
if [ -z "$listen" ]; then
  hostport="${PUBLIC_URL#*://}"; hostport="${hostport%%/*}"
  case "$PUBLIC_URL" in https://*) default_port=443 ;; *) default_port=80 ;; esac
  case "$hostport" in
    \[*\]:*) listen="$hostport" ;;
    \[*\]) listen="$hostport:$default_port" ;;
    *:*) listen="$hostport" ;;
    *) listen="$hostport:$default_port" ;;
  esac
fi
listen_host="${listen%:*}"; listen_port="${listen##*:}"
listen_host="${listen_host#[}"; listen_host="${listen_host%]}"
[ -z "$listen_host" ] && listen_host=127.0.0.1
if port_open "$listen_host" "$listen_port"; then
  echo "make run: $listen_host:$listen_port is already in use (is another \`make run\` serving?)." >&2
  echo "  Nothing was changed: the running demo and its token keep working." >&2
  echo "  To run a second copy, pick another address: PUBLIC_URL=http://127.0.0.1:8081 make run" >&2
  exit 1
fi

pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/pgsql/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)" && return 0
  return 1
}

start_local_cluster() {
  local bin="$1" data=".data/pg" port=54329 as=()
  mkdir -p .data
  if [ "$(id -u)" = 0 ]; then
    # initdb refuses to run as root: run the private cluster as postgres.
    id postgres >/dev/null 2>&1 || { echo "make run: as root, a local cluster needs the postgres user" >&2; return 1; }
    as=(runuser -u postgres --)
    mkdir -p "$data"; chown postgres "$data" .data
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    echo "make run: creating a PostgreSQL cluster in $data"
    "${as[@]}" "$bin/initdb" -D "$data" -U postgres -A trust >/dev/null
  fi
  if ! port_open 127.0.0.1 "$port"; then
    "${as[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$PWD/$data" start >/dev/null
  fi
  export DATABASE_URL="postgres://postgres@127.0.0.1:$port/$DB_NAME?sslmode=disable"
}

# MAKE_RUN_PG=local forces the private cluster under .data/ (auto: the order above).
mode="${MAKE_RUN_PG:-auto}"
if [ -z "${DATABASE_URL:-}" ]; then
  if [ "$mode" = local ]; then
    bin=$(pg_bin) || { echo "make run: no PostgreSQL binaries found for a local cluster" >&2; exit 1; }
    start_local_cluster "$bin"
  elif port_open 127.0.0.1 5432; then
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB_NAME?sslmode=disable"
  elif bin=$(pg_bin); then
    start_local_cluster "$bin"
  elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    echo "make run: starting PostgreSQL with docker compose"
    # docker-compose.yml requires these; the database keeps the password it
    # was first created with, so the same one is used here every time (and
    # the URL below matches it).
    export POSTGRES_PASSWORD="${POSTGRES_PASSWORD:-codelotse-dev}"
    export APP_DATABASE_PASSWORD="${APP_DATABASE_PASSWORD:-codelotse-dev-runtime}"
    docker compose -f docker-compose.yml -f docker-compose.dev.yml up -d db
    for _ in $(seq 1 60); do port_open 127.0.0.1 5432 && break; sleep 1; done
    export DATABASE_URL="postgres://postgres:$POSTGRES_PASSWORD@127.0.0.1:5432/$DB_NAME?sslmode=disable"
  else
    echo "make run: no PostgreSQL found. Set DATABASE_URL, install PostgreSQL 15+ (apt-get install postgresql), or install Docker." >&2
    exit 1
  fi
fi
# Printed without its query and with any password masked: the line ends up
# in terminals, CI logs and screenshots.
shown="${DATABASE_URL%%\?*}"
# URL form: everything between user: and the last @ (a password may hold an
# unencoded @); key/value form: password=... .
shown="$(printf '%s' "$shown" | sed -E -e 's#^([a-z]+://[^:/@]*):.*@#\1:***@#' -e "s#(^|[[:space:]])password=('[^']*'|[^[:space:]]*)#\1password=***#g")"
echo "make run: using DATABASE_URL=$shown"

bin/cltctl migrate
bin/cltctl demo --public-url "$PUBLIC_URL"
echo "make run: serving on $PUBLIC_URL (Ctrl-C stops)"
exec bin/api
