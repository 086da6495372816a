#!/bin/bash
S=build/tools/sim/rondel-sim
B="--fleet --backends 8 --keys 10000 --zipf 1.1 --mean-service 1 --miss-delay 0.2 --cache-objects 1000 --requests 400000 --balance-factor 125 --report-age 1 --fleet-n 0 --min-reports 4"
f() { awk '{printf "%s/%.1f ", substr($5,1,5), 100*$14}'; }
for c in 20 160; do for s in 0 8; do for sp in 34,33,33 60,30,10; do
  for seed in 1 2 3; do
    line="$c $s $sp seed$seed | "
    line+="none: $($S $B --clients $c --slack $s --fleet-split $sp --seed $seed | head -1 | f)"
    line+="| rnd: $($S $B --clients $c --slack $s --fleet-split $sp --seed $seed | tail -1 | f)"
    for p in ${PS:-0.02 0.05 0.1 0.25}; do
      line+="| p$p: $($S $B --clients $c --slack $s --fleet-split $sp --seed $seed --peer-share $p | tail -1 | f)"
    done
    line+="| one: $($S $B --clients $c --slack $s --fleet-split 1 --seed $seed | head -1 | f)"
    echo "$line"
  done
done; done; done
