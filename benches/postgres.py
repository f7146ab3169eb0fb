#!/usr/bin/env python3
"""vshortlink on PostgreSQL beside sled, in one run: durable creates with 64 clients, and
redirects (one hot code; uniform over every seeded link), for sled, one instance on PostgreSQL,
and two instances on one PostgreSQL database (the load split evenly between them).

    python3 benches/postgres.py               # 100,000 links, release build, ~3 minutes
    python3 benches/postgres.py --quick       # seconds, 2,000 links, debug build

Needs `wrk` and PostgreSQL's server binaries (Debian's `postgresql`: it finds the newest
/usr/lib/postgresql/*/bin, or PG_BIN); installs nothing. The server it starts runs in a temp
dir on a free port with PostgreSQL's default durability (fsync and synchronous_commit on), as
the `postgres` user when run as root. 127.0.0.1 only; every load is bounded in time. Shares its
helpers (seeding, wrk, servers) with benches/run.py.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as harness  # noqa: E402  (benches/run.py)

from run import KEY, ROOT, Server, free_port, log, seed_file  # noqa: E402


def pg_bin():
    if os.environ.get("PG_BIN"):
        return os.environ["PG_BIN"]
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    raise SystemExit("PostgreSQL's server binaries were not found: apt-get install postgresql, "
                     "or set PG_BIN")


class Postgres:
    """A PostgreSQL server in a temp dir, stopped by stop()."""

    def __init__(self, tmp):
        self.bin = pg_bin()
        self.dir = os.path.join(tmp, "pg")
        os.makedirs(self.dir)
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.dir, self.user)
        self.port = free_port()
        self.data = os.path.join(self.dir, "data")
        self.run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8")
        self.run("pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-o",
                 f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                 "-c max_connections=300 -c shared_buffers=256MB", "start")

    def run(self, program, *args):
        argv = [os.path.join(self.bin, program), *args]
        if self.user:
            argv = ["runuser", "-u", self.user, "--"] + argv
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def create_database(self, name):
        psql = os.path.join(self.bin, "psql")
        subprocess.run([psql if os.path.exists(psql) else "psql", "-X", "-q", "-h", self.dir,
                        "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                        "-c", f"CREATE DATABASE {name}"], check=True)
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self):
        try:
            self.run("pg_ctl", "-D", self.data, "-m", "fast", "stop")
        except subprocess.CalledProcessError:
            pass


def config_file(tmp, name, port, database):
    path = os.path.join(tmp, f"{name}.toml")
    storage = f'path = "{os.path.join(tmp, name + "-data")}"\n'
    if database:
        storage += f'backend = "postgres"\n[storage.postgres]\nurl = "{database}"\npool_size = 32\n'
    with open(path, "w") as f:
        f.write(f"""
[server]
listen = "127.0.0.1:{port}"
base_url = "http://sl.bench"
[storage]
{storage}
[cache]
capacity = 100000
[auth]
keys = [{{ key = "{KEY}", name = "bench", role = "admin" }}]
[limits.rates]
not_found_per_ip = "off"
""")
    return path


def wrk_split(args, servers, script, script_args, duration):
    """wrk against every server at once, the connections split evenly; summed."""
    per = max(1, args.connections // len(servers))
    threads = max(1, args.threads // len(servers))
    procs = []
    for s in servers:
        cmd = ["wrk", f"-t{threads}", f"-c{per}", f"-d{duration}", "--latency",
               "-H", f"User-Agent: {harness.USER_AGENT}", "-H", f"Referer: {harness.REFERER}",
               "-s", os.path.join(harness.WRK_DIR, script), s.base, "--"] + script_args
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True))
    total, p99s, errors = 0.0, [], 0
    import re
    for p in procs:
        out, _ = p.communicate(timeout=600)
        rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
        total += float(rps.group(1)) if rps else 0.0
        m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
        if m:
            p99s.append(float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)])
        bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
        errors += int(bad.group(1)) if bad else 0
    return {"rps": total, "p99_ms": max(p99s) if p99s else None, "errors": errors}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--links", type=int)
    parser.add_argument("--duration")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--skip-build", action="store_true")
    args = parser.parse_args()
    links = args.links or (2_000 if args.quick else 100_000)
    duration = args.duration or ("1s" if args.quick else "10s")
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk")
    profile = [] if args.quick else ["--release"]
    if not args.skip_build:
        log("building")
        subprocess.run(["cargo", "build", *profile, "--bin", "vshortlink"], cwd=ROOT, check=True)
    binary = os.path.join(ROOT, "target", "debug" if args.quick else "release", "vshortlink")
    tmp = tempfile.mkdtemp(prefix="vsl-pgbench-")
    os.chmod(tmp, 0o755)
    pg = Postgres(tmp)
    servers = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("VSL_")}
    env["RUST_LOG"] = "warn"
    rows = []
    try:
        seed = os.path.join(tmp, "seed.jsonl")
        codes, _, _ = seed_file(seed, links, int(time.time() * 1000), 0.0)
        with open(os.path.join(tmp, "codes.txt"), "w") as f:
            f.write("\n".join(codes) + "\n")
        with open(os.path.join(tmp, "hot.txt"), "w") as f:
            f.write(codes[0] + "\n")
        setups = [("sled", None, 1), ("postgres, 1 instance", "one", 1),
                  ("postgres, 2 instances", "two", 2)]
        for label, db, count in setups:
            database = pg.create_database(db) if db else None
            configs = [config_file(tmp, f"{db or 'sled'}{i}", free_port(), database)
                       for i in range(count)]
            log(f"{label}: seeding {links:,} links")
            started = time.monotonic()
            subprocess.run([binary, "--config", configs[0], "import", seed], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            seeded = time.monotonic() - started
            group = []
            for i, config in enumerate(configs):
                port = int(open(config).read().split('listen = "127.0.0.1:')[1].split('"')[0])
                s = Server(f"ours-{db or 'sled'}{i}", [binary, "--config", config], port, env=env,
                           log_path=os.path.join(tmp, f"{db or 'sled'}{i}.log"))
                servers.append(s)
                group.append(s)
            result = {"setup": label, "seed": f"{seeded:.1f} s"}
            for name, script, script_args in (
                    ("create", "create.lua", [KEY, f"{db or 'sled'}"]),
                    ("hot", "zipf.lua", [os.path.join(tmp, "hot.txt")]),
                    ("uniform", "zipf.lua", [os.path.join(tmp, "codes.txt"), "uniform"])):
                wrk_split(args, group, script, script_args + (["warm"] if name == "create" else []), "1s")
                m = wrk_split(args, group, script, script_args, duration)
                result[name] = m
                log(f"{label} {name}: {m['rps']:,.0f}/s p99 {m['p99_ms']} ms, errors {m['errors']}")
            for s in group:
                s.stop()
            rows.append(result)
    finally:
        for s in servers:
            s.stop()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n{links:,} links, wrk -t{args.threads} -c{args.connections} -d{duration} "
          f"(split evenly over the instances), {'debug' if args.quick else 'release'} build\n")
    print("| setup | creates/s (p99) | hot redirect/s (p99) | uniform redirect/s (p99) | seeding |")
    print("|---|---|---|---|---|")

    def cell(m):
        p99 = f"{m['p99_ms']:.1f} ms" if m["p99_ms"] is not None else "-"
        bad = f", {m['errors']:,} non-2xx/3xx" if m["errors"] else ""
        return f"{m['rps']:,.0f} ({p99}{bad})"

    for r in rows:
        print(f"| {r['setup']} | {cell(r['create'])} | {cell(r['hot'])} | {cell(r['uniform'])} "
              f"| {r['seed']} |")


if __name__ == "__main__":
    main()
