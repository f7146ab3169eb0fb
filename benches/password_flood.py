#!/usr/bin/env python3
"""Wrong visitor passwords from many sources at once, and what they cost the server in memory:
the load of the second attack run's finding 4 (40 sources x 10 wrong guesses each, all at
once, at `memory.budget = 256MB`), against one password-protected link.

    python3 benches/password_flood.py [BINARY] [--sources 40] [--each 10]

BINARY defaults to target/release/vshortlink (build it first). The server runs on 127.0.0.1
with a temp data directory, trusting X-Forwarded-For from the loopback so that each source is
its own client address (within `password_per_ip`, 10 a minute). It prints the answers by
status and the process's resident memory before the flood and at its peak (VmHWM, sampled
with VmRSS every 10 ms). Run it on two builds side by side to compare them.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

KEY = "bench-admin-key-0001"


def rss_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def request(url, headers=None, data=None, method="GET"):
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default="target/release/vshortlink")
    parser.add_argument("--sources", type=int, default=40)
    parser.add_argument("--each", type=int, default=10)
    args = parser.parse_args()
    urllib.request.install_opener(urllib.request.build_opener(NoRedirect))

    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "config.toml")
        with open(config, "w") as f:
            f.write(f"""
[server]
listen = "127.0.0.1:0"
base_url = "http://127.0.0.1"
trust_proxy_headers = true
[storage]
path = "{tmp}/data"
[auth]
keys = [{{ key = "{KEY}", name = "admin", role = "admin" }}]
[memory]
budget = "256MB"
""")
        server = subprocess.Popen([args.binary, "--config", config],
                                  stderr=subprocess.PIPE, text=True)
        addr = None
        for line in server.stderr:
            m = re.search(r"listen=(\S+)", line)
            if m:
                addr = m.group(1)
                break
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
        base = f"http://{addr}"
        status, body = request(f"{base}/api/v1/links",
                               {"Authorization": f"Bearer {KEY}",
                                "Content-Type": "application/json"},
                               json.dumps({"url": "https://example.com/vault",
                                           "password": "the-right-one"}).encode(),
                               "POST")
        code = json.loads(body)["code"]
        time.sleep(0.5)
        before = rss_kb(server.pid, "VmRSS")

        peak = [before]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kb(server.pid, "VmRSS"))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        statuses = collections.Counter()
        lock = threading.Lock()
        go = threading.Barrier(args.sources * args.each)

        def guess(source, n):
            go.wait()
            s, _ = request(f"{base}/{code}", {"X-Forwarded-For": f"198.51.100.{source}",
                                              "X-Link-Password": f"wrong-{source}-{n}",
                                              "Accept": "application/json"})
            with lock:
                statuses[s] += 1

        started = time.time()
        threads = [threading.Thread(target=guess, args=(s, n))
                   for s in range(args.sources) for n in range(args.each)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - started
        done.set()
        sampler.join()
        hwm = rss_kb(server.pid, "VmHWM")
        server.terminate()
        server.wait(timeout=30)
        print(f"binary {args.binary}")
        print(f"{args.sources * args.each} wrong passwords from {args.sources} sources at once, "
              f"{elapsed:.1f} s")
        print("answers: " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())))
        print(f"RSS before {before / 1024:.0f} MB, sampled peak {peak[0] / 1024:.0f} MB, "
              f"VmHWM {hwm / 1024:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
