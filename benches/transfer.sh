#!/usr/bin/env bash
# Export/import benchmark (issue 11): writes LINKS link lines (default 1,000,000) in our export
# format, imports them into a fresh data dir, exports them again (must be byte for byte the
# input), imports the same file a second time (all unchanged) and runs `check`; each step under
# /usr/bin/time -v for wall time and peak RSS, and the data dir's size. VISITS_PER_LINK (default
# 0) adds that many visit lines per link, exported and compared with --visits.
#
#   LINKS=1000000 benches/transfer.sh
#   LINKS=100000 VISITS_PER_LINK=10 benches/transfer.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LINKS=${LINKS:-1000000}
VISITS_PER_LINK=${VISITS_PER_LINK:-0}
cargo build --release --bin vshortlink
BIN=${CARGO_TARGET_DIR:-target}/release/vshortlink
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '[server]\nbase_url = "http://sl.test"\n[storage]\npath = "%s/data"\n' "$TMP" > "$TMP/config.toml"
python3 - "$LINKS" "$VISITS_PER_LINK" > "$TMP/links.jsonl" <<'PY'
import sys
A = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
def b62(n):
    s = ""
    while n:
        s = A[n % 62] + s
        n //= 62
    return s
for i in range(1, int(sys.argv[1]) + 1):
    code = b62(916132832 + i * 48271 % 55884102751)  # distinct 6-character codes
    sys.stdout.write('{"type":"link","id":%d,"code":"%s","url":"https://example.com/page/%d?ref=bench","space":"default","status":"active","custom":false,"created_at":"2026-11-01T00:00:00.123Z","updated_at":"2026-11-01T00:00:00.123Z","expires_at":"2027-11-01T00:00:00Z","deleted_at":null,"title":null,"tags":[]}\n' % (i, code, i))
per = int(sys.argv[2])
for i in range(1, int(sys.argv[1]) + 1 if per else 1):
    code = b62(916132832 + i * 48271 % 55884102751)
    for k in range(per):
        vid = (i - 1) * per + k + 1
        sys.stdout.write('{"type":"visit","id":%d,"link_id":%d,"code":"%s","at":"2026-11-02T10:%02d:%02dZ","client_id":"%040x","ip":"192.0.2.0","user_agent":"Mozilla/5.0","referer":"https://news.example.org/a","browser":"Chrome","browser_version":"124","os":"Windows","os_version":"10","device":"desktop","is_bot":false,"country":null,"region":null,"city":null,"isp":null}\n' % (vid, i, code, k % 60, i % 60, vid * 2654435761))
PY
step() {
  local name=$1; shift
  /usr/bin/time -v "$BIN" --config "$TMP/config.toml" "$@" 2> "$TMP/$name.err" > "$TMP/$name.out" || true
  printf '%-10s %s, peak RSS %s kB  | %s\n' "$name" \
    "$(grep -o 'Elapsed (wall clock).*' "$TMP/$name.err" | awk '{print $NF}')" \
    "$(grep -o 'Maximum resident set size (kbytes): [0-9]*' "$TMP/$name.err" | awk '{print $NF}')" \
    "$(grep -E '^(read|exported|ok:|FAULT)' "$TMP/$name.err" "$TMP/$name.out" -h | head -1)"
}
echo "$LINKS links, $VISITS_PER_LINK visits each, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
step import import "$TMP/links.jsonl"
echo "data dir: $(du -sh "$TMP/data" | cut -f1)"
VISITS_FLAG=""; [[ $VISITS_PER_LINK -gt 0 ]] && VISITS_FLAG=--visits
step export export $VISITS_FLAG --output "$TMP/export.jsonl"
cmp -s "$TMP/export.jsonl" "$TMP/links.jsonl" && echo "export == input, byte for byte" || echo "EXPORT DIFFERS FROM INPUT"
step reimport import "$TMP/links.jsonl"
step check check
