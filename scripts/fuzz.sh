#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) and fails on the first
# crash, leak or timeout; libFuzzer saves the input under
# fuzz/artifacts/TARGET/. Corpora grow in fuzz/corpus/TARGET/ (not in git).
# Needs the nightly toolchain and cargo-fuzz, which it installs if missing.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
shift || true
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "installing the nightly toolchain (cargo fuzz needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
# Stack-use-after-return detection (on by default in ASan) gives each call a
# heap-allocated frame and costs about a quarter of a stack target's run;
# safe Rust cannot return a reference to a dead frame, and lazynet's unsafe
# code hands stack addresses only to system calls that return before the
# frame does. Set ASAN_OPTIONS to override.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_stack_use_after_return=0}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
for t in "${targets[@]}"; do
  echo "fuzz $t for ${secs}s"
  mkdir -p "corpus/$t"
  log="$(mktemp)"
  # -timeout: one input may take at most 10 s; -rss_limit_mb: 2 GiB.
  status=0
  cargo +nightly fuzz run "$t" "corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || status=$?
  # libFuzzer's progress lines are left in the log; its verdict is shown.
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|==[0-9]+==|SUMMARY|thread .* panicked|artifact_prefix|Test unit written|error)' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    echo "fuzz $t: failed (exit $status); a crashing input is saved in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  rm -f "$log"
done
echo "fuzz: no crash in ${#targets[@]} targets"
