#!/usr/bin/env bash
# Downloads over TAP against the Linux kernel's TCP:
#   (a) from `lazynet serve http` over TAP into a namespace (kernel TCP as client),
#       with segmentation offload (the default) and without (`--tso off`);
#   (b) from a Linux HTTP server over a veth pair between two namespaces;
#   (c) the other direction: `lazynet get` of the same body from the Linux HTTP
#       server in lazynet's peer namespace, offload on and off.
# Same client (curl), same body size, same machine, runs alternated; medians.
# Writes results/curl/curl.{csv,txt,png}. Root. Everything created here is
# removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-209715200}   # 200 MiB
RUNS=${RUNS:-5}
if [ $((SIZE % 1048576)) -eq 0 ]; then size_name="$((SIZE / 1048576)) MiB"; else size_name="$SIZE bytes"; fi
BIN="${CARGO_TARGET_DIR:-target}/release/lazynet"
LAB="${CARGO_TARGET_DIR:-target}/release/lazynet-lab"
cargo build --release -q -p lazynet-cli -p lazynet-lab
out=results/curl
mkdir -p "$out"
NS=lnbc$$; NO=lnbo$$; G=lnbg$$; A=lnbva$$; B=lnbvb$$
www=$(mktemp -d)
cleanup() {
  [ -n "${LZ:-}" ] && kill "$LZ" 2>/dev/null || true
  [ -n "${LO:-}" ] && kill "$LO" 2>/dev/null || true
  [ -n "${PY:-}" ] && kill "$PY" 2>/dev/null || true
  [ -n "${PG:-}" ] && kill "$PG" 2>/dev/null || true
  wait 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  ip netns del "$NO" 2>/dev/null || true
  $BIN netns down --peer-ns "$G" --dev "$G" >/dev/null 2>&1 || true
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
  rm -rf "$www"
}
trap cleanup EXIT

# (a) lazynet over TAP.
$BIN serve http --nic tap --peer-ns "$NS" --dev "$NS" --peer-addr 10.202.0.1/24 --addr 10.202.0.2/24 \
  > "$www/lz.out" 2>&1 &
LZ=$!
$BIN serve http --nic tap --tso off --peer-ns "$NO" --dev "$NO" --peer-addr 10.205.0.1/24 --addr 10.205.0.2/24 \
  > "$www/lo.out" 2>&1 &
LO=$!
for _ in $(seq 100); do grep -q ready "$www/lz.out" 2>/dev/null && grep -q ready "$www/lo.out" 2>/dev/null && break; sleep 0.1; done

# (b) Linux over veth: server in $A, client in $B. The body is a file of the same bytes.
ip netns add "$A"; ip netns add "$B"
ip link add va$$ netns "$A" type veth peer name vb$$ netns "$B"
ip -n "$A" addr add 10.203.0.1/24 dev va$$; ip -n "$A" link set va$$ up; ip -n "$A" link set lo up
ip -n "$B" addr add 10.203.0.2/24 dev vb$$; ip -n "$B" link set vb$$ up; ip -n "$B" link set lo up
python3 -c "
import sys
n=int(sys.argv[1]); b=bytes(i%251 for i in range(251))*4096
with open(sys.argv[2],'wb') as f:
    o=0
    while o<n:
        k=min(len(b),n-o); f.write(b[:k]); o+=k" "$SIZE" "$www/body"
ip netns exec "$A" python3 -m http.server 8080 --bind 10.203.0.1 --directory "$www" >/dev/null 2>&1 &
PY=$!
for _ in $(seq 100); do ip netns exec "$A" ss -ltn | grep -q :8080 && break; sleep 0.1; done

run() { ip netns exec "$1" curl -s -o /dev/null -w '%{speed_download}' "$2"; }
lz=(); lo=(); lx=()
for i in $(seq "$RUNS"); do
  lz+=("$(run "$NS" "http://10.202.0.2/bytes/$SIZE")")
  lo+=("$(run "$NO" "http://10.205.0.2/bytes/$SIZE")")
  lx+=("$(run "$B" "http://10.203.0.1:8080/body")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mbs() { for v in "$@"; do awk "BEGIN{printf \"%.1f \", $v/1e6}"; done; }
mz=$(median "${lz[@]}"); mo=$(median "${lo[@]}"); mx=$(median "${lx[@]}")
{
  echo "parameters: SIZE=$SIZE RUNS=$RUNS (runs alternated, medians)"
  echo "lazynet serve http over TAP -> curl (kernel TCP) : runs MB/s $(mbs "${lz[@]}")-> median $(awk "BEGIN{printf \"%.1f\", $mz/1e6}") MB/s"
  echo "same, --tso off (one write per segment)          : runs MB/s $(mbs "${lo[@]}")-> median $(awk "BEGIN{printf \"%.1f\", $mo/1e6}") MB/s"
  echo "Linux python3 http.server over veth -> curl      : runs MB/s $(mbs "${lx[@]}")-> median $(awk "BEGIN{printf \"%.1f\", $mx/1e6}") MB/s"
  echo "ratio lazynet/Linux: $(awk "BEGIN{printf \"%.2f\", $mz/$mx}"); without segmentation offload $(awk "BEGIN{printf \"%.2f\", $mo/$mx}")"
  echo "note: with segmentation offload lazynet writes each TCP burst (up to 64 KiB) to TAP as one GSO frame; without, one write per segment. veth is in-kernel."
  echo "lazynet's TAP counters at exit (segmentation offload on):"
  kill -TERM "$LZ" 2>/dev/null || true; wait "$LZ" 2>/dev/null || true; LZ=
  grep '^nic:' "$www/lz.out" || true
} | tee "$www/notes"

# (c) lazynet receiving: `lazynet get` from python's http.server in its peer namespace.
kill "$LO" 2>/dev/null || true; wait "$LO" 2>/dev/null || true; LO=
$BIN netns up --peer-ns "$G" --dev "$G" --peer-addr 10.207.0.1/24 >/dev/null
ip netns exec "$G" python3 -m http.server 8080 --bind 10.207.0.1 --directory "$www" >/dev/null 2>&1 &
PG=$!
for _ in $(seq 100); do ip netns exec "$G" ss -ltn | grep -q :8080 && break; sleep 0.1; done
get() { # tso on|off -> bytes per second
  $BIN get --tso "$1" --peer-ns "$G" --dev "$G" --peer-addr 10.207.0.1/24 --addr 10.207.0.2/24 \
    http://10.207.0.1:8080/body -o /dev/null 2>"$www/get.err"
  sed -n 's/.* bytes in .* (\([0-9.]*\) Mbit\/s)/\1/p' "$www/get.err" | awk '{printf "%.0f", $1*1e6/8}'
}
gn=(); gf=()
for i in $(seq "$RUNS"); do
  gn+=("$(get on)")
  gf+=("$(get off)")
done
mn=$(median "${gn[@]}"); mf=$(median "${gf[@]}")
{
  echo "lazynet get <- python3 http.server over TAP      : runs MB/s $(mbs "${gn[@]}")-> median $(awk "BEGIN{printf \"%.1f\", $mn/1e6}") MB/s"
  echo "same, --tso off (one read per segment)           : runs MB/s $(mbs "${gf[@]}")-> median $(awk "BEGIN{printf \"%.1f\", $mf/1e6}") MB/s"
  echo "note: with offload the kernel hands lazynet up to 64 KiB per read (TUNSETOFFLOAD TSO4) and the TAP driver cuts it into segments in its buffers."
  get on >/dev/null; echo "lazynet get's TAP counters (offload on): $(grep '^nic:' "$www/get.err" || true)"
} | tee -a "$www/notes"
{
  echo "case,server,run,mb_s"
  rows() { local c=$1 srv=$2; shift 2; local i=0; for v in "$@"; do echo "$c,$srv,$i,$(awk "BEGIN{printf \"%.1f\", $v/1e6}")"; i=$((i + 1)); done; }
  rows "curl from serve http" lazynet "${lz[@]}"
  rows "curl from serve http" "lazynet --tso off" "${lo[@]}"
  rows "curl from serve http" "Linux (python, veth)" "${lx[@]}"
  rows "lazynet get from python" lazynet "${gn[@]}"
  rows "lazynet get from python" "lazynet --tso off" "${gf[@]}"
} >"$out/curl.csv"
$LAB report bars --name curl --out "$out" --command "scripts/bench_curl.sh" --notes "$www/notes" \
  --category case --series server --value mb_s \
  --title "Downloads over TAP against the kernel's TCP ($size_name)" --unit "MB/s"
