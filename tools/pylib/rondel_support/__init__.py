"""Python support shared by the integration tests, the benchmark and the test backend's selftest.

Modules: procs (start, register and stop processes by pid; drain their output; wait for a log
line), ports (ports from port 0, read back from a process's log line or held as a listening
socket handed to the child), httpio (the HTTP/1 response reader over a raw socket and a small
client), config (the rondel YAML config writer), procfs (/proc readers), daemons (rondel and
rondel-test-backend as processes), metrics (Prometheus text format), ledger (the test backend's
--ledger file). Everything talks to 127.0.0.1 only; nothing here holds mutable module state.
"""
