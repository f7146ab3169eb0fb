#!/usr/bin/env bash
# Redirect benchmark (SPEC §14): vshortlink with visits recorded ("ours") against the ceiling, a
# bare axum server answering 302 from an in-memory HashMap ("bare", examples/bare_redirect.rs),
# and against a second vshortlink with visit recording switched off ("off"), all on 127.0.0.1,
# measured by wrk in the same run, alternating, for three scenarios: one hot code, cycling over
# every code, unknown codes. Every request carries the same browser User-Agent and Referer.
# See benches/README.md. Everything it starts is killed on exit; every wrk run is bounded in time.
#
# Environment (defaults in brackets):
#   SIDES ["ours off bare"]  the servers measured, in this order in the first round and in the
#                        table: ours (visits on), off (visits off), bare (the ceiling); the table
#                        shows ours/bare and ours/off when both sides of the ratio are measured
#   LINKS [100000]       links created in each vshortlink, and codes held by the bare server
#   DURATION [10s]       each measured wrk run; WARMUP [2s] the wrk run before each of them
#   THREADS [2]          wrk threads; CONNECTIONS [64] wrk connections
#   ROUNDS [1]           repeat every measurement; the table shows each cell's median round
#   PAUSE [2]            seconds of quiet before each warm-up (lets background work settle)
#   SETTLE_MAX [60]      then, with ours measured, wait up to this long for ours' visit queue to
#                        drain (its writer idle) before any side's warm-up; 0: do not wait
#   CACHE_CAPACITY [100000]  vshortlink's [cache] capacity
#   USER_AGENT, REFERER  sent with every request (default: desktop Chrome 124 on Windows 10;
#                        https://news.example.org/articles/42)
#   SKIP_BUILD [0]       1: use the binaries as they are
#   OURS_BIN, BARE_BIN   the binaries (default: the release builds of this repo; off runs OURS_BIN)
#   KEEP_TMP [0]         1: keep the temp dir (configs, data, logs, raw wrk output)
#   NOT_FOUND_RATE [off] limits.rates.not_found_per_ip of both vshortlinks: the default 10/s
#                        would turn the unknown-code scenario (one client address) into 429s;
#                        benches/limits.sh measures what the limits cost
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SIDES=${SIDES:-ours off bare}
LINKS=${LINKS:-100000}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
ROUNDS=${ROUNDS:-1}
PAUSE=${PAUSE:-2}
SETTLE_MAX=${SETTLE_MAX:-60}
CACHE_CAPACITY=${CACHE_CAPACITY:-100000}
USER_AGENT=${USER_AGENT:-Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36}
REFERER=${REFERER:-https://news.example.org/articles/42}
SKIP_BUILD=${SKIP_BUILD:-0}
KEEP_TMP=${KEEP_TMP:-0}
NOT_FOUND_RATE=${NOT_FOUND_RATE:-off}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OURS_BIN=${OURS_BIN:-$TARGET_DIR/release/vshortlink}
BARE_BIN=${BARE_BIN:-$TARGET_DIR/release/examples/bare_redirect}
ADMIN_KEY=bench-admin-key-0001
declare -A ADDR=([ours]=127.0.0.1:18180 [bare]=127.0.0.1:18181 [off]=127.0.0.1:18182)

die() { echo "redirect.sh: $*" >&2; exit 1; }
log() { echo "== $*" >&2; }

read -ra SIDE_LIST <<<"$SIDES"
((${#SIDE_LIST[@]} > 0)) || die "SIDES is empty"
declare -A HAS=()
for side in "${SIDE_LIST[@]}"; do
  case $side in ours | off | bare) ;; *) die "SIDES: unknown side '$side' (ours, off, bare)" ;; esac
  [[ -z ${HAS[$side]:-} ]] || die "SIDES: '$side' is given twice"
  HAS[$side]=1
done
has() { [[ -n ${HAS[$1]:-} ]]; }

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
if has ours || has off; then [[ -x $OURS_BIN ]] || die "no executable at $OURS_BIN"; fi
if has bare; then [[ -x $BARE_BIN ]] || die "no executable at $BARE_BIN"; fi

# Environment overrides would change what is measured.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^VSL_' || true)

# ---------------------------------------------------------------- processes
TMP=$(mktemp -d "${TMPDIR:-/tmp}/vsl-redirect-bench.XXXXXX")
declare -A PID=() CODES=() HOT=()
cleanup() {
  local rc=$? pid
  for pid in "${PID[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PID[@]}"; do
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

# http_get URL: the body of a 2xx answer (empty when there is none).
http_get() {
  if command -v curl >/dev/null; then
    curl -sf --max-time 5 "$1" || true
    return
  fi
  python3 - "$1" <<'PY' || true
import sys, urllib.request
try:
    sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
except Exception: pass
PY
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

for side in "${SIDE_LIST[@]}"; do
  if port_busy "${ADDR[$side]}"; then die "${ADDR[$side]} (for $side) is already in use"; fi
done

# ---------------------------------------------------------------- vshortlink: ours, off
# start_vsl SIDE VISITS: a vshortlink on ADDR[SIDE] with its config, data and log under $TMP.
# The configs of ours and off differ only in the address, the data dir and [visits] enabled.
start_vsl() {
  local side=$1 visits=$2 i
  mkdir -p "$TMP/$side"
  cat >"$TMP/$side/config.toml" <<EOF
[server]
listen = "${ADDR[$side]}"
base_url = "http://sl.test"
[storage]
path = "$TMP/$side/data"
[cache]
capacity = $CACHE_CAPACITY
[[auth.keys]]
key = "$ADMIN_KEY"
name = "bench"
role = "admin"
[visits]
enabled = $visits
[limits.rates]
not_found_per_ip = "$NOT_FOUND_RATE"
EOF
  log "starting vshortlink '$side' ([visits] enabled = $visits) on ${ADDR[$side]} (log: $TMP/$side.log)"
  "$OURS_BIN" --config "$TMP/$side/config.toml" >"$TMP/$side.log" 2>&1 &
  PID[$side]=$!
  for i in $(seq 600); do
    if [[ $(http_code "http://${ADDR[$side]}/healthz") == 200 ]]; then break; fi
    if ! kill -0 "${PID[$side]}" 2>/dev/null; then
      tail -n 30 "$TMP/$side.log" >&2
      die "vshortlink '$side' exited before /healthz answered"
    fi
    if ((i == 600)); then
      tail -n 30 "$TMP/$side.log" >&2
      die "vshortlink '$side': /healthz did not answer 200 within 60 s"
    fi
    sleep 0.1
  done
}

# create_links ADDR OUT: creates LINKS links (https://example.com/<i>) through
# POST /api/v1/links/batch on ADDR and writes the codes, in that order, one a line, into OUT.
create_links() {
  log "creating $LINKS links on $1 through POST /api/v1/links/batch"
  python3 - "http://$1" "$ADMIN_KEY" "$LINKS" "$2" <<'PY'
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
  [[ -s $2 ]] || die "no codes were created on $1"
}

for side in ours off; do
  has "$side" || continue
  if [[ $side == ours ]]; then start_vsl ours true; else start_vsl off false; fi
  CODES[$side]=$TMP/${side}_codes.txt
  create_links "${ADDR[$side]}" "${CODES[$side]}"
  HOT[$side]=$(head -n 1 "${CODES[$side]}")
  log "vshortlink '$side' RSS after creating: $(rss_mb "${PID[$side]}")"
done

# ---------------------------------------------------------------- bare server
if has bare; then
  log "starting bare_redirect on ${ADDR[bare]} with $LINKS codes"
  : >"$TMP/bare.log" # exists before the server's own redirection opens it
  "$BARE_BIN" --listen "${ADDR[bare]}" --codes "$LINKS" >"$TMP/bare.log" 2>&1 &
  PID[bare]=$!
  for i in $(seq 600); do
    if grep -qs '^listening addr=' "$TMP/bare.log"; then break; fi
    kill -0 "${PID[bare]}" 2>/dev/null || { cat "$TMP/bare.log" >&2; die "bare_redirect exited"; }
    if ((i == 600)); then die "bare_redirect did not start within 60 s"; fi
    sleep 0.1
  done
  CODES[bare]=$TMP/bare_codes.txt
  seq 0 $((LINKS - 1)) | sed 's/^/c/' >"${CODES[bare]}"
  HOT[bare]=c0
fi

# ---------------------------------------------------------------- sanity
for side in "${SIDE_LIST[@]}"; do
  addr=${ADDR[$side]} code=${HOT[$side]}
  status=$(http_code "http://$addr/$code")
  location=$(http_location "http://$addr/$code")
  [[ $status == 302 && $location == https://example.com/0 ]] ||
    die "$side: GET /$code answered $status with Location '$location', expected 302 to https://example.com/0"
  status=$(http_code "http://$addr/zzzzzz")
  [[ $status == 404 ]] || die "$side: GET /zzzzzz (never created) answered $status, expected 404"
done
log "sanity: every server ($SIDES) answers 302 for its first code and 404 for an unknown one"

# ---------------------------------------------------------------- measurements
WRK_TIMEOUT=$(($(duration_secs "$DURATION") + 60))
WARMUP_TIMEOUT=$(($(duration_secs "$WARMUP") + 60))

# The same headers on every request to every side (the Lua scripts' wrk.format adds them too), so
# that ours' visit writer parses a browser User-Agent and keeps a referer host.
WRK_HEADERS=(-H "User-Agent: $USER_AGENT" -H "Referer: $REFERER")

# wrk_args SCENARIO SIDE: the URL and script arguments of that scenario for that server.
wrk_args() {
  local addr=${ADDR[$2]} codes=${CODES[$2]} hot=${HOT[$2]}
  case $1 in
    hot) echo "http://$addr/$hot" ;;
    cycle) echo "-s $ROOT/benches/wrk/cycle.lua http://$addr -- $codes $THREADS" ;;
    unknown) echo "-s $ROOT/benches/wrk/unknown.lua http://$addr -- $codes" ;;
  esac
}

# Wall-clock seconds spent in wrk (warm-ups included), by side and by side.scenario; "settle":
# seconds spent waiting for ours' visit writer to drain its queue.
declare -A WRK_SECS=()
add_secs() { # add_secs KEY START: adds the seconds from START ($EPOCHREALTIME) to now
  WRK_SECS[$1]=$(awk -v a="${WRK_SECS[$1]:-0}" -v s="$2" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.3f", a + e - s }')
}

# metric TEXT NAME: the value of the unlabelled metric NAME in Prometheus text (empty if absent).
metric() { awk -v n="$2" '$1 == n { print $2; exit }' <<<"$1"; }

# settle: waits (at most SETTLE_MAX seconds) until ours' visit writer is idle: queue empty and
# vsl_visits_written_total unchanged over 0.2 s. Its backlog after a run against ours would
# otherwise take CPU from the next run, whichever side that is. The time until the last poll that
# saw it busy is added to WRK_SECS[settle].
settle() {
  has ours && ((SETTLE_MAX > 0)) || return 0
  local t0=$EPOCHREALTIME busy="" m depth written last=x waited
  while :; do
    m=$(http_get "http://${ADDR[ours]}/metrics")
    depth=$(metric "$m" vsl_visit_queue_depth) written=$(metric "$m" vsl_visits_written_total)
    if [[ $depth != 0 || ($last != x && $written != "$last") ]]; then busy=$EPOCHREALTIME; fi
    [[ $depth == 0 && $written == "$last" ]] && break
    last=$written
    waited=$(awk -v s="$t0" -v e="$EPOCHREALTIME" 'BEGIN { printf "%.1f", e - s }')
    if awk -v w="$waited" -v m="$SETTLE_MAX" 'BEGIN { exit !(w >= m) }'; then
      log "settle: ours' visit queue still at ${depth:-?} after $waited s; going on"
      break
    fi
    sleep 0.2
  done
  [[ -n $busy ]] || return 0
  WRK_SECS[settle]=$(awk -v a="${WRK_SECS[settle]:-0}" -v s="$t0" -v e="$busy" 'BEGIN { printf "%.3f", a + e - s }')
  waited=$(awk -v s="$t0" -v e="$busy" 'BEGIN { printf "%.1f", e - s }')
  log "settle: ours' visit writer was busy for $waited s more"
}

# measure SCENARIO SIDE ROUND: warm-up, then the measured run into $TMP/SCENARIO.SIDE.ROUND.txt
measure() {
  local args out=$TMP/$1.$2.$3.txt t0
  read -ra args <<<"$(wrk_args "$1" "$2")"
  sleep "$PAUSE"
  settle
  t0=$EPOCHREALTIME
  timeout -k 5 "$WARMUP_TIMEOUT" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" "${WRK_HEADERS[@]}" "${args[@]}" >/dev/null ||
    die "wrk warm-up failed: $1 $2"
  timeout -k 5 "$WRK_TIMEOUT" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency "${WRK_HEADERS[@]}" "${args[@]}" >"$out" ||
    { cat "$out" >&2; die "wrk failed: $1 $2"; }
  add_secs "$2" "$t0"
  add_secs "$2.$1" "$t0"
  log "$(printf '%-8s %-5s round %s: %s req/s' "$1" "$2" "$3" "$(awk '/^Requests\/sec:/ {print $2}' "$out")")"
}

SCENARIOS=(hot cycle unknown)
log "wrk: $THREADS threads, $CONNECTIONS connections, $DURATION per run after a $WARMUP warm-up, $ROUNDS round(s), sides: $SIDES"
NSIDES=${#SIDE_LIST[@]}
for round in $(seq "$ROUNDS"); do
  # Rotate which server goes first from one round to the next (two sides: the order flips).
  k=$(((round - 1) % NSIDES))
  sides=("${SIDE_LIST[@]:k}" "${SIDE_LIST[@]:0:k}")
  for scenario in "${SCENARIOS[@]}"; do
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

# percent A B: A as a percentage of B.
percent() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f %%", 100 * a / b; else print "-" }'; }

# Ratios of ours to the other sides measured: ours/bare (the ceiling), ours/off (visits on vs off).
RATIOS=()
if has ours && has bare; then RATIOS+=(bare); fi
if has ours && has off; then RATIOS+=(off); fi

declare -A LABEL=([hot]="cached hit (1 hot code)" [cycle]="cycle over $LINKS codes" [unknown]="unknown codes (random)")
declare -A RPS=() P99=()
echo
echo "redirect benchmark: $LINKS links, wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $ROUNDS round(s), $(nproc) CPUs"
declare -A MEANS=([ours]="vshortlink, visits recorded" [off]="vshortlink, [visits] enabled = false"
  [bare]="axum + HashMap (the ceiling)")
legend=""
for side in "${SIDE_LIST[@]}"; do legend+="${legend:+; }$side = ${MEANS[$side]}"; done
echo "sides: $legend"
head1=$(printf '%-28s' scenario)
head2=$(printf '%-28s' "----------------------------")
for side in "${SIDE_LIST[@]}"; do head1+=$(printf ' %11s' "$side req/s"); head2+=$(printf ' %11s' "----------"); done
for r in "${RATIOS[@]}"; do head1+=$(printf ' %9s' "ours/$r"); head2+=$(printf ' %9s' "---------"); done
for side in "${SIDE_LIST[@]}"; do head1+=$(printf ' %9s' "$side p99"); head2+=$(printf ' %9s' "--------"); done
echo "$head1"
echo "$head2"
notes=()
for scenario in "${SCENARIOS[@]}"; do
  line=$(printf '%-28s' "${LABEL[$scenario]}")
  for side in "${SIDE_LIST[@]}"; do
    read -r rps p99 req non sock <<<"$(parse "$(median "$scenario" "$side")")"
    RPS[$side]=$rps P99[$side]=$p99
    line+=$(printf ' %11.0f' "$rps")
    if ((non > 0)); then
      expected=""
      if [[ $scenario == unknown ]]; then expected=" (expected: unknown codes answer 404)"; fi
      notes+=("$scenario/$side: Non-2xx or 3xx responses: $non of $req$expected")
    fi
    if ((sock > 0)); then notes+=("$scenario/$side: socket errors: $sock"); fi
  done
  for r in "${RATIOS[@]}"; do line+=$(printf ' %9s' "$(percent "${RPS[ours]}" "${RPS[$r]}")"); done
  for side in "${SIDE_LIST[@]}"; do line+=$(printf ' %7.2fms' "${P99[$side]}"); done
  echo "$line"
done
echo
for n in "${notes[@]}"; do echo "  $n"; done
for side in ours off; do
  if has "$side"; then echo "  vshortlink '$side' RSS at the end: $(rss_mb "${PID[$side]}")"; fi
done

if has off; then
  m=$(http_get "http://${ADDR[off]}/metrics")
  echo "  off /metrics: vsl_visits_queued_total $(metric "$m" vsl_visits_queued_total) (recording off: expected 0)"
fi
if has ours; then
  m=$(http_get "http://${ADDR[ours]}/metrics")
  for name in vsl_visits_queued_total vsl_visits_dropped_total vsl_visits_written_total vsl_visits_failed_total \
    vsl_visit_queue_depth vsl_visit_queue_capacity vsl_cache_hits_total vsl_cache_misses_total; do
    echo "  ours /metrics: $name $(metric "$m" "$name")"
  done
  queued=$(metric "$m" vsl_visits_queued_total) dropped=$(metric "$m" vsl_visits_dropped_total)
  written=$(metric "$m" vsl_visits_written_total) failed=$(metric "$m" vsl_visits_failed_total)
  if [[ -n $queued && -n $dropped && -n $written ]]; then
    awk -v q="$queued" -v d="$dropped" -v w="$written" -v f="${failed:-0}" \
      -v all="${WRK_SECS[ours]:-0}" -v hot="${WRK_SECS[ours.hot]:-0}" -v cyc="${WRK_SECS[ours.cycle]:-0}" \
      -v settle="${WRK_SECS[settle]:-0}" '
      BEGIN {
        printf "  ours visits: drop share %.2f %% = dropped / (queued + dropped) = %d / %d\n",
          (q + d > 0 ? 100 * d / (q + d) : 0), d, q + d
        printf "  ours visits: queued but not yet written at the end: %d (queued - written - failed)\n", q - w - f
        printf "  ours visit writer, ESTIMATE: %.0f visits/s = written %d / %.1f s of wrk against ours (every scenario, warm-ups included)\n",
          (all > 0 ? w / all : 0), w, all
        printf "  ours visit writer, ESTIMATE: %.0f visits/s = written %d / %.1f s of wrk against ours in hot + cycle only (unknown codes record no visit)\n",
          (hot + cyc > 0 ? w / (hot + cyc) : 0), w, hot + cyc
        printf "  ours visit writer, ESTIMATE: %.0f visits/s = written %d / (%.1f s in hot + cycle + %.1f s waiting for its queue to drain)\n",
          (hot + cyc + settle > 0 ? w / (hot + cyc + settle) : 0), w, hot + cyc, settle
        print "    (estimates: with no drops the writer kept up and can do at least this; with drops it was saturated and also wrote"
        print "     after wrk stopped, during PAUSE and the settle waits: the first two overstate its rate under load, the third counts"
        print "     the settle waits but not PAUSE)"
      }'
  else
    echo "  ours visits: /metrics gave no visit counters"
  fi
fi
