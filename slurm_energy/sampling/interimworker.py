"""The sampler's interim flushes, run in a forked worker process so the sampling loop never waits on them.

An interim flush (the job's energy so far, stored with status ``running``) loads the config and
writes the store, which can block in C code for a second or more on a loaded node (no Python signal
handler runs meanwhile), while the Epilog SIGKILLs a sampler that has not answered its TERM within
1 s. So the sampling process only asks: the worker is forked at the first flush and keeps its state
(the running summary reads only the new rows); a request while a flush runs is dropped (the next
covers it); a dead worker is forked again; :meth:`InterimWorker.kill` SIGKILLs it mid-flush (the
database rolls the write back; the final record comes from the finalizer, after the sampler); the
worker exits by itself when its request pipe reads end-of-file.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

log = logging.getLogger("slurm_energy.sampler")


class InterimWorker:
    """One forked process that runs ``fn()`` whenever asked (one flush at a time)."""

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn
        self.pid: int | None = None
        self.busy = False
        self.last_cpu_s = 0.0  # CPU seconds the worker's last finished flush took
        self._req_w = self._resp_r = -1
        self.killed_pid: int | None = None  # the worker kill() ended, until reap_killed()

    def request(self) -> bool:
        """Start a flush in the worker (forking it first if needed); False (nothing started) while
        the previous flush is still running. Never blocks on the flush."""
        if self.busy:
            self._collect()
        if self.busy:
            return False
        if self.pid is None:
            self._fork()
        try:
            os.write(self._req_w, b"x")
        except OSError:  # the worker died (EPIPE): fork a new one at the next request
            self._forget()
            return False
        self.busy = True
        return True

    def _collect(self) -> None:
        """Reads the worker's answers (one line of CPU seconds per finished flush), without waiting."""
        try:
            got = os.read(self._resp_r, 4096)
        except BlockingIOError:
            return  # still flushing
        except OSError:
            got = b""
        if not got:  # end of file: the worker died mid-flush
            self._forget()
            return
        self.busy = False
        try:
            self.last_cpu_s = float(got.split()[-1])
        except (ValueError, IndexError):
            pass

    def _fork(self) -> None:
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        resp_r, resp_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(req_w)
                os.close(resp_r)
                code = self._serve(req_r, resp_w)
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(resp_w)
        os.set_blocking(resp_r, False)
        self.pid, self._req_w, self._resp_r = pid, req_w, resp_r

    def _serve(self, req_r: int, resp_w: int) -> int:
        """The worker's loop: a flush per request byte, until the sampler's end of the pipe closes."""
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # not the sampler's stop handler
            signal.signal(s, signal.SIG_DFL)
        while os.read(req_r, 1):
            t = time.process_time()
            try:
                self.fn()
            except Exception:
                log.exception("interim summary failed")
            os.write(resp_w, f"{time.process_time() - t:.6f}\n".encode())
        return 0

    def kill(self) -> None:
        """Ends the worker now (SIGKILL, whatever it is doing; never waits): :meth:`reap_killed`
        later, once it has had time to exit."""
        pid = self.pid
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        self.killed_pid = pid
        self.pid = None
        self._forget()

    def reap_killed(self) -> None:
        """Reaps the killed worker if it has exited (never waits; else init reaps it after the sampler)."""
        if self.killed_pid is not None:
            self.reap(self.killed_pid)

    def _forget(self) -> None:
        for fd in (self._req_w, self._resp_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.pid is not None:
            self.reap(self.pid)
        self.pid, self.busy, self._req_w, self._resp_r = None, False, -1, -1

    @staticmethod
    def reap(pid: int) -> bool:
        """Reaps ``pid`` if it has exited (never waits); True when it was."""
        try:
            return os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:
            return True
