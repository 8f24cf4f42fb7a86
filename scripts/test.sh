#!/usr/bin/env bash
# Runs every lazynet test. Installs what the tests need (Debian packages for
# the real-peer and real-player tests). Root-only tests run as root; elsewhere they print
# "skipped: needs root" — except under CI=true, where they must run.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for t in ip:iproute2 ping:iputils-ping tcpdump:tcpdump python3:python3 ffmpeg:ffmpeg curl:curl nft:nftables nginx:nginx-light wrk:wrk ab:apache2-utils valgrind:valgrind objdump:binutils taskset:util-linux; do
  command -v "${t%%:*}" >/dev/null 2>&1 || need+=("${t#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing ${need[*]}: tests that need them will say so" >&2
  fi
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -q -- -D warnings
# All unit, property, cross-process, hostile-input and real-peer tests.
cargo test --workspace
# The same TCP tests (the differential fast-path tests among them) on the
# build without layout hints: the default build outlines rare code into
# functions of its own (crates/lazynet/build.rs).
LAZYNET_LAYOUT=std cargo test -q -p lazynet --test tcp --test stack
# The loom models: the SPSC ring (it also proves a weakened ordering is
# caught) and the ni-lrp channel notification (it also proves that a
# weakened disarm strands a frame).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p lazynet --release --test loom
# The examples, run as a user runs them (each checks every byte and exits
# 0 only if all came back): on the in-memory wire, and as root with the
# kernel as the peer over TAP and AF_XDP.
cargo build --release -q -p lazynet -p lazynet-tokio --examples
examples="${CARGO_TARGET_DIR:-target}/release/examples"
for ex in udp_echo tcp_echo hyper_server async_client; do
  echo "example $ex"
  "$examples/$ex"
done
if [ "$(id -u)" = 0 ]; then
  for nic in tap xdp; do
    echo "examples --nic $nic"
    "$examples/udp_echo" --nic "$nic" --count 2000
    "$examples/tcp_echo" --nic "$nic" --bytes 1000000
    "$examples/hyper_server" --nic "$nic" --requests 50
    "$examples/async_client" --nic "$nic" --messages 200
  done
elif [ "${CI:-}" = true ]; then
  echo "the examples on TAP and AF_XDP need root under CI=true" >&2
  exit 1
else
  echo "skipped: needs root (the examples on --nic tap|xdp)"
fi
# The quick experiments of the lab, optimized as they are run, one after the
# other (each pins a thread to each core): each fails if its qualitative
# shape (LRP flat, eager collapsing, guaranteed streams keeping their rate,
# ...) is not there. The Linux and SCHED_FIFO series need root; under
# CI=true they must run.
cargo build --release -q -p lazynet-lab
lab="${CARGO_TARGET_DIR:-target}/release/lazynet-lab"
exp_out="$(mktemp -d)"
trap 'rm -rf "$exp_out"' EXIT
# Prints the verdict lines (pattern $2) of result file $1; a run whose file
# has none judged nothing, and fails.
verdicts() {
  grep -E "$2" "$1" || {
    echo "no verdicts in $1: the run judged nothing" >&2
    exit 1
  }
}
linux_flag=()
if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then
    echo "the overload experiments' Linux series needs root under CI=true" >&2
    exit 1
  fi
  echo "skipped: needs root (Linux series of the overload experiments)"
  linux_flag=(--no-linux)
fi
for e in livelock latency-under-load fairness syn-flood rtu-qos; do
  echo "lazynet-lab $e --quick"
  "$lab" "$e" --quick "${linux_flag[@]}" --out "$exp_out/$e" >"$exp_out/$e.log" 2>&1 || {
    cat "$exp_out/$e.log"
    exit 1
  }
  verdicts "$exp_out/$e/$e.txt" '^  (met|MISSED|not judged)'
done
# The paths study: STD and the default build compiled from this tree,
# counted with callgrind and cachegrind beside smoltcp, timed alternated
# (it fails if any measure is missing).
echo "lazynet-lab paths --quick"
"$lab" paths --quick --out "$exp_out/paths" >"$exp_out/paths.log" 2>&1 || {
  cat "$exp_out/paths.log"
  exit 1
}
verdicts "$exp_out/paths/paths.txt" '^  (instructions|L1I|one-thread)'
# MemNet (offload placement): the API costs, the web servers and several
# clients, each series a real program; Linux's series need root.
if [ "$(id -u)" = 0 ]; then
  cargo build --release -q -p lazynet-cli
  echo "lazynet-lab memnet --quick"
  "$lab" memnet --quick --out "$exp_out/memnet" >"$exp_out/memnet.log" 2>&1 || {
    cat "$exp_out/memnet.log"
    exit 1
  }
  verdicts "$exp_out/memnet/memnet.txt" '^  (met|MISSED)'
  # The real NIC path: lazynet over AF_XDP and TAP against nginx, with
  # wrk, ab, curl and lazynet's load generator; UDP echo against Linux.
  echo "lazynet-lab web --quick"
  "$lab" web --quick --out "$exp_out/web" >"$exp_out/web.log" 2>&1 || {
    cat "$exp_out/web.log"
    exit 1
  }
  verdicts "$exp_out/web/web.txt" '^  (met|MISSED)'
else
  echo "skipped: needs root (lazynet-lab memnet --quick, lazynet-lab web --quick)"
fi
