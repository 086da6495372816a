"""The side-by-side benchmark (rondel, HAProxy, nginx, no proxy), one module per pass.

context (the options and state of one run, passed down: no module globals), backends, proxies,
load (wrk runs and what is measured around them), report (shared table formatting), then one
module per pass: throughput (and calibration), latency, distribution, idle, workers, bodies,
tls, profile;
cli (the command line, tools/bench/run.sh passes its flags through bench.py). Processes, ports,
/proc readers, the HTTP reader and the rondel config writer come from tools/pylib/rondel_support.
"""
