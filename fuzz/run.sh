#!/usr/bin/env bash
# Runs every fuzz target for a bounded time: `fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]`
# (default 60 s each, every target). libFuzzer through cargo-fuzz, without a sanitizer (`-s none`,
# so the stable toolchain builds it; RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z flags).
# FUZZ_BUILD_FLAGS (default `-O`) picks the build: CI's smoke run uses `--dev`, which builds in
# about half the time and still finds panics.
# Prints the executions per target; a crash stops the run, leaves its input under
# fuzz/artifacts/<target>/ and exits non-zero (turn it into a regression test).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(url code config records query yourls hll local_path import_row link_rules lead_form api_key sign_in_form host)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
# A separate target dir: fuzz builds are instrumented and would invalidate the normal ones.
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/fuzz/target}
read -ra BUILD <<<"${FUZZ_BUILD_FLAGS:--O}"
cargo fuzz build -s none "${BUILD[@]}"
for target in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$target"
  log=$(mktemp)
  if ! timeout $((SECONDS_PER_TARGET + 60)) cargo fuzz run -s none "${BUILD[@]}" "$target" \
    -- -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz/run.sh: $target failed; see fuzz/artifacts/$target/" >&2
    exit 1
  fi
  runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
  echo "$target: $runs executions in ${SECONDS_PER_TARGET}s, no crash"
  rm -f "$log"
done
