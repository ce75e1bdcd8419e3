#!/usr/bin/env bash
# The request-path benchmark of docs/benchmarks.md (issue 11): tools/call of
# get_rules and list_repositories on our /mcp, against the bare MCP servers of
# ../shared/bench (go-sdk building a fresh server per request, and the
# TypeScript SDK's stateless stack, each answering a trivial tool with no
# database), measured in one run with the shared load tool, the order of the
# targets reversed every other round so that drift cancels.
#
# It makes its own database and roles on the PostgreSQL of DATABASE_URL
# (default: the local cluster), seeds the demo tenant there with `cltctl
# demo`, serves the API with rate limits off, and removes all of it at the
# end. Loopback only.
#
# Settings (environment): DUR=10s, WARMUP=2s, CONC="1 16", ROUNDS=2,
# BENCH_DIR=../shared/bench.
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH=$(cd "${BENCH_DIR:-../shared/bench}" && pwd)
DUR=${DUR:-10s}
WARMUP=${WARMUP:-2s}
CONC=${CONC:-"1 16"}
ROUNDS=${ROUNDS:-2}
ADMIN_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
psql_admin() { psql "$ADMIN_URL" -v ON_ERROR_STOP=1 -qAt "$@"; }

suffix=$$
db=clt_reqbench_$suffix
export DB_ROLE_PREFIX=clt_rb$suffix
base=${ADMIN_URL%%\?*}
export DATABASE_URL="${base%/*}/$db?sslmode=disable"
port=$(free_port)
export PUBLIC_URL=http://127.0.0.1:$port
results=$(mktemp -d)/request-path.jsonl

declare -a pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  psql_admin -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  for r in owner app auth search; do psql_admin -c "DROP ROLE IF EXISTS ${DB_ROLE_PREFIX}_$r" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

echo "== build"
go build -o bin/ ./apps/api ./apps/cltctl
(cd "$BENCH" && go build -o bin/anchor-go ./anchor-go && go build -o bin/load ./load)
if [ ! -d "$BENCH/anchor-ts/node_modules/@modelcontextprotocol/sdk" ]; then
  (cd "$BENCH/anchor-ts" && npm ci --no-audit --no-fund --silent)
fi
load=$BENCH/bin/load

echo "== seed ($db)"
psql_admin -c "CREATE DATABASE $db" >/dev/null
bin/cltctl migrate >/dev/null
token=$(bin/cltctl demo --public-url "$PUBLIC_URL" | grep -o 'clt_[A-Za-z0-9_-]\{43\}' | head -1)
[ -n "$token" ] || { echo "no demo token" >&2; exit 1; }

echo "== start"
MCP_RATE_PER_TOKEN=0 MCP_RATE_PER_IP=0 LOG_LEVEL=error bin/api >"${results%.jsonl}.api.log" 2>&1 &
api=$!; pids+=("$api")
for _ in $(seq 100); do curl -fsS "$PUBLIC_URL/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
start_anchor() { # name, command...
  local name=$1 log=${results%.jsonl}.$1.log a=""
  shift
  "$@" >"$log" 2>&1 &
  pids+=("$!")
  eval "pid_$name=$!"
  for _ in $(seq 100); do
    a=$(grep -o 'listening on 127\.0\.0\.1:[0-9]*' "$log" | grep -o '127.*' || true)
    [ -n "$a" ] && break
    sleep 0.1
  done
  [ -n "$a" ] || { echo "$name did not start" >&2; cat "$log" >&2; exit 1; }
  eval "url_$name=http://$a/mcp"
}
start_anchor go_fresh "$BENCH/bin/anchor-go" -port 0 -mode fresh
start_anchor ts node "$BENCH/anchor-ts/server.mjs" --port 0

"$load" -url "$PUBLIC_URL/mcp" -token "$token" -check -method tool -tool get_rules -args '{}' >/dev/null
"$load" -url "$PUBLIC_URL/mcp" -token "$token" -check -method tool -tool list_repositories -args '{}' >/dev/null

echo "== machine: nproc $(nproc); $(go version | cut -d' ' -f3-4); node $(node --version)"
targets=(go-fresh ts get_rules list_repositories)
run_target() { # target, concurrency, round
  case $1 in
    go-fresh) "$load" -url "$url_go_fresh" -pid "$pid_go_fresh" -c "$2" -d "$DUR" -warmup "$WARMUP" -label go-fresh -round "$3" -json ;;
    ts) "$load" -url "$url_ts" -pid "$pid_ts" -c "$2" -d "$DUR" -warmup "$WARMUP" -label ts -round "$3" -json ;;
    *) "$load" -url "$PUBLIC_URL/mcp" -token "$token" -pid "$api" -method tool -tool "$1" -args '{}' \
         -c "$2" -d "$DUR" -warmup "$WARMUP" -label "$1" -round "$3" -json ;;
  esac
}
for ((r = 1; r <= ROUNDS; r++)); do
  order=("${targets[@]}")
  if ! ((r % 2)); then order=(list_repositories get_rules ts go-fresh); fi
  for c in $CONC; do
    for t in "${order[@]}"; do
      line=$(run_target "$t" "$c" "$r")
      echo "$line" >>"$results"
      echo "round $r c=$c $t: $line"
    done
  done
done

echo "== result ($results)"
"$load" report "$results"
# The goals of issue 11, from the medians over rounds: p50 at concurrency 1
# against go-fresh (goal: at most 1.6x), throughput at the highest
# concurrency against ts (goal: at least 1.0x).
jq -rs --arg hi "${CONC##* }" '
  def med(f): map(f) | sort | .[(length - 1) / 2 | floor];
  def at(l; c): map(select(.label == l and .concurrency == c));
  . as $all
  | ["get_rules", "list_repositories"][] as $t
  | "\($t): p50 at c=1 \(($all | at($t; 1) | med(.p50_ms)) / ($all | at("go-fresh"; 1) | med(.p50_ms)) * 100 | round / 100)x go-fresh;"
    + " req/s at c=\($hi) \(($all | at($t; ($hi | tonumber)) | med(.rps)) / ($all | at("ts"; ($hi | tonumber)) | med(.rps)) * 100 | round / 100)x ts"
' "$results"
