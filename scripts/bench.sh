#!/usr/bin/env bash
# Runs the core benchmarks of issue 2 and writes results/core/*.txt with the
# command, the machine and the date. Side-by-side comparisons (lazynet vs
# Linux) are measured in one run by the benchmark itself.
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/core
mkdir -p "$out"
machine() {
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
run() { # name, command...
  local name=$1; shift
  { echo "command: $*"; machine; echo; "$@" 2>&1 | grep -E "time:|thrpt:|^classify|^checksum|M desc|median|p50|impl,|lazynet-wire|linux-loopback|^[a-z]+/" || true; } | tee "$out/$name.txt"
}
cargo build --release -p lazynet-cli
run checksum cargo bench -p lazynet --bench checksum -- --warm-up-time 1 --measurement-time 3
run classifier cargo bench -p lazynet --bench classifier -- --warm-up-time 1 --measurement-time 3
run ring cargo bench -p lazynet --bench ring
run udp-echo ./target/release/lazynet bench udp-echo --seconds 3 --runs 5 --out results/udp-echo
