#!/usr/bin/env bash
# Several builds (or one build with different settings) interleaved on a store `benches/run.py
# --keep` left behind (it prints `kept DIR`): each round, each build starts on a fresh copy of
# DIR/data, takes WARMUP of one redirect row, then DURATION measured. Prints each build's
# redirects/s and the server's CPU a redirect, round after round: the side-by-side runs of
# benches/RESULTS.md's "A redirect answers without waiting for a journal write".
#
#   bash benches/kept_ab.sh /tmp/vsl-bench-XXXX cycle target/release/vshortlink /tmp/old
#
# ROW: cycle (the 100,000 team links in turn), zipf, uniform or hot. A build may be a wrapper
# script that sets variables and execs the binary (`VSL_VISITS__ENABLED=false` for visits off).
# ROUNDS [5], WARMUP [5s], DURATION [15s].
set -euo pipefail
kept=$1 row=$2
shift 2
ROUNDS=${ROUNDS:-5} WARMUP=${WARMUP:-5s} DURATION=${DURATION:-15s}
agent="Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
port=$(grep -o '127.0.0.1:[0-9]*' "$kept/config.toml" | head -1 | cut -d: -f2)
here=$(cd "$(dirname "$0")" && pwd)
case $row in
  cycle) script=cycle.lua; args=("$kept/team.txt") ;;
  zipf) script=zipf.lua; args=("$kept/codes.txt") ;;
  uniform) script=zipf.lua; args=("$kept/codes.txt" uniform) ;;
  hot) script=zipf.lua; args=("$kept/hot.txt") ;;
  *) echo "ROW is cycle, zipf, uniform or hot" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load() {
  wrk -t2 -c64 -d"$1" -H "User-Agent: $agent" -H "Referer: https://news.example.org/articles/42" \
      -s "$here/wrk/$script" "http://127.0.0.1:$port" -- "${args[@]}"
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for round in $(seq "$ROUNDS"); do
  line="round $round:"
  for bin in "$@"; do
    rm -rf "$work/data"
    cp -r "$kept/data" "$work/data"
    VSL_STORAGE__PATH="$work/data" RUST_LOG=warn "$bin" --config "$kept/config.toml" \
      > "$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.05; done
    load "$WARMUP" > /dev/null
    before=$(cpu "$pid")
    rps=$(load "$DURATION" | awk '/Requests\/sec/ {print $2}')
    after=$(cpu "$pid")
    seconds=${DURATION%s}
    line="$line $(basename "$bin")=$(printf %.0f "$rps")/s ($(python3 -c \
      "print(round(($after - $before) * 1e6 / $(getconf CLK_TCK) / ($rps * $seconds), 1))") µs)"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  done
  echo "$line"
done
