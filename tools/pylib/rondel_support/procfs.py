"""/proc readers for one process, a set of processes, a CPU or the machine: CPU ticks, status
fields (RSS, HWM, context switches), open fds and limits, child processes, IPIs, load average.
Sums over pids count each pid once; a thread's figures are its process's unless said."""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def loadavg():
    """The 1, 5 and 15 minute load averages as one string, e.g. "0.52 0.61 0.70"."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_ticks(pids):
    """User + system CPU time (clock ticks, CLK_TCK a second) used so far by pids together."""
    return sum(cpu_ticks_split(pids))


def cpu_ticks_split(pids):
    """(user, system) CPU time in clock ticks used so far by pids together: the kernel charges
    each tick to the mode the process was in, so over seconds the split is a sample."""
    user = system = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        user += int(fields[11])  # utime (field 14)
        system += int(fields[12])  # stime (field 15)
    return user, system


def state(pid):
    """The scheduler state letter of a process (/proc/PID/stat field 3: R, S, D, T, Z ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def cpu_seconds(pid):
    """User + system CPU time one process has used so far, in seconds."""
    return cpu_ticks([pid]) / CLK_TCK


def core_busy_ticks(core=None):
    """Non-idle ticks of one CPU from /proc/stat (user+nice+system+irq+softirq+steal); of all
    CPUs together (the aggregate "cpu" line) when core is None."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{'' if core is None else core} "):
                v = [int(x) for x in line.split()[1:]]
                return sum(v[:8]) - v[3] - v[4]
    return 0


def machine_switches():
    """Context switches on the whole machine so far (/proc/stat ctxt)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return int(line.split()[1])
    return 0


def status_field(path, field):
    """One numeric field of a /proc status file (e.g. "VmRSS", in KiB); 0 when absent."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def status_sum(pids, field):
    """Sum over pids of one numeric field of /proc/PID/status."""
    return sum(status_field(f"/proc/{pid}/status", field) for pid in pids)


def task_status_sum(pids, field):
    """Like status_sum, over every thread of each pid (/proc/PID/task/TID/status): context-switch
    counts in /proc/PID/status are the main thread's only."""
    return sum(status_field(f"/proc/{pid}/task/{tid}/status", field)
               for pid in pids for tid in os.listdir(f"/proc/{pid}/task"))


def voluntary_switches(pids):
    """Times pids blocked (e.g. in epoll_wait with nothing ready) and were woken again."""
    return task_status_sum(pids, "voluntary_ctxt_switches")


def nonvoluntary_switches(pids):
    """Times pids were preempted, over all their threads."""
    return task_status_sum(pids, "nonvoluntary_ctxt_switches")


def rss_kib(pids):
    """Current resident set (VmRSS) summed over pids, KiB."""
    return status_sum(pids, "VmRSS")


def hwm_kib(pids):
    """Peak resident set (VmHWM) summed over pids, KiB."""
    return status_sum(pids, "VmHWM")


def open_fds(pids):
    """File descriptors pids hold open together."""
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)


def max_open_files(pid):
    """Soft RLIMIT_NOFILE of a running process from /proc/PID/limits (-1: unlimited)."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                v = line.split()[3]
                return -1 if v == "unlimited" else int(v)
    return 0


def comm(pid):
    """The command name of a process (/proc/PID/comm)."""
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def children(pid):
    """Pids of the direct children of every thread of `pid`."""
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def proc_tree(pid):
    """`pid` and all its descendants (e.g. nginx's master and workers)."""
    pids = [pid]
    for c in children(pid):
        pids += proc_tree(c)
    return pids


def ipi_counts():
    """Inter-processor interrupts received so far, per CPU: {"RES0": n, "CAL0": n, ...}.
    RES (rescheduling) and CAL (function call) are what a CPU sends another to wake a task there;
    in a virtual machine each one usually costs an exit to the hypervisor. Empty where the
    architecture names them otherwise."""
    out = {}
    with open("/proc/interrupts") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in ("RES:", "CAL:"):
                for cpu, v in enumerate(fields[1:1 + os.cpu_count()]):
                    out[f"{fields[0][:3]}{cpu}"] = int(v)
    return out
