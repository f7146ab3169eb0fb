#!/usr/bin/env bash
# Crash-safety soak: runs tests/crash.rs for many SIGKILL cycles (default 40) against the
# release build. Each cycle: 32 clients create, patch and delete links on the real server, the
# server is killed with SIGKILL, restarted on the same data dir, and every acknowledged write,
# code uniqueness and "pool + links = everything generated" are checked.
#
#   ROUNDS=100 benches/crash.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CRASH_ROUNDS=${ROUNDS:-40} cargo test --release --test crash -- --nocapture 2>&1 |
  grep -E "^round|test result|panicked|FAILED|acknowledged"
