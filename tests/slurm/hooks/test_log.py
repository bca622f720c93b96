"""The one logger protocol (slurm_energy.slurm.log): both backends write the same line."""

from __future__ import annotations

import logging
import os
import re

import pytest

from slurm_energy.slurm import log as L

#: ``<date> <time>,<ms> <pid> <logger> <LEVEL> <message>``
_HEAD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (\d+) (\S+) (\S+) (.*)$")


@pytest.fixture(autouse=True)
def _backend_back():
    """Each test's backend choice is undone after it (the module's state is process-wide)."""
    before = L._BACKEND[0]
    handlers = logging.getLogger("slurm_energy").handlers[:]
    yield
    L.use(before)
    logging.getLogger("slurm_energy").handlers[:] = handlers


def _lines(path) -> list[str]:
    return open(path, encoding="utf-8").read().splitlines()


def test_the_hooks_backend_writes_one_escaped_line_and_more_indented(tmp_path):
    w = L.use(L.WriteBackend())
    path = w.open(str(tmp_path / "log"))
    assert path == str(tmp_path / "log" / "hooks.log") and os.stat(path).st_mode & 0o777 == 0o600
    L.get("slurm_energy.slurm.hooks.prolog")("ERROR", "job 7: name 'a\nFAKE b'", more="Traceback\n  line 2")
    (head, more1, more2) = _lines(path)  # a user's newline cannot start a line of its own
    pid, name, level, msg = _HEAD.match(head).groups()
    assert (int(pid), name, level, msg) == (os.getpid(), "slurm_energy.slurm.hooks.prolog", "ERROR",
                                            "job 7: name 'a\\nFAKE b'")
    assert (more1, more2) == ("    Traceback", "      line 2")


def test_the_finalizers_backend_writes_the_same_line_through_logging(tmp_path):
    path = L.setup_logging(str(tmp_path / "log"), "finalize.log")
    assert path == str(tmp_path / "log" / "finalize.log") and L._BACKEND[0] is L.logging_backend
    L.get("slurm_energy.slurm.finalize")("WARNING", "job 8: a\rb", more="tb 1\ntb 2")
    logging.getLogger("slurm_energy").handlers[0].flush()
    (head, more1, more2) = _lines(path)
    pid, name, level, msg = _HEAD.match(head).groups()
    assert (int(pid), name, level, msg) == (os.getpid(), "slurm_energy.slurm.finalize", "WARNING", "job 8: a\\rb")
    assert (more1, more2) == ("    tb 1", "    tb 2")


def test_both_backends_fall_back_to_the_one_fallback_log_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "FALLBACK_LOG_DIR", str(tmp_path / "fallback"))
    (tmp_path / "afile").write_text("x")
    unusable = str(tmp_path / "afile" / "log")  # under a file: cannot be created
    assert L.WriteBackend().open(unusable) == str(tmp_path / "fallback" / "hooks.log")
    assert L.setup_logging(unusable, "sampler.log") == str(tmp_path / "fallback" / "sampler.log")


def test_until_an_entry_point_chooses_lines_go_to_stderr(capfd):
    L.use(L.WriteBackend())
    L.get("t")("INFO", "hello")
    err = capfd.readouterr().err
    assert _HEAD.match(err.rstrip("\n")).groups()[1:] == ("t", "INFO", "hello")
