#!/usr/bin/env bash
# Runs lazynet's benchmarks and writes one current run of each to
# results/NAME/NAME.{csv,txt,png}; every NAME.txt names the command, the
# machine, the commit and the date.
#
#   scripts/bench.sh          everything below
#   scripts/bench.sh micro    checksum, classifier, ring (cargo bench)
#   scripts/bench.sh udp      UDP echo, lazynet against Linux
#   scripts/bench.sh sched    the executor's yield check (cargo bench) and the
#                             wake-up latency of a sleeping host against Linux
#   scripts/bench.sh tcp      TCP against smoltcp: tcp-bulk, tcp-rr, tcp-instructions
#
# TCP_BULK_SECONDS and TCP_BULK_RUNS (default 2 s, 20 runs) and
# TCP_RR_SECONDS and TCP_RR_RUNS (default 1 s, 15 runs) set the length and
# number of the tcp-bulk and tcp-rr runs.
#
# The experiments have a command each (docs/EXPERIMENTS.md); the downloads
# over TAP against the Linux kernel are scripts/bench_curl.sh (root).
# Comparisons are measured side by side in one run, alternated; as root the
# runs get `nice -n -15` so that other work on the machine disturbs less.
set -euo pipefail
cd "$(dirname "$0")/.."
section=${1:-all}
lab="${CARGO_TARGET_DIR:-target}/release/lazynet-lab"
cargo build --release -q -p lazynet-lab
prio=()
if [ "$(id -u)" = 0 ]; then prio=(nice -n -15); fi
raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT

if [ "$section" = all ] || [ "$section" = micro ]; then
  for b in checksum classifier; do
    cmd="cargo bench -p lazynet --bench $b -- --warm-up-time 1 --measurement-time 3"
    echo "$cmd"
    $cmd | tee "$raw"
    "$lab" report criterion --name "$b" --raw "$raw" --command "$cmd" --out "results/$b"
  done
  cmd="cargo bench -p lazynet --bench ring"
  echo "$cmd"
  $cmd | tee "$raw"
  mkdir -p results/ring
  { echo "run,ends,mdesc_per_s"
    awk '/^  rep [0-9]+:/ { sub(":", "", $2); print $2 ",two processes," $3 }' "$raw"; } >results/ring/ring.csv
  grep -E '^(ring bench|throughput|round trip)' "$raw" >"$raw.notes"
  "$lab" report bars --name ring --out results/ring --command "$cmd" --notes "$raw.notes" \
    --category run --series ends --value mdesc_per_s \
    --title "SPSC ring between two processes (batches of 64)" --unit "million descriptors/s"
  rm -f "$raw.notes"
fi

if [ "$section" = all ] || [ "$section" = sched ]; then
  cmd="cargo bench -p lazynet --bench sched -- --warm-up-time 1 --measurement-time 3"
  echo "$cmd"
  $cmd | tee "$raw"
  "$lab" report criterion --name sched --raw "$raw" --command "$cmd" --out results/sched
  "${prio[@]}" "$lab" bench wakeup --out results/wakeup
fi

if [ "$section" = all ] || [ "$section" = udp ]; then
  "${prio[@]}" "$lab" bench udp-echo --seconds 3 --runs 5 --out results/udp-echo
fi

if [ "$section" = all ] || [ "$section" = tcp ]; then
  # The host may move the two vCPUs between cores that share a cache and
  # cores that do not every few seconds: many short runs, each probed before
  # and after and classed, so that ratios are read within one placement.
  # --wire adds the per-byte work alone (copies and checksums of a stack with
  # copy semantics) as a reference series.
  "${prio[@]}" "$lab" bench tcp-bulk --seconds "${TCP_BULK_SECONDS:-2}" --runs "${TCP_BULK_RUNS:-20}" \
    --stack both --wire --out results/tcp-bulk
  "${prio[@]}" "$lab" bench tcp-rr --seconds "${TCP_RR_SECONDS:-1}" --runs "${TCP_RR_RUNS:-15}" \
    --stack both --out results/tcp-rr
  # Instructions do not depend on the machine's load: one run.
  "$lab" bench tcp-instructions --out results/tcp-instructions
fi
