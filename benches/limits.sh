#!/usr/bin/env bash
# Rate-limit cost (issue 12): redirect throughput of two vshortlink servers in one run, one with
# every redirect-path limit on ("on": redirect_per_ip and not_found_per_ip with quotas too large
# to refuse anything, so each request pays for the check) and one with them off ("off"). Same
# config otherwise (visits recorded). Two scenarios, alternating on/off in each round: one hot
# code, and unknown codes (the 404 path, where not_found_per_ip is checked). Prints req/s and the
# on/off ratio per scenario. 127.0.0.1 only; every wrk run is bounded; everything started is
# killed on exit.
#
# Environment: DURATION [5s] per measured run, WARMUP [1s], ROUNDS [2], CONNECTIONS [64],
# THREADS [2], SKIP_BUILD [0], OURS_BIN (default: the release build of this repo).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
ROUNDS=${ROUNDS:-2}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
SKIP_BUILD=${SKIP_BUILD:-0}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OURS_BIN=${OURS_BIN:-$TARGET_DIR/release/vshortlink}
KEY=bench-admin-key-0001
declare -A ADDR=([on]=127.0.0.1:18190 [off]=127.0.0.1:18191)
declare -A PID=()

die() { echo "limits.sh: $*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"
while read -r var; do unset "$var"; done < <(compgen -e | grep '^VSL_' || true)
if [[ $SKIP_BUILD != 1 ]]; then cargo build --release --bin vshortlink >&2; fi
TMP=$(mktemp -d)
cleanup() {
  for side in "${!PID[@]}"; do kill "${PID[$side]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

start() {
  local side=$1 rates=$2
  mkdir -p "$TMP/$side"
  cat >"$TMP/$side/config.toml" <<CONF
[server]
listen = "${ADDR[$side]}"
base_url = "http://sl.test"
[storage]
path = "$TMP/$side/data"
[[auth.keys]]
key = "$KEY"
name = "bench"
role = "admin"
[limits.rates]
$rates
CONF
  "$OURS_BIN" --config "$TMP/$side/config.toml" >"$TMP/$side.log" 2>&1 &
  PID[$side]=$!
  for _ in $(seq 300); do
    curl -sf "http://${ADDR[$side]}/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$side did not start (log: $(tail -n 5 "$TMP/$side.log"))"
}

start on 'redirect_per_ip = "1000000/s"
not_found_per_ip = "1000000/s"'
start off 'redirect_per_ip = "off"
not_found_per_ip = "off"'

declare -A CODE=()
for side in on off; do
  CODE[$side]=$(curl -sf -H "Authorization: Bearer $KEY" -H 'content-type: application/json' \
    -d '{"url":"https://example.com/hot"}' "http://${ADDR[$side]}/api/v1/links" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
done

UA='Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36'
run_wrk() { # side scenario duration -> req/s
  local side=$1 scenario=$2 d=$3 url
  if [[ $scenario == hot ]]; then
    url="http://${ADDR[$side]}/${CODE[$side]}"
    timeout 60 wrk -t"$THREADS" -c"$CONNECTIONS" -d"$d" -H "User-Agent: $UA" "$url"
  else
    timeout 60 wrk -t"$THREADS" -c"$CONNECTIONS" -d"$d" -H "User-Agent: $UA" \
      --script benches/wrk/unknown.lua "http://${ADDR[$side]}"
  fi | awk '/^Requests\/sec/ {print $2}'
}

declare -A SUM=()
for scenario in hot unknown; do
  for round in $(seq "$ROUNDS"); do
    for side in on off; do
      run_wrk "$side" "$scenario" "$WARMUP" >/dev/null
      rps=$(run_wrk "$side" "$scenario" "$DURATION")
      echo "round $round $scenario $side: $rps req/s" >&2
      SUM[$scenario.$side]=$(python3 -c "print(${SUM[$scenario.$side]:-0} + ${rps:-0})")
    done
  done
done
# Nothing may have been refused: the quotas are there to be checked, not to bite.
for side in on off; do
  refused=$(curl -sf "http://${ADDR[$side]}/metrics" | awk '/^vsl_rate_limited_total/ {s += $2} END {print s + 0}')
  echo "$side: 429s answered = $refused" >&2
done
printf '%-8s %12s %12s %8s\n' scenario "on req/s" "off req/s" "on/off"
for scenario in hot unknown; do
  python3 - "${SUM[$scenario.on]}" "${SUM[$scenario.off]}" "$ROUNDS" "$scenario" <<'PY'
import sys
on, off, rounds, name = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print(f"{name:<8} {on / rounds:12.0f} {off / rounds:12.0f} {on / off if off else 0:8.3f}")
PY
done
