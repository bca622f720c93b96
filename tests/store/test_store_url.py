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


# ------------------------------------------ resolve_store_url: the one precedence, paths, typos, ''


def test_precedence_store_flag_then_env_then_config():
    from slurm_energy.store.urls import resolve_store_url

    env = {"SLURM_ENERGY_STORE": "sqlite:////env/jobs.db"}
    assert resolve_store_url("sqlite:////cli/jobs.db", "sqlite:////cfg/jobs.db", env) == ("sqlite:////cli/jobs.db", "--store")
    assert resolve_store_url(None, "sqlite:////cfg/jobs.db", env) == ("sqlite:////env/jobs.db", "$SLURM_ENERGY_STORE")
    # an empty variable counts as unset (FOO= in a shell); the config is read only then
    calls = []
    got = resolve_store_url(None, lambda: calls.append(1) or "sqlite:////cfg/jobs.db", {"SLURM_ENERGY_STORE": ""})
    assert got == ("sqlite:////cfg/jobs.db", "paths.store_url") and calls == [1]
    resolve_store_url("sqlite:////cli/jobs.db", lambda: calls.append(2) or "x", {})
    assert calls == [1]


def test_plain_path_is_read_as_sqlite_file(tmp_path, monkeypatch):
    from slurm_energy.store.urls import resolve_store_url

    assert resolve_store_url("/tmp/jobs.db", "x", {}).url == "sqlite:////tmp/jobs.db"
    assert resolve_store_url(None, "x", {"SLURM_ENERGY_STORE": "/srv/e/jobs.db"}).url == "sqlite:////srv/e/jobs.db"
    monkeypatch.chdir(tmp_path)
    assert resolve_store_url("./jobs.db", "x", {}).url == f"sqlite:///{tmp_path}/jobs.db"
    assert resolve_store_url("jobs.sqlite", "x", {}).url == f"sqlite:///{tmp_path}/jobs.sqlite"


@pytest.mark.parametrize("value", ["", "  "])
def test_empty_store_flag_is_refused(value):
    from slurm_energy.store.urls import resolve_store_url

    with pytest.raises(ValueError, match=r"--store .* is empty; give a store URL .* or leave --store out"):
        resolve_store_url(value, "sqlite:////cfg/jobs.db", {})


@pytest.mark.parametrize("url, expect", [
    ("postgress://se:secret@h/energy", "backend 'postgress' is not supported (did you mean 'postgresql'?); use "
                                       "sqlite:////abs/path/jobs.db or postgresql+psycopg://"),
    ("postgres://se@h/energy", "backend 'postgres' is not supported (did you mean 'postgresql'?)"),
    ("sqlite3:////x/jobs.db", "backend 'sqlite3' is not supported (did you mean 'sqlite'?)"),
    ("postgresql+pg9://h/energy", "PostgreSQL driver 'pg9' is not supported; write postgresql+psycopg://"),
    ("/tmp/jobs.db", "'/tmp/jobs.db' is a file path, not a URL; for a SQLite file write sqlite:////tmp/jobs.db"),
])
def test_typos_and_paths_in_a_url_name_the_fix(url, expect):
    msg = check_store_url(url)  # never raises (an unknown dialect used to raise NoSuchModuleError)
    assert msg is not None and expect in msg, msg
    assert "secret" not in msg


def test_one_precedence_function_used_by_every_command():
    import inspect

    from slurm_energy.cli import jobenergy, predict_cmd, reconcile_cmd, site, store_cmds

    # the commands' one way to the store URL is cli/site.py's store_url, and it is resolve_store_url
    assert "resolve_store_url" in inspect.getsource(site.store_url)
    for mod in (jobenergy, predict_cmd, store_cmds, reconcile_cmd):
        src = inspect.getsource(mod)
        assert mod.store_url is site.store_url and 'environ.get("SLURM_ENERGY_STORE")' not in src, mod.__name__
        assert "resolve_store_url" not in src, mod.__name__  # no second door around it


@pytest.mark.parametrize("url, shown", [
    ("postgresql+psycopg://postgres@127.0.0.1:55433/x", "postgresql+psycopg://postgres@127.0.0.1:55433/x"),
    ("postgresql+psycopg://u:pw@h:5/db", "postgresql+psycopg://u:***@h:5/db"),
    ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:pw@h", "postgresql://u:***@h"),
    ("postgresql://@h/db", "postgresql://@h/db"),
    ("postgresql://u@h/db?sslmode=require&application_name=x", "postgresql://u@h/db?sslmode=require&application_name=x"),
    ("postgresql+psycopg://u:pw@/db?host=/run/pg", "postgresql+psycopg://u:***@/db?host=/run/pg"),
    ("postgresql://u:@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),  # an unquoted @ in the password: all of it hidden
    ("sqlite:////a/b.db", "sqlite:////a/b.db"),
    ("postgresql://h/db", "postgresql://h/db"),
    ("not a url", "not a url"),
])
def test_shown_url_hides_the_password(url, shown):
    from slurm_energy.store.urls import shown_url

    assert shown_url(url) == shown
    assert "pw" not in shown_url(url) and "p%40ss" not in shown_url(url) and "ss@" not in shown_url(url)
