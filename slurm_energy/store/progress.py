"""A progress bar (rich) on stderr for store work that can take over 2 s (migration backfill, full
records read for a report); silent when stderr is not a terminal (hooks, cron, tests)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress(total: int, what: str, *, min_total: int = 20_000) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; draws a bar of ``total`` steps described by ``what`` when stderr is a
    terminal and ``total`` >= ``min_total`` (smaller jobs finish in well under 2 s)."""
    if total < min_total or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n: bar.advance(task, n)
