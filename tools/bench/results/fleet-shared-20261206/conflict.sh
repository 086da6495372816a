#!/bin/bash
S=build/tools/sim/rondel-sim
B="--fleet --backends 8 --keys 10000 --zipf 1.1 --mean-service 1 --miss-delay 0.2 --cache-objects 1000 --requests 400000 --report-age 1 --fleet-n 0 --min-reports 4"
f() { awk '{printf "%s/%.1f ", substr($5,1,5), 100*$14}'; }
echo "# one balancer (--fleet-split 1), 20 clients, slack 0, balance factor swept"
for bf in 125 120 115 112 110 105; do
  line="bf $bf:"; for seed in 1 2 3; do line+=" $($S $B --clients 20 --slack 0 --balance-factor $bf --fleet-split 1 --seed $seed | head -1 | f)"; done; echo "$line"
done
echo "# one balancer, 20 clients, balance factor 125, slack swept"
for sl in 8 6 4 2 1; do
  line="slack $sl:"; for seed in 1 2 3; do line+=" $($S $B --clients 20 --slack $sl --balance-factor 125 --fleet-split 1 --seed $seed | head -1 | f)"; done; echo "$line"
done
echo "# one balancer, 160 clients, balance factor 125, slack swept"
for sl in 8 7 6; do
  line="slack $sl:"; for seed in 1 2 3; do line+=" $($S $B --clients 160 --slack $sl --balance-factor 125 --fleet-split 1 --seed $seed | head -1 | f)"; done; echo "$line"
done
