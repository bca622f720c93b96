"""Both commands' exit when their reader closes stdout early (``... | head``): quietly, status 141
(128 + SIGPIPE, as ``sacct | head``), no traceback, like other Unix tools."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

EXIT_BROKEN_PIPE = 141


def quiet_on_broken_pipe(run: Callable[[], int]) -> int:
    """``run()``'s status, or :data:`EXIT_BROKEN_PIPE` once stdout's reader has gone."""
    try:
        rc = run()
        sys.stdout.flush()  # a broken pipe surfaces here for output still in the buffer
        return rc
    except BrokenPipeError:
        # Python's documented recipe (library/signal.html, "Note on SIGPIPE"): point stdout at
        # /dev/null so the interpreter's final flush does not raise again at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
