"""check_store_url: an unusable store URL is found by check-config, not at the first job's finalizer."""

import sys

import pytest

from slurm_energy.store import check_store_url, open_store


@pytest.mark.parametrize("url", [
    "sqlite:////var/spool/slurm-energy/jobs.db",
    "postgresql+psycopg://se:secret@db.example:5432/energy",
    "postgresql://se@db.example/energy",  # read as +psycopg, which is installed in this venv
])
def test_supported_urls_pass(url):
    assert check_store_url(url) is None


@pytest.mark.parametrize("url, expect", [
    ("mysql://x/db", ["'mysql://x/db'", "backend 'mysql' is not supported", "sqlite:////abs/path/jobs.db",
                      "postgresql+psycopg://"]),
    ("postgresql+psycopg2://se:secret@h/energy", ["'postgresql+psycopg2://se:***@h/energy'",
                                                  "driver 'psycopg2' is not supported", "postgresql+psycopg://"]),
    ("sqlite:///jobs.db", ["'sqlite:///jobs.db'", "'jobs.db' is relative", "sqlite:////abs/path/jobs.db"]),
    ("sqlite://", ["names no database file", "four slashes"]),
    ("not a url", ["'not a url' cannot be parsed", "sqlite:////abs/path/jobs.db"]),
    ("", ["is empty"]),
    ("postgresql+psycopg://se@h", ["names no database", "host:port/dbname"]),
])
def test_unsupported_urls_are_named_with_the_fix(url, expect):
    msg = check_store_url(url)
    assert msg is not None
    for part in expect:
        assert part in msg, msg
    assert "secret" not in msg  # a password is never printed


def test_plain_postgresql_refused_when_psycopg_is_missing(monkeypatch):
    # None in sys.modules makes `import psycopg` raise ImportError, as on a host without the driver
    monkeypatch.setitem(sys.modules, "psycopg", None)
    msg = check_store_url("postgresql://se:secret@db/energy")
    assert msg is not None
    assert "'postgresql://se:***@db/energy' needs the psycopg (3) driver, which is not installed" in msg
    assert "pip install 'psycopg[binary]'" in msg and "secret" not in msg


def test_open_store_refuses_with_the_same_message(tmp_path):
    with pytest.raises(ValueError, match="backend 'mysql' is not supported"):
        open_store("mysql://x/db")
    with pytest.raises(ValueError, match="is relative"):
        open_store("sqlite:///relative/jobs.db")
