#!/usr/bin/env bash
# The hot redirect of several builds interleaved: each server starts on a fresh data directory,
# one plain link is created, and wrk takes DURATION of `GET /{code}` from 64 clients (browser
# user agent and referer, so each visit is recorded as in benches/run.py's hot row). Prints
# each build's redirects/s and p99, round after round, so that builds are compared side by
# side on the same machine at the same time.
#
#   bash benches/redirect_ab.sh target/release/vshortlink /tmp/old
#
# BUDGET [256MB], DURATION [10s], ROUNDS [3], PORT [18284].
set -euo pipefail
BUDGET=${BUDGET:-256MB} DURATION=${DURATION:-10s} ROUNDS=${ROUNDS:-3} PORT=${PORT:-18284}
KEY=redirect-ab-admin-key-01
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
agent="Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
for _ in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    rm -rf "$work/data"
    RUST_LOG=warn "$bin" --config "$work/config.toml" > "$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.05; done
    code=$(curl -s -X POST "http://127.0.0.1:$PORT/api/v1/links" -H "Authorization: Bearer $KEY" \
           -H 'Content-Type: application/json' -d '{"url": "https://example.com/hot/path"}' \
           | python3 -c 'import json, sys; print(json.load(sys.stdin)["code"])')
    out=$(wrk -t2 -c64 -d"$DURATION" --latency -H "User-Agent: $agent" \
          -H "Referer: https://news.example.org/articles/42" "http://127.0.0.1:$PORT/$code")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    echo "$bin: ${rps} redirects/s, p99 ${p99}"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
