#!/usr/bin/env bash
# Builds the lazynet program and the lab with profile-guided optimisation:
# an instrumented build runs lazynet's main workloads (request/response and
# bulk TCP with both ends in one thread, the in-memory demo), llvm-profdata
# merges what they counted, and a second build uses it. In the paths study
# (docs/PERFORMANCE.md §5) such a build took ~26% fewer instructions per
# round trip than the plain one and ran it faster than smoltcp's; code the
# training does not run is optimised as cold.
#
# Usage: scripts/pgo.sh   (binaries in target/pgo/release/)
set -euo pipefail
cd "$(dirname "$0")/.."

sysroot="$(rustc --print sysroot)"
profdata="$sysroot/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT

echo "pgo: instrumented build (target/pgo-gen)"
RUSTFLAGS="-Cprofile-generate=$raw" CARGO_TARGET_DIR=target/pgo-gen \
  cargo build --release -q -p lazynet-lab -p lazynet-cli
gen=target/pgo-gen/release
echo "pgo: training"
"$gen/lazynet-lab" bench tcp-rr-single --count 200000 --stack lazynet >/dev/null
"$gen/lazynet-lab" bench tcp-bulk-single --bytes 200000000 --stack lazynet >/dev/null
timeout 120 "$gen/lazynet" demo >/dev/null
"$profdata" merge -o target/pgo.profdata "$raw"

echo "pgo: optimised build (target/pgo)"
RUSTFLAGS="-Cprofile-use=$PWD/target/pgo.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
  CARGO_TARGET_DIR=target/pgo cargo build --release -q -p lazynet-lab -p lazynet-cli
echo "built: target/pgo/release/lazynet and target/pgo/release/lazynet-lab"
