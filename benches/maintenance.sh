#!/usr/bin/env bash
# Maintenance benchmark (issue 5, SPEC §14): LINKS links (default 1,000,000), EXPIRING_PCT of
# them (default 10) already expired; then, side by side in one run, the cached redirect with
# the job idle and with POST /api/v1/maintenance/run in progress. Prints the job's report and
# time, the server's peak RSS, and the throughput ratio.
#
#   LINKS=1000000 DURATION=10s benches/maintenance.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LINKS=${LINKS:-1000000}
EXPIRING_PCT=${EXPIRING_PCT:-10}
DURATION=${DURATION:-10s}
ADDR=127.0.0.1:18190
KEY=bench-admin-key-0001

command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq wrk; }; }
cargo build --release --bin vshortlink
TMP=$(mktemp -d)
cleanup() { [[ -n ${PID:-} ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
cat > "$TMP/config.toml" <<TOML
[server]
listen = "$ADDR"
base_url = "http://sl.test"
[storage]
path = "$TMP/data"
[tiers.6]
batch = 10000
low_water = 2000
[[auth.keys]]
key = "$KEY"
name = "bench"
role = "admin"
TOML
target/release/vshortlink --config "$TMP/config.toml" 2>"$TMP/server.log" &
PID=$!
for _ in $(seq 100); do curl -sf "http://$ADDR/healthz" >/dev/null && break; sleep 0.2; done

echo "== creating $LINKS links ($EXPIRING_PCT % with a 1 s ttl)" >&2
START=$(date +%s)
python3 - "$ADDR" "$KEY" "$LINKS" "$EXPIRING_PCT" <<'PY'
import json, sys, threading, urllib.request
addr, key, n, pct = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
batches = [list(range(i, min(i + 1000, n))) for i in range(0, n, 1000)]
lock = threading.Lock()
def worker():
    while True:
        with lock:
            if not batches:
                return
            batch = batches.pop()
        links = [{"url": f"https://example.com/m/{i}", **({"ttl": 1} if i % 100 < pct else {})} for i in batch]
        req = urllib.request.Request(f"http://{addr}/api/v1/links/batch", data=json.dumps({"links": links}).encode(),
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        out = json.load(urllib.request.urlopen(req, timeout=300))
        bad = [r for r in out["results"] if not r["ok"]]
        if bad:
            sys.exit(f"create failed: {bad[0]}")
threads = [threading.Thread(target=worker) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
PY
echo "   took $(( $(date +%s) - START )) s" >&2
# A permanent code to hammer.
HOT=$(curl -sf -X POST "http://$ADDR/api/v1/links" -H "Authorization: Bearer $KEY" -d '{"url":"https://example.com/hot","code":"hotcode"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["code"])')
sleep 2

rps() { wrk -t2 -c64 -d"$DURATION" "http://$ADDR/$HOT" | awk '/Requests\/sec/ {print $2}'; }
echo "== redirect, job idle" >&2
wrk -t2 -c64 -d2s "http://$ADDR/$HOT" >/dev/null
IDLE=$(rps)
echo "== redirect, maintenance running" >&2
curl -sf -X POST "http://$ADDR/api/v1/maintenance/run" -H "Authorization: Bearer $KEY" -o "$TMP/report.json" -w '%{time_total}\n' > "$TMP/job_time" &
JOB=$!
sleep 0.2
BUSY=$(rps)
JOB_RUNNING=yes; kill -0 $JOB 2>/dev/null || JOB_RUNNING=no
wait $JOB
RSS=$(awk '/VmHWM/ {print $2/1024 " MB"}' /proc/$PID/status)
DISK=$(du -sh "$TMP/data" | cut -f1)
echo
echo "maintenance benchmark: $LINKS links, $EXPIRING_PCT % expired, wrk -t2 -c64 -d$DURATION on one hot code"
echo "job report:        $(cat "$TMP/report.json")"
echo "job wall time:     $(cat "$TMP/job_time") s (still running when the busy wrk run ended: $JOB_RUNNING)"
echo "redirect idle:     $IDLE req/s"
echo "redirect during:   $BUSY req/s"
python3 -c "print(f'ratio during/idle: {100*float(\"$BUSY\")/float(\"$IDLE\"):.1f} %')"
echo "server peak RSS:   $RSS"
echo "data dir:          $DISK"
