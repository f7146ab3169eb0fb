#!/usr/bin/env python3
"""vshortlink's benchmark: every performance target (benches/RESULTS.md) in one table, ours
beside the ceiling measured in the same run, with the target and the visits dropped in each row.

    python3 benches/run.py            # 1 M links, release build, about 10 minutes on 2 cores
    python3 benches/run.py --quick    # seconds, 2,000 links, debug build (what CI runs)

It builds what it runs (`cargo build [--release] --bin vshortlink --example bare_redirect`),
needs only `wrk` on the PATH (`apt-get install wrk`; it installs nothing itself) and targets
127.0.0.1 only, every load bounded in time. The ceiling is `examples/bare_redirect.rs`: an axum
server answering 302 from an in-memory HashMap. Links are seeded with `vshortlink import`
(generated JSON lines); the create rows go through HTTP. Every request carries a browser user
agent and a referer, and visits are recorded (the default), so the rows pay for them.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.cookiejar import CookieJar
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRK_DIR = os.path.join(ROOT, "benches", "wrk")
KEY = "bench-admin-key-0001"
USER_AGENT = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
              "(KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36")
REFERER = "https://news.example.org/articles/42"
ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
SIX_MIN = 62 ** 5  # the first 6-character code number
# The groups of rows `--rows` can pick from.
ROWS = ("hot", "cycling", "zipf", "uniform", "check", "options", "capped", "unknown", "job", "backup",
        "accounts", "plans", "create", "domains", "disk", "crash", "tls")


def log(text):
    print(f"== {text}", file=sys.stderr, flush=True)


def base62(n, width):
    digits = []
    for _ in range(width):
        n, r = divmod(n, 62)
        digits.append(ALPHABET[r])
    return "".join(reversed(digits))


def with_check(payload):
    """The payload and its Luhn mod 62 check character (docs/architecture.md)."""
    total, factor = 0, 2
    for ch in reversed(payload):
        product = factor * ALPHABET.index(ch)
        total += product // 62 + product % 62
        factor = 3 - factor
    return payload + ALPHABET[(62 - total % 62) % 62]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, key=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def dir_mb(path):
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(base, name))
            except OSError:
                pass
    return total / 1e6


class Server:
    """A process on 127.0.0.1 that answers once `ready_path` answers."""

    def __init__(self, name, argv, port, env=None, log_path=None):
        self.name, self.port = name, port
        self.base = f"http://127.0.0.1:{port}"
        out = open(log_path, "w") if log_path else subprocess.DEVNULL
        started = time.monotonic()
        self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out, cwd=ROOT)
        self.startup = self._wait(started)

    def _wait(self, started, limit=120):
        while time.monotonic() - started < limit:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
                if self.name.startswith("ours"):
                    http("GET", self.base + "/healthz", timeout=2)
                return time.monotonic() - started
            except OSError:
                time.sleep(0.02)
        raise SystemExit(f"{self.name} did not start within {limit} s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class RssPeak:
    """The largest RSS any of our servers reached, sampled every 100 ms in a thread: the
    memory target holds "whatever the load", so a peak in the middle of a row counts, not only
    what is left when the row ends."""

    def __init__(self):
        self.pids, self.peak, self._stop = [], 0.0, threading.Event()
        # The row under way (set by the rows), and the one under way at the peak.
        self.label, self.peak_label = "seeding", "-"
        # The highest RSS in each row, printed after the run: where a peak comes from.
        self.by_label = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, pid):
        self.pids = self.pids + [pid]

    def _run(self):
        while not self._stop.wait(0.1):
            for pid in self.pids:
                try:
                    rss = rss_mb(pid)
                    label = self.label
                    self.by_label[label] = max(self.by_label.get(label, 0.0), rss)
                    if rss > self.peak:
                        self.peak, self.peak_label = rss, label
                except OSError:
                    pass

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def metric(server, name):
    """Sum of a Prometheus counter's samples."""
    _, body = http("GET", server.base + "/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def settle(server, limit=60):
    """Waits until the visit queue is empty (the writer has caught up) or `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if metric(server, "vsl_visit_queue_depth") == 0:
            return
        time.sleep(0.2)


def wrk(args, url, script, script_args, duration, headers=()):
    cmd = ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{duration}", "--latency",
           "-H", f"User-Agent: {USER_AGENT}", "-H", f"Referer: {REFERER}"]
    for header in headers:
        cmd += ["-H", header]
    cmd += ["-s", os.path.join(WRK_DIR, script), url, "--"] + script_args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    latency = None
    if p99:
        scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
        latency = float(p99.group(1)) * scale
    total = re.search(r"(\d+) requests in", out)
    return {"rps": float(rps.group(1)) if rps else 0.0, "p99_ms": latency,
            "errors": int(non2xx.group(1)) if non2xx else 0,
            "requests": int(total.group(1)) if total else 0, "raw": out}


def mean_run(runs):
    """The mean requests/s and p99 of several wrk runs of one side."""
    p99s = [r["p99_ms"] for r in runs if r["p99_ms"] is not None]
    return {"rps": sum(r["rps"] for r in runs) / len(runs),
            "p99_ms": sum(p99s) / len(p99s) if p99s else None,
            "errors": sum(r["errors"] for r in runs)}


def seed_file(path, links, now_ms, expiring_share, checked=0):
    """`links` link records as `vshortlink import` reads them; returns the codes (the first
    ones expire in the past when `expiring_share` > 0, for the daily-job row) and `checked`
    more of 7 characters, the last one a check character (the default tier 7), for the rows
    that compare them with 6-character codes."""
    codes = []
    codes7 = []
    stride = 7919  # spread codes over the space, as random codes would be
    created = datetime.datetime.fromtimestamp(now_ms / 1000 - 86400, datetime.timezone.utc)
    created = created.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    past = datetime.datetime.fromtimestamp(now_ms / 1000 - 3600, datetime.timezone.utc)
    past = past.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    expiring = int(links * expiring_share)
    with open(path, "w") as f:
        for i in range(links):
            code = base62(SIX_MIN + (i * stride) % (61 * SIX_MIN), 6)
            codes.append(code)
            record = {"type": "link", "id": i + 1, "code": code,
                      "url": f"https://example.com/{i}", "space": "default",
                      "status": "active", "custom": False, "created_at": created,
                      "updated_at": created, "expires_at": past if i < expiring else None,
                      "title": None, "tags": []}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
        for j in range(checked):
            code = with_check(base62(SIX_MIN + (j * 104729) % (61 * SIX_MIN), 6))
            codes7.append(code)
            record = {"type": "link", "id": links + j + 1, "code": code,
                      "url": f"https://example.com/7/{j}", "space": "default",
                      "status": "active", "custom": False, "created_at": created,
                      "updated_at": created, "expires_at": None, "title": None, "tags": []}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return codes, expiring, codes7


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="seconds, small data, debug build: checks that the harness works")
    parser.add_argument("--links", type=int, help="links seeded (default 1,000,000; quick 2,000)")
    parser.add_argument("--duration", help="each measured wrk run (default 10s; quick 1s)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--rounds", type=int, help="ours then the ceiling, this many times per "
                        "redirect row, averaged (default 2; quick 1)")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--rows", help="a comma-separated subset of " + ",".join(ROWS)
                        + " (default all; the footprint rows always come)")
    parser.add_argument("--visits", type=int, help="visits the disk row records (default "
                        "10,000,000; quick 20,000)")
    parser.add_argument("--set", action="append", default=[], metavar="VSL_KEY=VALUE",
                        help="an environment override for our server (repeatable), to compare "
                        "a setting, e.g. --set VSL_CACHE__CAPACITY=1000000")
    args = parser.parse_args()
    links = args.links or (2_000 if args.quick else 1_000_000)
    args.rounds = max(1, args.rounds or (1 if args.quick else 2))
    args.rows = set((args.rows or ",".join(ROWS)).split(","))
    unknown = args.rows - set(ROWS)
    if unknown:
        raise SystemExit(f"unknown --rows {','.join(sorted(unknown))}; pick from {','.join(ROWS)}")
    duration = args.duration or ("1s" if args.quick else "10s")
    warmup = "1s" if args.quick else "3s"
    profile = "debug" if args.quick else "release"

    if shutil.which("wrk") is None:
        raise SystemExit("benches/run.py needs wrk on the PATH: apt-get install wrk")
    if not args.skip_build:
        log(f"building ({profile})")
        cmd = ["cargo", "build", "--bin", "vshortlink", "--example", "bare_redirect",
               "--example", "bare_tls_redirect"]
        if profile == "release":
            cmd.insert(2, "--release")
        subprocess.run(cmd, cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ours_bin = os.path.join(target, profile, "vshortlink")
    bare_bin = os.path.join(target, profile, "examples", "bare_redirect")
    args.bare_tls_bin = os.path.join(target, profile, "examples", "bare_tls_redirect")

    tmp = tempfile.mkdtemp(prefix="vsl-bench-")
    servers = []
    try:
        rows = run(args, links, duration, warmup, ours_bin, bare_bin, tmp, servers)
    finally:
        for s in servers:
            s.stop()
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows, links, args)


def write_config(path, port, data):
    with open(path, "w") as f:
        f.write(f"""
[server]
listen = "127.0.0.1:{port}"
base_url = "http://sl.bench"
[storage]
path = "{data}"
[auth]
keys = [{{ key = "{KEY}", name = "bench", role = "admin" }}]
[limits.rates]
# One client address walks unknown codes here; the limiter has its own benchmark
# (benches/limits.sh).
not_found_per_ip = "off"
""")


def run(args, links, duration, warmup, ours_bin, bare_bin, tmp, servers):
    data = os.path.join(tmp, "data")
    config = os.path.join(tmp, "config.toml")
    port = free_port()
    write_config(config, port, data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VSL_")}
    env["RUST_LOG"] = "warn"
    for setting in args.set:
        key, _, value = setting.partition("=")
        if not key.startswith("VSL_") or not value:
            raise SystemExit(f"--set {setting}: expected VSL_SECTION__KEY=VALUE")
        env[key] = value

    peak = RssPeak()
    log(f"seeding {links:,} links with vshortlink import")
    now_ms = int(time.time() * 1000)
    seed = os.path.join(tmp, "seed.jsonl")
    checked = max(1_000, links // 10) if "check" in args.rows else 0
    codes, expiring, codes7 = seed_file(seed, links, now_ms, 0.10, checked)
    started = time.monotonic()
    subprocess.run([ours_bin, "--config", config, "import", seed], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seed_secs = time.monotonic() - started
    size_seeded = dir_mb(data)
    live = codes[expiring:]
    live_file = os.path.join(tmp, "codes.txt")
    with open(live_file, "w") as f:
        f.write("\n".join(live) + "\n")
    bare_codes = os.path.join(tmp, "bare_codes.txt")
    with open(bare_codes, "w") as f:
        f.write("\n".join(f"c{i}" for i in range(len(live))) + "\n")

    def start_ours(name, extra_env=None):
        e = dict(env)
        e.update(extra_env or {})
        s = Server(name, [ours_bin, "--config", config], port, env=e,
                   log_path=os.path.join(tmp, f"{name}.log"))
        servers.append(s)
        peak.watch(s.proc.pid)
        return s

    ours = start_ours("ours")
    rss_seeded = rss_mb(ours.proc.pid)
    bare_port = free_port()
    bare = Server("bare", [bare_bin, "--listen", f"127.0.0.1:{bare_port}",
                           "--codes", str(len(live))], bare_port)
    servers.append(bare)

    rows = []

    def measure(row, target, script, ours_args, bare_args, p99_target=None, drops=True,
                no_drops=False):
        """One redirect row; `no_drops`: the target also asks that no visit be dropped."""
        peak.label = row
        for server, a in ((ours, ours_args), (bare, bare_args)):
            wrk(args, server.base, script, a, warmup)
        settle(ours)
        dropped0 = metric(ours, "vsl_visits_dropped_total")
        # Ours and the ceiling in turn, `--rounds` times, averaged: one run of either moves by
        # ±10 % on this machine, and turns cancel a drift that would favour one side.
        # A run ends with visits journaled and not folded yet (the writer folds once a second
        # and falls behind under the heaviest rows): they are folded before the ceiling's
        # turn, so that the ceiling is never measured beside our writer catching up (it was,
        # for a second or more, before), and how far behind it was is logged.
        runs, behind = [], []
        for _ in range(args.rounds):
            mine_run = wrk(args, ours.base, script, ours_args, duration)
            caught_up = time.monotonic()
            left = metric(ours, "vsl_visit_queue_depth")
            settle(ours)
            behind.append((left, time.monotonic() - caught_up))
            runs.append((mine_run, wrk(args, bare.base, script, bare_args, duration)))
        mine, ceiling = (mean_run([r[i] for r in runs]) for i in (0, 1))
        settle(ours)
        dropped = metric(ours, "vsl_visits_dropped_total") - dropped0 if drops else None
        ratio = mine["rps"] / ceiling["rps"] if ceiling["rps"] else 0.0
        ok = ratio >= target and (p99_target is None or (mine["p99_ms"] or 1e9) <= p99_target)
        if no_drops and dropped:
            ok = False
        rows.append({"row": row, "ours": f"{mine['rps']:,.0f}/s", "ceiling": f"{ceiling['rps']:,.0f}/s",
                     "ratio": f"{ratio:.2f}", "target": f"≥ {target:.2f}" + (f", p99 ≤ {p99_target:g} ms" if p99_target else ""),
                     "p99": p99_text(mine, ceiling),
                     "dropped": f"{dropped:,.0f}" if dropped is not None else "-",
                     "ok": "yes" if ok else "NO"})
        # Each round's own ratio beside the mean's: the machine's state can change between
        # rounds (the ceiling itself moves by a quarter on these 2 cores), and a round's pair
        # ran within seconds of each other.
        paired = [m["rps"] / c["rps"] if c["rps"] else 0.0 for m, c in runs]
        log(f"{row}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}; "
            "each round: " + ", ".join(f"{m['rps']:,.0f}/{c['rps']:,.0f} = {r:.2f}"
                                       for (m, c), r in zip(runs, paired))
            + "; visits unfolded when ours stopped, and the seconds to fold them: "
            + ", ".join(f"{left:,.0f} in {secs:.1f} s" for left, secs in behind))

    hot = live[0]
    with open(os.path.join(tmp, "hot.txt"), "w") as f:
        f.write(hot + "\n")
    with open(os.path.join(tmp, "bare_hot.txt"), "w") as f:
        f.write("c0\n")
    if "hot" in args.rows:
        measure("redirect, one hot code", 0.85, "zipf.lua", [os.path.join(tmp, "hot.txt")],
                [os.path.join(tmp, "bare_hot.txt")], p99_target=3, no_drops=True)
    if "cycling" in args.rows:
        # Every link of a small team, each in turn (round-robin from a per-thread offset): no
        # code is hotter than another, so this holds only if the redirect cache holds them all.
        team = live[:100_000]
        team_file = os.path.join(tmp, "team.txt")
        with open(team_file, "w") as f:
            f.write("\n".join(team) + "\n")
        bare_team = os.path.join(tmp, "bare_team.txt")
        with open(bare_team, "w") as f:
            f.write("\n".join(f"c{i}" for i in range(len(team))) + "\n")
        measure(f"redirect, cycling over {len(team):,} links", 0.80, "cycle.lua", [team_file],
                [bare_team], p99_target=10, no_drops=True)
    if "zipf" in args.rows:
        measure(f"redirect, Zipf(1) over {len(live):,} links", 0.75, "zipf.lua", [live_file],
                [bare_codes], no_drops=True)
    if "uniform" in args.rows:
        measure(f"redirect, uniform over {len(live):,} links", 0.60, "zipf.lua",
                [live_file, "uniform"], [bare_codes, "uniform"], no_drops=True)
    if "check" in args.rows:
        # Codes of the `hash` tier carry a check character the redirect verifies before any
        # lookup: the same rows over 7-character codes, beside 6-character ones of the same
        # count, so that the check's cost shows.
        for name, sample in (("6", live[-len(codes7):]), ("7", codes7)):
            with open(os.path.join(tmp, f"hot{name}.txt"), "w") as f:
                f.write(sample[0] + "\n")
            with open(os.path.join(tmp, f"codes{name}.txt"), "w") as f:
                f.write("\n".join(sample) + "\n")
        bare_check = os.path.join(tmp, "bare_check.txt")
        with open(bare_check, "w") as f:
            f.write("\n".join(f"c{i}" for i in range(len(codes7))) + "\n")
        for name, what in (("6", "6-character codes"), ("7", "7-character codes with a check character")):
            measure(f"redirect, one hot code of {what}", 0.85, "zipf.lua",
                    [os.path.join(tmp, f"hot{name}.txt")], [os.path.join(tmp, "bare_hot.txt")])
        for name, what in (("6", "6-character codes"), ("7", "7-character codes with a check character")):
            measure(f"redirect, uniform over {len(codes7):,} {what}", 0.60, "zipf.lua",
                    [os.path.join(tmp, f"codes{name}.txt"), "uniform"], [bare_check, "uniform"])
    if "options" in args.rows:
        peak.label = "options"
        options_row(args, ours, bare, tmp, duration, warmup, rows)
    if "capped" in args.rows:
        peak.label = "capped"
        capped_rows(args, ours, tmp, duration, warmup, rows)
    if "unknown" in args.rows:
        measure("unknown code", 0.85, "unknown.lua", [live_file], [], drops=False)
    if "job" in args.rows:
        peak.label = "daily job"
        job_row(args, ours, live_file, duration, rows)
    if "backup" in args.rows:
        backup_rows(args, ours, live_file, duration, rows, peak)
    # The RSS of each of our servers when its last row ended: the create rows restart the
    # server for `power`, and the one that served the redirect rows must count too.
    rss_ends = []
    if "accounts" in args.rows:
        peak.label = "accounts"
        ours = accounts_rows(args, ours, tmp, duration, warmup, rows, servers, start_ours,
                             rss_ends)
    if "plans" in args.rows:
        peak.label = "plans"
        ours = plans_rows(args, ours, tmp, duration, warmup, rows, servers, start_ours, rss_ends)
    if "create" in args.rows:
        peak.label = "create"
        ours = create_rows(args, ours, duration, rows, servers, start_ours, rss_ends)

    if "domains" in args.rows:
        peak.label = "domains"
        domains_row(args, ours_bin, env, bare, tmp, servers, peak, duration, warmup, rows)

    rss_after = max(rss_ends + [rss_mb(ours.proc.pid)])
    if "crash" in args.rows:
        peak.label = "kill -9"
        ours = crash_row(args, ours, live_file, links, servers, start_ours, rows)
    ours.stop()
    servers.remove(ours)
    size = dir_mb(data)
    ours = start_ours("ours-restart")
    restart = ours.startup
    ours.stop()
    servers.remove(ours)
    if "tls" in args.rows:
        peak.label = "tls"
        tls_rows(args, ours_bin, env, tmp, servers, duration, warmup, rows, data, peak)
    if "disk" in args.rows:
        peak.label = "disk per visit (its own 100,000-link store)"
        disk_row(args, ours_bin, env, tmp, servers, peak, rows)
    rss_peak = peak.stop()
    print("== RSS peak by row: " + ", ".join(f"{label} {mb:.0f} MB"
                                              for label, mb in peak.by_label.items()), flush=True)
    rows.append({"row": f"{links:,} links: RSS seeded / after the rows / highest during them",
                 "ours": f"{rss_seeded:.0f} / {rss_after:.0f} / {rss_peak:.0f} MB "
                         f"(peak in: {peak.peak_label})",
                 "ceiling": "-", "ratio": "-", "target": "≤ 256 MB", "p99": "-", "dropped": "-",
                 "ok": "yes" if max(rss_seeded, rss_after, rss_peak) <= 256 else "NO"})
    rows.append({"row": f"{links:,} links: data directory seeded / after the rows",
                 "ours": f"{size_seeded:.0f} / {size:.0f} MB", "ceiling": "-",
                 "ratio": "-", "target": "≤ 400 MB", "p99": "-", "dropped": "-",
                 "ok": "yes" if max(size_seeded, size) <= 400 else "NO"})
    rows.append({"row": f"{links:,} links: start-up to /healthz", "ours": f"{restart:.2f} s",
                 "ceiling": "-", "ratio": "-", "target": "≤ 2 s", "p99": "-", "dropped": "-",
                 "ok": "yes" if restart <= 2 else "NO"})
    rows.append({"row": f"seeding {links:,} links (vshortlink import)", "ours": f"{seed_secs:.1f} s",
                 "ceiling": "-", "ratio": "-", "target": "-", "p99": "-", "dropped": "-", "ok": "-"})
    return rows


def domains_row(args, ours_bin, env, bare, tmp, servers, peak, duration, warmup, rows):
    """SPEC §26's cost on the redirect: two servers of ours on small stores of their own, one
    with no other domain (its redirect never reads `Host`) and one with 50 more domains
    configured through the API and the hot link on the 25th (asked for with that `Host`),
    measured in turn with the ceiling, so that the machine's drift cancels; then the second
    server's default domain beside the ceiling (the default domain's routing with domains
    configured)."""
    sides = {}
    for name in ("plain", "domains"):
        data, config, port = os.path.join(tmp, f"data-{name}"), os.path.join(tmp, f"config-{name}.toml"), free_port()
        write_config(config, port, data)
        server = Server(f"ours-{name}", [ours_bin, "--config", config], port, env=env,
                        log_path=os.path.join(tmp, f"ours-{name}.log"))
        servers.append(server)
        peak.watch(server.proc.pid)
        sides[name] = server
    hosts = [f"go{i}.bench" for i in range(1, 51)]
    for host in hosts:
        http("POST", sides["domains"].base + "/api/v1/domains", {"host": host}, key=KEY)
    codes = {}
    for name, body in (("plain", {}), ("domains", {"domain": hosts[24]}), ("default", {})):
        server = sides["plain" if name == "plain" else "domains"]
        _, created = http("POST", server.base + "/api/v1/links",
                          dict(body, url=f"https://example.com/{name}"), key=KEY)
        codes[name] = os.path.join(tmp, f"domain_row_{name}.txt")
        with open(codes[name], "w") as f:
            f.write(json.loads(created)["code"] + "\n")
    bare_hot = os.path.join(tmp, "bare_hot.txt")
    turns = ((sides["domains"], codes["domains"], (f"Host: {hosts[24]}",)),
             (sides["plain"], codes["plain"], ()),
             (sides["domains"], codes["default"], ()),
             (bare, bare_hot, ()))
    for server, codes_file, headers in turns:
        wrk(args, server.base, "zipf.lua", [codes_file], warmup, headers)
    for server in sides.values():
        settle(server)
    dropped0 = sum(metric(s, "vsl_visits_dropped_total") for s in sides.values())
    runs = [[wrk(args, server.base, "zipf.lua", [codes_file], duration, headers)
             for server, codes_file, headers in turns] for _ in range(args.rounds)]
    on_domain, plain, on_default, ceiling = (mean_run([r[i] for r in runs]) for i in range(4))
    for server in sides.values():
        settle(server)
    dropped = sum(metric(s, "vsl_visits_dropped_total") for s in sides.values()) - dropped0
    for row, mine, base, target, base_name in (
            ("redirect with 50 domains: one hot code on a custom domain, against the plain hot "
             "row (no domain configured)", on_domain, plain, 0.95, "plain"),
            ("redirect with 50 domains: one hot code on the default domain, against the plain "
             "hot row", on_default, plain, 0.95, "plain"),
            ("redirect with 50 domains: one hot code on a custom domain", on_domain, ceiling,
             0.85, "ceiling")):
        ratio = mine["rps"] / base["rps"] if base["rps"] else 0.0
        rows.append({"row": row, "ours": f"{mine['rps']:,.0f}/s",
                     "ceiling": f"{base['rps']:,.0f}/s ({base_name})", "ratio": f"{ratio:.2f}",
                     "target": f"≥ {target:.2f}", "p99": p99_text(mine, base),
                     "dropped": f"{dropped:,.0f}",
                     "ok": "yes" if ratio >= target and not dropped else "NO"})
        log(f"{row}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}")
    for server in sides.values():
        server.stop()
        servers.remove(server)


def tls_rows(args, ours_bin, env, tmp, servers, duration, warmup, rows, data, peak):
    """The redirect over HTTPS (SPEC §26: §14's ratio against a TLS ceiling): one hot code on
    kept-alive connections, then a new connection and handshake per request (`Connection:
    close`), ours (`tls.mode = "files"`, on the seeded store) beside
    examples/bare_tls_redirect.rs serving the same kind of certificate (ECDSA P-256)."""
    import ssl
    certs = os.path.join(tmp, "tls")
    os.makedirs(certs, exist_ok=True)
    bare_port = free_port()
    bare = Server("bare-tls", [args.bare_tls_bin, "--listen", f"127.0.0.1:{bare_port}",
                               "--codes", "1", "--cert-out", certs], bare_port)
    servers.append(bare)
    bare.base = f"https://127.0.0.1:{bare_port}"
    port = free_port()
    config = os.path.join(tmp, "config-tls.toml")
    write_config(config, port, data)
    with open(config, "a") as f:
        f.write(f'[tls]\nmode = "files"\ncert = "{certs}/cert.pem"\nkey = "{certs}/key.pem"\n')
    ours = Server("tls-vshortlink", [ours_bin, "--config", config], port, env=env,
                  log_path=os.path.join(tmp, "tls-vshortlink.log"))
    servers.append(ours)
    peak.watch(ours.proc.pid)
    ours.base = f"https://127.0.0.1:{port}"
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(ours.base + "/healthz", timeout=2, context=unverified):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("vshortlink over TLS did not answer /healthz within 60 s")
            time.sleep(0.05)
    # The hot code: the seeded store's first live code is what hot.txt holds.
    ours_hot, bare_hot = os.path.join(tmp, "hot.txt"), os.path.join(tmp, "bare_hot.txt")
    for row, target, headers in (("redirect over TLS, one hot code, keep-alive", 0.85, ()),
                                 ("redirect over TLS, a new handshake per request", None,
                                  ("Connection: close",))):
        peak.label = row
        for server, codes in ((ours, ours_hot), (bare, bare_hot)):
            wrk(args, server.base, "zipf.lua", [codes], warmup, headers)
        runs = [(wrk(args, ours.base, "zipf.lua", [ours_hot], duration, headers),
                 wrk(args, bare.base, "zipf.lua", [bare_hot], duration, headers))
                for _ in range(args.rounds)]
        mine, ceiling = (mean_run([r[i] for r in runs]) for i in (0, 1))
        ratio = mine["rps"] / ceiling["rps"] if ceiling["rps"] else 0.0
        rows.append({"row": row, "ours": f"{mine['rps']:,.0f}/s",
                     "ceiling": f"{ceiling['rps']:,.0f}/s", "ratio": f"{ratio:.2f}",
                     "target": f"≥ {target:.2f}" if target else "-",
                     "p99": p99_text(mine, ceiling), "dropped": "-",
                     "ok": ("yes" if ratio >= target else "NO") if target else "-"})
        log(f"{row}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}")
    for server in (ours, bare):
        server.stop()
        servers.remove(server)


def crash_row(args, ours, live_file, links, servers, start_ours, rows):
    """`kill -9` in the middle of a uniform load over every link (the visit writer and its
    counters at their busiest), then the time from starting again to `/healthz`. Returns the
    restarted server."""
    load_secs = 4 if args.quick else 12
    load = threading.Thread(target=wrk, args=(args, ours.base, "zipf.lua", [live_file, "uniform"],
                                              f"{load_secs}s"))
    load.start()
    time.sleep(load_secs * 0.6)
    written = metric(ours, "vsl_visits_written_total")
    ours.proc.kill()
    ours.proc.wait()
    servers.remove(ours)
    load.join()
    ours = start_ours("ours-crashed")
    rows.append({"row": f"{links:,} links: start-up to /healthz after kill -9 under load "
                        f"({written:,.0f} visits written before it)",
                 "ours": f"{ours.startup:.2f} s", "ceiling": "-", "ratio": "-", "target": "≤ 5 s",
                 "p99": "-", "dropped": "-", "ok": "yes" if ours.startup <= 5 else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']}")
    return ours


def disk_row(args, ours_bin, env, tmp, servers, peak, rows):
    """Disk per visit at steady state: a store of its own with 100,000 links (quick: 2,000),
    Zipf(1) redirects until 10 M visits (quick: 20,000; `--visits`) are written, then the data
    directory's growth after a clean stop over the visits written: blocks, indexes, counters
    and sled's own garbage, all of it."""
    links = 2_000 if args.quick else 100_000
    target = args.visits or (20_000 if args.quick else 10_000_000)
    data = os.path.join(tmp, "disk-data")
    config = os.path.join(tmp, "disk-config.toml")
    port = free_port()
    write_config(config, port, data)
    seed = os.path.join(tmp, "disk-seed.jsonl")
    codes, _, _ = seed_file(seed, links, int(time.time() * 1000), 0.0)
    subprocess.run([ours_bin, "--config", config, "import", seed], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    codes_file = os.path.join(tmp, "disk-codes.txt")
    with open(codes_file, "w") as f:
        f.write("\n".join(codes) + "\n")
    server = Server("ours-disk", [ours_bin, "--config", config], port, env=env,
                    log_path=os.path.join(tmp, "ours-disk.log"))
    servers.append(server)
    peak.watch(server.proc.pid)
    before = dir_mb(data)
    log(f"disk: recording {target:,} visits over {links:,} links")
    started = time.monotonic()
    chunk = "2s" if args.quick else "10s"
    # The visit journal's segments count at their peak (vsl_visit_journal_bytes, measured at
    # each fold; a build without a journal reports none): sampled while the load runs.
    journal_peak = [0.0]
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            try:
                journal_peak[0] = max(journal_peak[0], metric(server, "vsl_visit_journal_bytes"))
            except Exception:  # noqa: BLE001 - a scrape that fails under load is skipped
                pass
            sampling.wait(0.5)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    while metric(server, "vsl_visits_written_total") + metric(server, "vsl_visit_queue_depth") < target:
        if time.monotonic() - started > 1800:
            break
        wrk(args, server.base, "zipf.lua", [codes_file], chunk)
    settle(server, limit=300)
    sampling.set()
    sampler.join()
    written = metric(server, "vsl_visits_written_total")
    dropped = metric(server, "vsl_visits_dropped_total")
    secs = time.monotonic() - started
    server.stop()
    servers.remove(server)
    # What a clean stop leaves of the journal is in the data directory already; the peak
    # above it is added, so the figure covers the journal at its largest.
    journal_left = dir_mb(os.path.join(data, "journal")) if os.path.isdir(os.path.join(data, "journal")) else 0.0
    grown = dir_mb(data) - before + max(0.0, journal_peak[0] / 1e6 - journal_left)
    per_visit = grown * 1e6 / written if written else float("inf")
    rows.append({"row": f"disk per visit: {written:,.0f} visits, Zipf(1) over {links:,} links "
                        f"({grown:,.0f} MB grown with the journal's peak of "
                        f"{journal_peak[0] / 1e6:,.0f} MB, {written / secs:,.0f} visits/s)",
                 "ours": f"{per_visit:.0f} B/visit", "ceiling": "-", "ratio": "-",
                 "target": "≤ 80 B/visit", "p99": "-", "dropped": f"{dropped:,.0f}",
                 "ok": "yes" if per_visit <= 80 else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']}")


def options_row(args, ours, bare, tmp, duration, warmup, rows):
    """A hot link with 4 rules (none holds for the benchmark's client, so that every condition
    is read) and 3 weighted targets (a sticky pick per visitor), against the plain hot code in
    the same run, turn by turn: the cost of deciding in memory."""
    http("POST", ours.base + "/api/v1/links", {
        "url": "https://example.com/options", "code": "rules4t3",
        "rules": [
            {"if": {"os": ["ios", "android"]}, "url": "https://example.com/mobile"},
            {"if": {"app": "wechat"}, "url": "https://example.com/wechat"},
            {"if": {"language": ["zh", "ja"]}, "url": "https://example.com/asia"},
            {"if": {"ip": ["10.0.0.0/8"], "query": {"utm": "*"}}, "url": "https://example.com/lan"},
        ],
        "targets": [{"url": "https://example.com/a", "weight": 5},
                    {"url": "https://example.com/b", "weight": 3},
                    {"url": "https://example.com/c", "weight": 2}],
    }, key=KEY)
    with open(os.path.join(tmp, "options.txt"), "w") as f:
        f.write("rules4t3\n")
    plain, options = os.path.join(tmp, "hot.txt"), os.path.join(tmp, "options.txt")
    for f in (plain, options):
        wrk(args, ours.base, "zipf.lua", [f], warmup)
    settle(ours)
    runs = [(wrk(args, ours.base, "zipf.lua", [plain], duration),
             wrk(args, ours.base, "zipf.lua", [options], duration)) for _ in range(args.rounds)]
    mine_plain, mine_options = (mean_run([r[i] for r in runs]) for i in (0, 1))
    settle(ours)
    ratio = mine_options["rps"] / mine_plain["rps"] if mine_plain["rps"] else 0.0
    rows.append({"row": "redirect, one hot code with 4 rules and 3 weighted targets (vs the plain hot code)",
                 "ours": f"{mine_options['rps']:,.0f}/s", "ceiling": f"{mine_plain['rps']:,.0f}/s (plain)",
                 "ratio": f"{ratio:.2f}", "target": "≥ 0.80 of plain", "p99": p99_text(mine_options, mine_plain),
                 "dropped": "-", "ok": "yes" if ratio >= 0.80 and not mine_options["errors"] else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}")


def capped_rows(args, ours, tmp, duration, warmup, rows):
    """A capped link: every redirect counted durably (group-committed) before it is answered.
    One cap larger than the run, for the rate; one smaller, whose 302s must equal it."""
    http("POST", ours.base + "/api/v1/links",
         {"url": "https://example.com/capped", "code": "capbig", "max_visits": 10**12}, key=KEY)
    with open(os.path.join(tmp, "capbig.txt"), "w") as f:
        f.write("capbig\n")
    wrk(args, ours.base, "zipf.lua", [os.path.join(tmp, "capbig.txt")], warmup)
    settle(ours)
    runs = [wrk(args, ours.base, "zipf.lua", [os.path.join(tmp, "capbig.txt")], duration)
            for _ in range(args.rounds)]
    mine = mean_run(runs)
    rows.append({"row": f"redirect of a capped link, {args.connections} clients, process durability",
                 "ours": f"{mine['rps']:,.0f}/s", "ceiling": "-", "ratio": "-", "target": "≥ 10,000/s",
                 "p99": p99_text(mine, {"p99_ms": None}), "dropped": "-",
                 "ok": "yes" if mine["rps"] >= 10_000 and not mine["errors"] else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']}")
    cap = 5_000
    http("POST", ours.base + "/api/v1/links",
         {"url": "https://example.com/capped", "code": "capsmall", "max_visits": cap}, key=KEY)
    with open(os.path.join(tmp, "capsmall.txt"), "w") as f:
        f.write("capsmall\n")
    run = wrk(args, ours.base, "zipf.lua", [os.path.join(tmp, "capsmall.txt")], duration)
    redirects = run["requests"] - run["errors"]
    rows.append({"row": f"a link capped at {cap:,} under {args.connections} clients: 302s answered",
                 "ours": f"{redirects:,} of {run['requests']:,}", "ceiling": "-", "ratio": "-",
                 "target": f"= {cap:,}", "p99": "-", "dropped": "-",
                 "ok": "yes" if redirects == cap else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']}")


def p99_text(mine, ceiling):
    """Ours, and the ceiling's in the same run: on a machine whose cores wrk shares, the
    ceiling's own tail says what a p99 target can mean there."""
    if mine["p99_ms"] is None:
        return "-"
    text = f"{mine['p99_ms']:.1f} ms"
    if ceiling["p99_ms"] is not None:
        text += f" (ceiling {ceiling['p99_ms']:.1f})"
    return text


def job_row(args, ours, live_file, duration, rows):
    # The daily job over every link, 10 % of them past their expiry: redirects while it runs
    # against the same redirects idle.
    idle = wrk(args, ours.base, "zipf.lua", [live_file], duration)
    report = {}

    def job():
        try:
            status, body = http("POST", ours.base + "/api/v1/maintenance/run", key=KEY, timeout=3600)
            report.update(json.loads(body))
            report["status_code"] = status
        except urllib.error.HTTPError as e:
            report["failed"] = f"answered {e.code}"

    runner = threading.Thread(target=job)
    runner.start()
    during = wrk(args, ours.base, "zipf.lua", [live_file], duration)
    runner.join()
    if report.get("status_code") == 202:
        # Over many links the job goes on in the background: wait for its report.
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            _, body = http("GET", ours.base + "/api/v1/maintenance", key=KEY)
            status = json.loads(body)
            if not status["running"] and status["last"]:
                report.update(status["last"])
                break
            time.sleep(0.5)
        else:
            report["failed"] = "still running after 10 min"
    ratio = during["rps"] / idle["rps"] if idle["rps"] else 0.0
    job_text = report.get("failed") or (f"{report.get('expired', 0):,} expire, {report.get('took_ms', 0):,} ms"
                                        + (", answered 202" if report.get("status_code") == 202 else ""))
    rows.append({"row": f"redirects while the daily job runs ({job_text})",
                 "ours": f"{during['rps']:,.0f}/s", "ceiling": f"{idle['rps']:,.0f}/s idle",
                 "ratio": f"{ratio:.2f}", "target": "≥ 0.80 of idle", "p99": f"{during['p99_ms'] or 0:.1f} ms",
                 "dropped": "-", "ok": "yes" if ratio >= 0.80 else "NO"})


def backup_rows(args, ours, live_file, duration, rows, peak):
    """`GET /api/v1/backup` of every link: one alone (its own rate), then backups streamed back
    to back to a reader on this machine while wrk measures redirects, then creates, against the
    same idle just before, in the same run; and the server's RSS while they stream."""

    def one_backup():
        request = urllib.request.Request(ours.base + "/api/v1/backup",
                                         headers={"Authorization": f"Bearer {KEY}"})
        started, size, tail = time.monotonic(), 0, b""
        with urllib.request.urlopen(request, timeout=3600) as answer:
            while True:
                chunk = answer.read(1 << 20)
                if not chunk:
                    break
                size += len(chunk)
                tail = (tail + chunk)[-400:]
        end = json.loads(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
        return end["records"], time.monotonic() - started, size

    peak.label = "backup alone"
    records, secs, size = one_backup()
    peak.label = "backup idle"
    idle_redirects = wrk(args, ours.base, "zipf.lua", [live_file], duration)
    idle_creates = wrk(args, ours.base, "create.lua", [KEY, "backup-idle"], duration)
    stop, done = threading.Event(), []

    def stream():
        while not stop.is_set():
            done.append(one_backup())

    peak.label = "backups streaming"
    reader = threading.Thread(target=stream)
    reader.start()
    time.sleep(0.5)
    during_redirects = wrk(args, ours.base, "zipf.lua", [live_file], duration)
    during_creates = wrk(args, ours.base, "create.lua", [KEY, "backup-during"], duration)
    stop.set()
    reader.join()
    rss = peak.by_label.get("backups streaming", 0.0)
    peak.label = "after backups"
    for what, idle, during in (("redirects", idle_redirects, during_redirects),
                               ("creates", idle_creates, during_creates)):
        ratio = during["rps"] / idle["rps"] if idle["rps"] else 0.0
        rows.append({"row": f"{what} while backups of {records:,} records stream ({len(done)} "
                            "backups, the reader on this machine)",
                     "ours": f"{during['rps']:,.0f}/s", "ceiling": f"{idle['rps']:,.0f}/s idle",
                     "ratio": f"{ratio:.2f}", "target": "≥ 0.80 of idle",
                     "p99": f"{during['p99_ms'] or 0:.1f} ms", "dropped": "-",
                     "ok": "yes" if ratio >= 0.80 else "NO"})
    rate = records / secs if secs else 0.0
    rows.append({"row": f"backup alone: {records:,} records, {size / 1e6:,.0f} MB in {secs:.1f} s",
                 "ours": f"{rate:,.0f} records/s", "ceiling": "-", "ratio": "-",
                 "target": "≥ 100,000/s", "p99": "-", "dropped": "-",
                 "ok": "yes" if rate >= 100_000 else "NO"})
    rows.append({"row": "RSS while backups stream", "ours": f"{rss:.0f} MB", "ceiling": "-",
                 "ratio": "-", "target": "≤ 256 MB", "p99": "-", "dropped": "-",
                 "ok": "yes" if rss <= 256 else "NO"})
    log(f"backup: {rate:,.0f} records/s alone; {len(done)} backups while measured; RSS {rss:.0f} MB")


def accounts_rows(args, ours, tmp, duration, warmup, rows, servers, start_ours, rss_ends,
                  keys=10_000, sign_ins=20):
    """People (SPEC §24): an API read with a key made at run time among `keys` of them, beside
    the same read with a configured key, turn by turn; and the hot redirect while `sign_ins`
    password sign-ins run at once (Argon2 in its few slots of the budget), beside the same
    redirect idle. The server restarts with the sign-in limits off, so that every sign-in
    reaches Argon2. Returns the server left running."""
    rss_ends.append(rss_mb(ours.proc.pid))
    ours.stop()
    servers.remove(ours)
    ours = start_ours("ours-accounts", {"VSL_LIMITS__RATES__LOGIN_PER_IP": "off",
                                        "VSL_LIMITS__RATES__AUTH_PER_IP": "off",
                                        "VSL_LIMITS__RATES__AUTH_PER_ACCOUNT": "off"})
    log(f"making {keys:,} keys at run time")
    started = time.monotonic()
    made = None
    for n in range(keys):
        status, body = http("POST", ours.base + "/api/v1/keys", {"name": f"script {n}", "role": "viewer"},
                            key=KEY)
        if status != 201:
            raise SystemExit(f"making key {n}: {status} {body}")
        made = json.loads(body)["key"] if n == keys // 2 else made
    log(f"{keys:,} keys made in {time.monotonic() - started:.1f} s")
    code = open(os.path.join(tmp, "hot.txt")).read().strip()
    path = f"/api/v1/links/{code}"
    for k in (KEY, made):
        wrk(args, ours.base, "api_get.lua", [k, path], warmup)
    runs = [(wrk(args, ours.base, "api_get.lua", [KEY, path], duration),
             wrk(args, ours.base, "api_get.lua", [made, path], duration)) for _ in range(args.rounds)]
    config_key, run_key = (mean_run([r[i] for r in runs]) for i in (0, 1))
    ratio = run_key["rps"] / config_key["rps"] if config_key["rps"] else 0.0
    rows.append({"row": f"GET {path} with a key made at run time, {keys:,} in the store "
                        "(vs a configured key)",
                 "ours": f"{run_key['rps']:,.0f}/s", "ceiling": f"{config_key['rps']:,.0f}/s (config key)",
                 "ratio": f"{ratio:.2f}", "target": "≥ 0.95 of a configured key",
                 "p99": p99_text(run_key, config_key), "dropped": "-",
                 "ok": "yes" if ratio >= 0.95 and not run_key["errors"] else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}")

    email, password = "bench@example.org", "a long bench password"
    http("POST", ours.base + "/api/v1/users", {"email": email, "password": password}, key=KEY)

    def sign_in():
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar),
                                             NoRedirect())
        page = opener.open(ours.base + "/ui/login", timeout=30).read().decode()
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)
        form = urllib.parse.urlencode({"csrf": token, "email": email, "password": password}).encode()
        try:
            opener.open(urllib.request.Request(ours.base + "/ui/login", data=form), timeout=30)
        except urllib.error.HTTPError as e:
            return e.code
        return 200

    hot = os.path.join(tmp, "hot.txt")
    wrk(args, ours.base, "zipf.lua", [hot], warmup)
    stop, signed = threading.Event(), []

    def flood():
        while not stop.is_set():
            signed.append(sign_in())

    runs = []
    for _ in range(args.rounds):
        idle = wrk(args, ours.base, "zipf.lua", [hot], duration)
        stop.clear()
        threads = [threading.Thread(target=flood) for _ in range(sign_ins)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        during = wrk(args, ours.base, "zipf.lua", [hot], duration)
        stop.set()
        for t in threads:
            t.join()
        runs.append((idle, during))
    idle, during = (mean_run([r[i] for r in runs]) for i in (0, 1))
    ratio = during["rps"] / idle["rps"] if idle["rps"] else 0.0
    answered = {code: signed.count(code) for code in set(signed)}
    rows.append({"row": f"redirect, one hot code, while {sign_ins} password sign-ins run at once "
                        f"({len(signed):,} sign-ins: {answered})",
                 "ours": f"{during['rps']:,.0f}/s", "ceiling": f"{idle['rps']:,.0f}/s idle",
                 "ratio": f"{ratio:.2f}", "target": "≥ 0.95 of idle",
                 "p99": p99_text(during, idle), "dropped": "-",
                 "ok": "yes" if ratio >= 0.95 else "NO"})
    log(f"{rows[-1]['row']}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}")
    return ours


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """A sign-in answers 303: the answer itself is what counts, not the page after it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def plans_rows(args, ours, tmp, duration, warmup, rows, servers, start_ours, rss_ends):
    """Plans and quotas (SPEC §25): the hot redirect and creates with no plans, then the same
    with every link in a team on a plan with limits (the team owns the `default` space the
    seeded links and the creates are in; limits far above what the run reaches, `in_app_days`
    set so that the redirect decides it), in the same run. Returns the server left running."""
    hot = os.path.join(tmp, "hot.txt")
    wrk(args, ours.base, "zipf.lua", [hot], warmup)
    plain_hot = mean_run([wrk(args, ours.base, "zipf.lua", [hot], duration) for _ in range(args.rounds)])
    wrk(args, ours.base, "create.lua", [KEY, "plans-off-warm"], warmup)
    plain_create = mean_run([wrk(args, ours.base, "create.lua", [KEY, f"plans-off-{n}"], duration)
                             for n in range(args.rounds)])
    rss_ends.append(rss_mb(ours.proc.pid))
    ours.stop()
    servers.remove(ours)
    ours = start_ours("ours-plans", {"VSL_PLANS__BENCH__LINKS_PER_MONTH": "1000000000",
                                     "VSL_PLANS__BENCH__ACTIVE_LINKS": "1000000000",
                                     "VSL_PLANS__BENCH__VISITS_PER_MONTH": "1000000000000",
                                     "VSL_PLANS__BENCH__IN_APP_DAYS": "3650"})
    status, body = http("POST", ours.base + "/api/v1/teams",
                        {"slug": "bench", "plan": "bench", "spaces": ["default"]}, key=KEY)
    if status != 201:
        raise SystemExit(f"making the bench team: {status} {body}")
    wrk(args, ours.base, "zipf.lua", [hot], warmup)
    plan_hot = mean_run([wrk(args, ours.base, "zipf.lua", [hot], duration) for _ in range(args.rounds)])
    # The restarted server's caches are cold: warm its creates as the first server's were.
    wrk(args, ours.base, "create.lua", [KEY, "plans-on-warm"], warmup)
    plan_create = mean_run([wrk(args, ours.base, "create.lua", [KEY, f"plans-on-{n}"], duration)
                            for n in range(args.rounds)])
    for what, plan, plain in (("redirect, one hot code", plan_hot, plain_hot),
                              (f"create, {args.connections} clients, process", plan_create, plain_create)):
        ratio = plan["rps"] / plain["rps"] if plain["rps"] else 0.0
        rows.append({"row": f"{what}, every link in a team on a plan with limits (vs no plans)",
                     "ours": f"{plan['rps']:,.0f}/s", "ceiling": f"{plain['rps']:,.0f}/s (no plans)",
                     "ratio": f"{ratio:.2f}", "target": "≥ 0.97 of no plans",
                     "p99": p99_text(plan, plain), "dropped": "-",
                     "ok": "yes" if ratio >= 0.97 and not plan["errors"] else "NO"})
        log(f"{rows[-1]['row']}: {rows[-1]['ours']} vs {rows[-1]['ceiling']} = {rows[-1]['ratio']}")
    return ours


def create_rows(args, ours, duration, rows, servers, start_ours, rss_ends):
    """Returns the server left running (the `power` one); appends the RSS of the server it
    stops to `rss_ends`."""
    # Durable creates through HTTP, 64 clients, both durability modes.
    for mode, target in (("process", 25_000), ("power", 5_000)):
        if mode == "power":
            rss_ends.append(rss_mb(ours.proc.pid))
            ours.stop()
            servers.remove(ours)
            ours = start_ours("ours-power", {"VSL_STORAGE__DURABILITY": "power"})
        created = wrk(args, ours.base, "create.lua", [KEY, mode], duration)
        rows.append({"row": f"create, {args.connections} clients, {mode}", "ours": f"{created['rps']:,.0f}/s",
                     "ceiling": "-", "ratio": "-", "target": f"≥ {target:,}/s",
                     "p99": f"{created['p99_ms'] or 0:.1f} ms", "dropped": "-",
                     "ok": "yes" if created["rps"] >= target and not created["errors"] else "NO"})
    return ours


def print_table(rows, links, args):
    machine = f"{os.cpu_count()} cores"
    print(f"\nvshortlink benchmark, {datetime.date.today()}, {machine}, wrk -t{args.threads} "
          f"-c{args.connections}{' (quick: not a measurement)' if args.quick else ''}\n")
    cols = ["row", "ours", "ceiling", "ratio", "target", "p99", "dropped", "ok"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
