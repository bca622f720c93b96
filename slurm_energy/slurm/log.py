"""One logger protocol for the Slurm glue: ``log(level, msg, more="")``, with two backends.

Each module takes its own logger (``log = get(__name__)``) and calls ``log("INFO", msg)``; the
entry point picks where the lines go (as pypa/build's ``_ctx.LOGGER``, set by its ``__main__``):

* the Prolog/Epilog (:class:`WriteBackend`): one ``os.write`` a line, no ``logging`` import (a
  hook's CPU is mostly its imports, and a burst runs hundreds of hooks at once);
* the detached sampler and finalizer (:func:`setup_logging`): the ``logging`` package, whose
  handlers the finalizer's other modules (``logging.getLogger("slurm_energy...")``) share.

Both write the same line, ``<date> <time>,<ms> <pid> <logger> <LEVEL> <message>``, with the
message's CR/LF and control characters escaped (a user's job name or path cannot forge a line:
:func:`slurm_energy.textsafe.one_line`) and ``more`` (a traceback) on indented lines of their own.
Until an entry point chooses, lines go to stderr through :class:`WriteBackend` (tests, tools).

Stdlib only, and light at import (os and time): the Prolog and Epilog import this module.
"""

from __future__ import annotations

import os
import time

from slurm_energy.textsafe import one_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hooks import this module)
if TYPE_CHECKING:
    import logging
    from typing import Protocol

    class Log(Protocol):
        """What a module logs through: one line at ``level`` (``INFO``, ``WARNING``, ``ERROR``)."""

        def __call__(self, level: str, msg: str, more: str = "") -> None: ...

    class Backend(Protocol):
        """Where every logger's lines go (:func:`use`): ``name`` is the logger's."""

        def __call__(self, name: str, level: str, msg: str, more: str = "") -> None: ...

__all__ = ["FALLBACK_LOG_DIR", "Logger", "WriteBackend", "get", "logging_backend", "setup_logging", "use"]

#: Where the logs go when ``paths.log_dir`` cannot be written: an unusable log dir must not hide
#: why jobs go unrecorded.
FALLBACK_LOG_DIR = "/var/log/slurm-energy"


def _log_dirs(log_dir: str) -> list[str]:
    return list(dict.fromkeys((log_dir, FALLBACK_LOG_DIR)))


def line(name: str, level: str, msg: str, more: str = "", t: float | None = None) -> str:
    """The log line both backends write (module docstring), ending in a newline."""
    t = time.time() if t is None else t
    out = (f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))},{int(t * 1000) % 1000:03d} "
           f"{os.getpid()} {name} {level} {one_line(msg)}\n")
    return out + "".join(f"    {one_line(x)}\n" for x in more.splitlines())


class WriteBackend:
    """The hooks' backend: one ``os.write`` a line to ``log_dir/name`` (opened by :meth:`open`),
    stderr until then."""

    def __init__(self) -> None:
        self.fd, self.path = 2, "<stderr>"

    def open(self, log_dir: str, name: str = "hooks.log") -> str:
        """Log to ``log_dir/name`` (root-only dir, file 0600), else to :data:`FALLBACK_LOG_DIR`,
        else stderr. Returns the log path."""
        for d in _log_dirs(log_dir):
            try:
                os.makedirs(d, mode=0o700, exist_ok=True)
                p = os.path.join(d, name)
                fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                os.fchmod(fd, 0o600)  # job names, users and paths: root-only, like the spool
            except OSError:
                continue
            if self.fd > 2:
                os.close(self.fd)
            self.fd, self.path = fd, p
            break
        return self.path

    def __call__(self, name: str, level: str, msg: str, more: str = "") -> None:
        try:
            os.write(self.fd, line(name, level, msg, more).encode("utf-8", "replace"))
        except OSError:
            pass


#: The backend in use (:func:`use`); a one-element list, so that :class:`Logger` reads it at each call.
_BACKEND: list[Backend] = [WriteBackend()]


def use(backend: Backend) -> Backend:
    """Send every logger's lines to ``backend`` from now on (the entry point's choice). Returns it."""
    _BACKEND[0] = backend
    return backend


class Logger:
    """One module's logger (:func:`get`): ``log(level, msg, more="")`` through the backend in use."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, level: str, msg: str, more: str = "") -> None:
        _BACKEND[0](self.name, level, msg, more)

    def exception(self, msg: str) -> None:
        """``msg`` and the traceback being handled, at ERROR."""
        import traceback

        self("ERROR", msg, traceback.format_exc().rstrip())


def get(name: str) -> Logger:
    """The logger of module ``name`` (``get(__name__)``)."""
    return Logger(name)


def logging_backend(name: str, level: str, msg: str, more: str = "") -> None:
    """The sampler's and finalizer's backend: ``logging.getLogger(name)``, whose handler
    :func:`setup_logging` set (``more`` on lines of its own, escaped by the formatter)."""
    import logging

    logging.getLogger(name).log(logging.getLevelName(level), "%s", msg, extra={"more": more})


def _one_line_formatter() -> type[logging.Formatter]:
    """A :class:`logging.Formatter` class (made on first use: the hooks do not import logging)."""
    import logging

    class OneLine(logging.Formatter):
        """A log record as one line: its message with CR/LF and control characters escaped (a
        user's job name, comment or path cannot forge a line); ``more`` (:func:`logging_backend`),
        a traceback and a stack follow indented, each of their lines escaped."""

        def format(self, record: logging.LogRecord) -> str:
            r = logging.makeLogRecord(record.__dict__)
            r.msg, r.args = one_line(record.getMessage()), None
            exc, r.exc_info, r.exc_text, r.stack_info = record.exc_info, None, None, None
            out = super().format(r)
            extra = self.formatException(exc) if exc else (record.exc_text or "")
            if record.stack_info:
                extra = (extra + "\n" if extra else "") + self.formatStack(record.stack_info)
            more = str(record.__dict__.get("more") or "")
            extra = (more + "\n" + extra if extra else more) if more else extra
            return out + "".join(f"\n    {one_line(x)}" for x in extra.splitlines())

    return OneLine


def setup_logging(log_dir: str, name: str = "hooks.log") -> str:
    """The detached processes' logging: ``logging`` to ``log_dir/name`` (root-only dir), else to
    :data:`FALLBACK_LOG_DIR`, else stderr, and every :class:`Logger` through it
    (:func:`logging_backend`). Returns the log path."""
    import logging
    import sys

    h: logging.Handler = logging.StreamHandler(sys.stderr)
    path = "<stderr>"
    for d in _log_dirs(log_dir):
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            p = os.path.join(d, name)
            h = logging.FileHandler(p)
            os.chmod(p, 0o600)  # job names, users and paths: root-only, like the spool
            path = p
            break
        except OSError:
            continue
    h.setFormatter(_one_line_formatter()("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger("slurm_energy")
    root.handlers[:] = [h]
    root.setLevel(logging.INFO)
    use(logging_backend)
    return path
