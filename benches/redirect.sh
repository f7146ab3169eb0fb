#!/usr/bin/env bash
# Redirect benchmark (SPEC §14): vshortlink against the ceiling, a bare axum server answering 302
# from an in-memory HashMap (examples/bare_redirect.rs), both on 127.0.0.1, measured by wrk in the
# same run, alternating, for three scenarios: one hot code, cycling over every code, unknown codes.
# See benches/README.md. Everything it starts is killed on exit; every wrk run is bounded in time.
#
# Environment (defaults in brackets):
#   LINKS [100000]       links created in vshortlink, and codes held by the bare server
#   DURATION [10s]       each measured wrk run; WARMUP [2s] the wrk run before each of them
#   THREADS [2]          wrk threads; CONNECTIONS [64] wrk connections
#   ROUNDS [1]           repeat every measurement; the table shows each cell's median round
#   PAUSE [2]            seconds of quiet before each warm-up (lets background work settle)
#   CACHE_CAPACITY [100000]  vshortlink's [cache] capacity
#   SKIP_BUILD [0]       1: use the binaries as they are
#   OURS_BIN, BARE_BIN   the binaries (default: the release builds of this repo)
#   KEEP_TMP [0]         1: keep the temp dir (config, data, logs, raw wrk output)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

LINKS=${LINKS:-100000}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
ROUNDS=${ROUNDS:-1}
PAUSE=${PAUSE:-2}
CACHE_CAPACITY=${CACHE_CAPACITY:-100000}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_TMP=${KEEP_TMP:-0}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OURS_BIN=${OURS_BIN:-$TARGET_DIR/release/vshortlink}
BARE_BIN=${BARE_BIN:-$TARGET_DIR/release/examples/bare_redirect}
OURS_ADDR=127.0.0.1:18180
BARE_ADDR=127.0.0.1:18181
ADMIN_KEY=bench-admin-key-0001

die() { echo "redirect.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }

# ---------------------------------------------------------------- tools
command -v python3 >/dev/null || die "python3 is needed (link creation, health checks)"
if ! command -v wrk >/dev/null; then
  log "installing wrk"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq wrk >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null && apt-get install -y -qq wrk >/dev/null; } ||
    die "could not install wrk"
fi

if [[ $SKIP_BUILD != 1 ]]; then
  log "building (release)"
  cargo build --release --bin vshortlink --example bare_redirect
fi
[[ -x $OURS_BIN ]] || die "no executable at $OURS_BIN"
[[ -x $BARE_BIN ]] || die "no executable at $BARE_BIN"

# Environment overrides would change what is measured.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^VSL_' || true)

# ---------------------------------------------------------------- processes
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vsl-redirect-bench.XXXXXX")
OURS_PID=
BARE_PID=
cleanup() {
  local rc=$?
  for pid in $OURS_PID $BARE_PID; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $OURS_PID $BARE_PID; do
    # Give the server its graceful shutdown (drain visits, flush), then insist.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ $KEEP_TMP == 1 ]]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_busy() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# http_code URL: the status code, or 000 when nothing answers.
http_code() {
  if command -v curl >/dev/null; then
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || true
  else
    python3 - "$1" <<'PY' || echo 000
import sys, urllib.request, urllib.error
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k): return None
try:
    r = urllib.request.build_opener(NoRedirect).open(sys.argv[1], timeout=2); print(r.status)
except urllib.error.HTTPError as e: print(e.code)
except Exception: print("000")
PY
  fi
}

# http_location URL: the Location header of the response (empty if none).
http_location() {
  python3 - "$1" <<'PY'
import sys, urllib.request, urllib.error
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k): return None
try:
    r = urllib.request.build_opener(NoRedirect).open(sys.argv[1], timeout=5)
    print(r.headers.get("Location", ""))
except urllib.error.HTTPError as e: print(e.headers.get("Location", ""))
except Exception: print("")
PY
}

rss_mb() { awk '/^VmRSS/ {printf "%.0f MB", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"; }

# Seconds in a wrk duration (10, 10s, 2m, 1h) for the timeout that bounds each wrk run.
duration_secs() {
  case $1 in
    *h) echo $((${1%h} * 3600)) ;; *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;; *) echo "$1" ;;
  esac
}

for addr in "$OURS_ADDR" "$BARE_ADDR"; do
  if port_busy "$addr"; then die "$addr is already in use"; fi
done

# ---------------------------------------------------------------- vshortlink
cat >"$TMP/config.toml" <<EOF
[server]
listen = "$OURS_ADDR"
base_url = "http://sl.test"
[storage]
path = "$TMP/data"
[cache]
capacity = $CACHE_CAPACITY
[[auth.keys]]
key = "$ADMIN_KEY"
name = "bench"
role = "admin"
[visits]
enabled = true
EOF

log "starting vshortlink on $OURS_ADDR (log: $TMP/ours.log)"
"$OURS_BIN" --config "$TMP/config.toml" >"$TMP/ours.log" 2>&1 &
OURS_PID=$!
for i in $(seq 600); do
  if [[ $(http_code "http://$OURS_ADDR/healthz") == 200 ]]; then break; fi
  if ! kill -0 "$OURS_PID" 2>/dev/null; then
    tail -n 30 "$TMP/ours.log" >&2
    die "vshortlink exited before /healthz answered"
  fi
  if ((i == 600)); then tail -n 30 "$TMP/ours.log" >&2; die "/healthz did not answer 200 within 60 s"; fi
  sleep 0.1
done

log "creating $LINKS links through POST /api/v1/links/batch"
python3 - "http://$OURS_ADDR" "$ADMIN_KEY" "$LINKS" "$TMP/ours_codes.txt" <<'PY'
import json, sys, threading, time, urllib.error, urllib.request

base, key, total, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
BATCH, WORKERS = 1000, 4
batches = [(s, min(s + BATCH, total)) for s in range(0, total, BATCH)]
codes = [None] * len(batches)
errors = []
lock = threading.Lock()
next_batch = iter(range(len(batches)))

def post(body):
    req = urllib.request.Request(
        base + "/api/v1/links/batch", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"HTTP {e.code}: {e.read()[:500]!r}") from None

def worker():
    while not errors:
        with lock:
            k = next(next_batch, None)
        if k is None:
            return
        start, end = batches[k]
        try:
            res = post({"links": [{"url": f"https://example.com/{i}"} for i in range(start, end)]})
            results = res["results"]
            if len(results) != end - start:
                raise RuntimeError(f"{len(results)} results for {end - start} links")
            bad = [r for r in results if not r.get("ok")]
            if bad:
                raise RuntimeError(f"{len(bad)} links refused, first: {bad[0]}")
            codes[k] = [r["link"]["code"] for r in results]
        except Exception as e:
            with lock:
                errors.append(f"batch {start}..{end}: {e}")

t0 = time.monotonic()
threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
for t in threads: t.start()
for t in threads: t.join()
took = time.monotonic() - t0
if errors:
    sys.exit("link creation failed: " + errors[0])
with open(out, "w") as f:
    for batch in codes:
        f.write("".join(c + "\n" for c in batch))
print(f"   created {total} links in {took:.1f} s ({total / took:,.0f}/s, "
      f"batches of {BATCH}, {WORKERS} clients)", file=sys.stderr)
PY
[[ -s $TMP/ours_codes.txt ]] || die "no codes were created"
log "vshortlink RSS after creating: $(rss_mb "$OURS_PID")"

# ---------------------------------------------------------------- bare server
log "starting bare_redirect on $BARE_ADDR with $LINKS codes"
: >"$TMP/bare.log" # exists before the server's own redirection opens it
"$BARE_BIN" --listen "$BARE_ADDR" --codes "$LINKS" >"$TMP/bare.log" 2>&1 &
BARE_PID=$!
for i in $(seq 600); do
  if grep -qs '^listening addr=' "$TMP/bare.log"; then break; fi
  kill -0 "$BARE_PID" 2>/dev/null || { cat "$TMP/bare.log" >&2; die "bare_redirect exited"; }
  if ((i == 600)); then die "bare_redirect did not start within 60 s"; fi
  sleep 0.1
done
seq 0 $((LINKS - 1)) | sed 's/^/c/' >"$TMP/bare_codes.txt"

# ---------------------------------------------------------------- sanity
HOT_OURS=$(head -n 1 "$TMP/ours_codes.txt")
HOT_BARE=c0
for side in "ours $OURS_ADDR $HOT_OURS" "bare $BARE_ADDR $HOT_BARE"; do
  read -r name addr code <<<"$side"
  status=$(http_code "http://$addr/$code")
  location=$(http_location "http://$addr/$code")
  [[ $status == 302 && $location == https://example.com/0 ]] ||
    die "$name: GET /$code answered $status with Location '$location', expected 302 to https://example.com/0"
  status=$(http_code "http://$addr/zzzzzz")
  [[ $status == 404 ]] || die "$name: GET /zzzzzz (never created) answered $status, expected 404"
done
log "sanity: both servers answer 302 for their first code and 404 for an unknown one"

# ---------------------------------------------------------------- measurements
WRK_TIMEOUT=$(($(duration_secs "$DURATION") + 60))
WARMUP_TIMEOUT=$(($(duration_secs "$WARMUP") + 60))

# wrk_args SCENARIO SIDE: the URL and script arguments of that scenario for that server.
wrk_args() {
  local addr codes hot
  if [[ $2 == ours ]]; then addr=$OURS_ADDR codes=$TMP/ours_codes.txt hot=$HOT_OURS
  else addr=$BARE_ADDR codes=$TMP/bare_codes.txt hot=$HOT_BARE; fi
  case $1 in
    hot) echo "http://$addr/$hot" ;;
    cycle) echo "-s $ROOT/benches/wrk/cycle.lua http://$addr -- $codes $THREADS" ;;
    unknown) echo "-s $ROOT/benches/wrk/unknown.lua http://$addr -- $codes" ;;
  esac
}

# measure SCENARIO SIDE ROUND: warm-up, then the measured run into $TMP/SCENARIO.SIDE.ROUND.txt
measure() {
  local args out=$TMP/$1.$2.$3.txt
  read -ra args <<<"$(wrk_args "$1" "$2")"
  sleep "$PAUSE"
  timeout -k 5 "$WARMUP_TIMEOUT" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" "${args[@]}" >/dev/null ||
    die "wrk warm-up failed: $1 $2"
  timeout -k 5 "$WRK_TIMEOUT" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "${args[@]}" >"$out" ||
    { cat "$out" >&2; die "wrk failed: $1 $2"; }
  log "$(printf '%-8s %-5s round %s: %s req/s' "$1" "$2" "$3" "$(awk '/^Requests\/sec:/ {print $2}' "$out")")"
}

SCENARIOS=(hot cycle unknown)
log "wrk: $THREADS threads, $CONNECTIONS connections, $DURATION per run after a $WARMUP warm-up, $ROUNDS round(s)"
for round in $(seq "$ROUNDS"); do
  for scenario in "${SCENARIOS[@]}"; do
    # Alternate which server goes first from one round to the next.
    if ((round % 2)); then sides=(ours bare); else sides=(bare ours); fi
    for side in "${sides[@]}"; do measure "$scenario" "$side" "$round"; done
  done
done

# ---------------------------------------------------------------- report
# parse FILE: "req/s p99_ms requests non2xx3xx socket_errors"
parse() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
      if (v ~ /m$/) return v * 60000; if (v ~ /s$/) return v * 1000; return v + 0 }
    /^Requests\/sec:/ { rps = $2 }
    /^ +99%/ { p99 = ms($2) }
    / requests in / { reqs = $1 }
    /Non-2xx or 3xx responses:/ { non = $NF }
    /Socket errors:/ { gsub(",", ""); sock = $4 + $6 + $8 + $10 }
    END { printf "%s %.3f %s %d %d\n", rps, p99, reqs, non, sock }' "$1"
}

# median SCENARIO SIDE: the file of the round with the median req/s.
median() {
  local f
  for f in "$TMP/$1.$2".*.txt; do echo "$(parse "$f" | cut -d' ' -f1) $f"; done |
    sort -n | awk '{ line[NR] = $2 } END { print line[int((NR + 1) / 2)] }'
}

declare -A LABEL=([hot]="cached hit (1 hot code)" [cycle]="cycle over $LINKS codes" [unknown]="unknown codes (random)")
echo
echo "redirect benchmark: $LINKS links, wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS round(s), $(nproc) CPUs"
printf '%-28s %12s %12s %8s %10s %10s\n' scenario "ours req/s" "bare req/s" "ratio" "ours p99" "bare p99"
printf '%-28s %12s %12s %8s %10s %10s\n' "----------------------------" "----------" "----------" "------" "--------" "--------"
notes=()
for scenario in "${SCENARIOS[@]}"; do
  read -r o_rps o_p99 o_req o_non o_sock <<<"$(parse "$(median "$scenario" ours)")"
  read -r b_rps b_p99 b_req b_non b_sock <<<"$(parse "$(median "$scenario" bare)")"
  ratio=$(awk -v o="$o_rps" -v b="$b_rps" 'BEGIN { if (b > 0) printf "%.1f %%", 100 * o / b; else print "-" }')
  printf '%-28s %12.0f %12.0f %8s %8.2fms %8.2fms\n' "${LABEL[$scenario]}" "$o_rps" "$b_rps" "$ratio" "$o_p99" "$b_p99"
  for side in ours bare; do
    if [[ $side == ours ]]; then non=$o_non sock=$o_sock req=$o_req; else non=$b_non sock=$b_sock req=$b_req; fi
    if ((non > 0)); then
      expected=""
      if [[ $scenario == unknown ]]; then expected=" (expected: unknown codes answer 404)"; fi
      notes+=("$scenario/$side: Non-2xx or 3xx responses: $non of $req$expected")
    fi
    if ((sock > 0)); then notes+=("$scenario/$side: socket errors: $sock"); fi
  done
done
echo
for n in "${notes[@]}"; do echo "  $n"; done
echo "  vshortlink RSS at the end: $(rss_mb "$OURS_PID")"
if [[ $(http_code "http://$OURS_ADDR/metrics") == 200 ]]; then
  curl -s --max-time 5 "http://$OURS_ADDR/metrics" 2>/dev/null | grep -iE '^[a-z_]*(visit|cache)[a-z_]*' |
    grep -v '^#' | head -n 12 | sed 's/^/  metrics: /' || true
fi
