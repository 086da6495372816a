"""Processes: start one and register it, drain its output in a thread, wait for a log line,
stop it by its pid (never by name).

A ProcessRegistry is owned by its user (a test module, a benchmark run): every process it
started is stopped by stop_all() or killed by kill_all() (e.g. at exit), in reverse start order.
"""

import re
import signal
import subprocess
import threading
import time

from . import procfs

SIGTERM = signal.SIGTERM


def wait_until(predicate, timeout=10.0, interval=0.02, what="condition"):
    """Polls predicate() until it returns a truthy value and returns that value; raises
    AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class LineReader:
    """Collects a process's output lines in a thread so its pipe never fills.

    `lines` holds every line read so far (decoded, without the newline); wait_for() blocks until
    a line matches, bounded in time.
    """

    def __init__(self, stream):
        self.lines = []
        self.ended = False  # the stream reached its end: no line will be added
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()
        stream.close()
        with self._cv:
            self.ended = True
            self._cv.notify_all()  # wake waiters: no more lines will come

    def wait_for(self, pattern, timeout=10.0, start=0):
        """The first match of regex `pattern` in lines[start:], waiting up to `timeout` seconds;
        AssertionError (with the last lines) when none comes in time."""
        return self.wait_for_all(pattern, 1, timeout, start)[0]

    def wait_for_all(self, pattern, count, timeout=10.0, start=0):
        """The first `count` matches of `pattern` in lines[start:], in order, waiting up to
        `timeout` seconds; AssertionError when fewer come in time or the stream ends first."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        found = []
        with self._cv:
            i = start
            while True:
                while i < len(self.lines) and len(found) < count:
                    m = rx.search(self.lines[i])
                    if m:
                        found.append(m)
                    i += 1
                if len(found) == count:
                    return found
                left = deadline - time.monotonic()
                ended = self.ended and i >= len(self.lines)
                if left <= 0 or ended:
                    why = "the output ended" if ended else f"{timeout}s passed"
                    raise AssertionError(
                        f"{len(found)} of {count} lines matching {pattern!r} before {why}; "
                        "last lines:\n" + "\n".join(self.lines[-20:]))
                self._cv.wait(left)

    def count(self):
        """Number of lines read so far (a `start` for a later wait_for)."""
        with self._cv:
            return len(self.lines)

    def join(self, timeout=5.0):
        """Waits for the end of the stream: once the process has exited, its last lines may
        still be in the pipe when wait() returns. Raises AssertionError when the stream has not
        ended within `timeout` (something else still holds the pipe open), so that no caller
        matches output that was not read to the end."""
        self._thread.join(timeout)
        if not self.ended:
            raise AssertionError(f"the output did not end within {timeout}s")


def exit_on_sigterm():
    """Makes SIGTERM (ctest's timeout, a time-budgeted runner) exit through atexit, so that the
    processes a registry's kill_all() is registered for are killed too."""
    def terminated(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, terminated)


def pause(proc, timeout=5.0):
    """SIGSTOP, then waits until the kernel reports `proc` stopped (state T in /proc/PID/stat):
    from then on it reads, answers and writes nothing. SIGCONT resumes it."""
    proc.send_signal(signal.SIGSTOP)
    wait_until(lambda: procfs.state(proc.pid) == "T", timeout=timeout, interval=0.005,
               what=f"pid {proc.pid} to stop")


def stop_process(proc, sig=SIGTERM, timeout=5.0):
    """Sends `sig` to a running `proc` and waits up to `timeout` s for it to exit, then kills it.
    Returns True when it exited by itself (or had already exited), False when it was killed."""
    if proc.poll() is not None:
        return True
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
        return False


class ProcessRegistry:
    """The processes one user started: each is stopped by pid, never by name."""

    def __init__(self):
        self._procs = []

    def popen(self, argv, **popen_kw):
        """subprocess.Popen(argv, **popen_kw), registered."""
        return self.add(subprocess.Popen(argv, **popen_kw))

    def add(self, proc):
        """Registers a started Popen; returns it."""
        self._procs.append(proc)
        return proc

    append = add  # harness.py's _processes was a list: `_processes.append(p)` keeps working

    def stop(self, proc, sig=SIGTERM, timeout=5.0):
        """stop_process(proc, sig, timeout), then forgets it. Returns stop_process's result."""
        clean = stop_process(proc, sig, timeout)
        if proc in self._procs:
            self._procs.remove(proc)
        return clean

    def forget(self, proc):
        """Stops tracking `proc` (it was waited for by its user)."""
        if proc in self._procs:
            self._procs.remove(proc)

    def stop_all(self, sig=SIGTERM, timeout=5.0):
        """Stops every registered process, the last started first."""
        for p in list(reversed(self._procs)):
            self.stop(p, sig, timeout)

    def kill_all(self):
        """SIGKILL to every registered process still running (for atexit); never raises."""
        for p in list(reversed(self._procs)):
            if p.poll() is None:
                try:
                    p.kill()
                    p.wait(timeout=5)
                except Exception:  # noqa: BLE001 - at exit, a failure to reap must not mask others
                    pass

    def __contains__(self, proc):
        return proc in self._procs


class Process:
    """One started process with its output (stdout and stderr together) drained into `out`."""

    def __init__(self, argv, registry, env=None, pass_fds=(), cwd=None):
        self.argv = list(argv)
        self.registry = registry
        self.proc = registry.popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=env, pass_fds=tuple(pass_fds), cwd=cwd)
        self.out = LineReader(self.proc.stdout)

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc.poll() is None

    def wait_for(self, pattern, timeout=10.0, start=0):
        """LineReader.wait_for on this process's output."""
        return self.out.wait_for(pattern, timeout, start)

    def lines(self, pattern=None):
        """Output lines so far (all, or those matching regex `pattern`); after the process
        exited, waits (bounded) for the rest of its output first."""
        if self.proc.poll() is not None:
            self.out.join()
        if pattern is None:
            return list(self.out.lines)
        rx = re.compile(pattern)
        return [line for line in list(self.out.lines) if rx.search(line)]

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=SIGTERM, timeout=5.0):
        """Signal, wait, kill after `timeout`; True when it exited by itself."""
        return self.registry.stop(self.proc, sig, timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.registry.forget(self.proc)
