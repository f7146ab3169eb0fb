#!/usr/bin/env bash
# Durable creates on one store, several builds interleaved: each server starts on a fresh
# copy of STORE (a data directory, e.g. one `benches/run.py --keep` left), takes DURATION of
# `benches/wrk/create.lua` from 64 clients in `process` durability, and prints its creates/s,
# the cache capacity sled was left (`vsl_store_memory_bytes`) and its RSS.
#
#   STORE=/tmp/vsl-bench-x/data bash benches/create_ab.sh target/release/vshortlink /tmp/old
#
# BUDGET [256MB], DURATION [15s], ROUNDS [2], PORT [18283].
set -euo pipefail
: "${STORE:?STORE=<a data directory to copy for each server>}"
BUDGET=${BUDGET:-256MB} DURATION=${DURATION:-15s} ROUNDS=${ROUNDS:-2} PORT=${PORT:-18283}
KEY=create-ab-admin-key-0001
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/config.toml" <<TOML
[server]
listen = "127.0.0.1:$PORT"
base_url = "http://sl.bench"
[storage]
path = "$work/data"
[auth]
keys = [{ key = "$KEY", name = "bench", role = "admin" }]
[memory]
budget = "$BUDGET"
TOML
for _ in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    rm -rf "$work/data" && cp -a "$STORE" "$work/data"
    RUST_LOG=warn "$bin" --config "$work/config.toml" > "$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
    rps=$(wrk -t2 -c64 -d"$DURATION" -s "$here/wrk/create.lua" "http://127.0.0.1:$PORT" -- "$KEY" process \
          | awk '/Requests\/sec/ {print $2}')
    capacity=$(curl -s "http://127.0.0.1:$PORT/metrics" \
               | awk '/store_memory_bytes\{part="sled_cache_capacity"/ {print $2}')
    rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
    echo "$bin: ${rps} creates/s, sled cache capacity ${capacity:-?} B, RSS ${rss} MB"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
