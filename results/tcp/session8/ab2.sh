#!/bin/bash
# usage: ab2.sh ROUNDS "label:ENV=..|ARGS" ...  alternates variants; a cache-line ping-pong probe
# before and after each run classifies it: F (both < 150 ns), S (both > 250 ns), M (mixed).
# prints: round label class lazynet_gbit probe_before probe_after
rounds=$1; shift
for i in $(seq 1 $rounds); do
  for v in "$@"; do
    label=${v%%:*}; rest=${v#*:}
    envs=$(echo "$rest" | cut -d'|' -f1); args=$(echo "$rest" | cut -s -d'|' -f2)
    bin=$(echo "$envs" | grep -o "BIN=[^ ]*" | cut -d= -f2); bin=${bin:-/work/main/target/release/lazynet}
    stack=$(echo "$envs" | grep -o "STACK=[^ ]*" | cut -d= -f2); stack=${stack:-lazynet}
    p0=$(/work/scratch/pp/pp | cut -d' ' -f1)
    r=$(env $envs timeout 60 $bin bench tcp-bulk --seconds ${SECS:-1} --runs 1 --stack $stack $args --out /tmp/ab 2>&1 | grep -E "^tcp-bulk,$stack" | awk -F, '{printf "%s", $6}')
    p1=$(/work/scratch/pp/pp | cut -d' ' -f1)
    c=$(python3 -c "a,b=$p0,$p1; print('F' if a<150 and b<150 else ('S' if a>250 and b>250 else 'M'))")
    echo "$i $label $c $r $p0 $p1"
  done
done
