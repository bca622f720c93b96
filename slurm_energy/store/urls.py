"""Which store URLs work here: checked up front (``check-config``), not at the first job's finalizer.

Supported (docs/STORE.md):

* ``sqlite:////abs/path/jobs.db`` -- an absolute path (the hooks run with cwd ``/`` or the spool,
  so a relative path would put the store somewhere different for every process);
* ``postgresql+psycopg://user:password@host:port/db`` -- psycopg 3, the driver we ship
  (``psycopg[binary]`` in pyproject.toml). A plain ``postgresql://`` URL is read as
  ``postgresql+psycopg://`` (:func:`effective_url`) and accepted only when psycopg imports.

Which URL is in force (:func:`resolve_store_url`, the one place the precedence is written):
``--store``, else ``$SLURM_ENERGY_STORE``, else the site config's ``paths.store_url``. On the
command line and in the environment a plain file path (``/tmp/jobs.db``, ``./jobs.db``) is read as
that SQLite file (``sqlite:////tmp/jobs.db``); in ``paths.store_url`` it is an error naming that
URL (the hooks need one absolute, unambiguous spelling).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from slurm_energy.errors import StoreUrlError

FIX = "use sqlite:////abs/path/jobs.db or postgresql+psycopg://user:password@host:port/dbname"
#: Environment variable naming the store (between ``--store`` and ``paths.store_url``).
ENV_STORE = "SLURM_ENERGY_STORE"
#: Dialects (the part before ``://`` and ``+driver``) a store URL may name.
KNOWN_DIALECTS = ("sqlite", "postgresql")
_PATH_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: ``--store``'s help, the same in every command that reads the store.
STORE_HELP = "store URL, or a SQLite file path (default: $SLURM_ENERGY_STORE, else site config paths.store_url)"


#: ``scheme://[user[:password]@]rest``
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.S)


def shown_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (as typed when it is not a URL at all)."""
    m = _URL.match(url)
    if not m:
        return url
    authority, tail = re.match(r"([^/?#]*)(.*)", m[2], re.S).groups()  # type: ignore[union-attr]
    auth, at, host = authority.rpartition("@")
    user, colon, _ = auth.partition(":")
    return f"{m[1]}://{user}:***@{host}{tail}" if at and colon else url


def looks_like_path(text: str) -> bool:
    """True for a plain file path given where a URL was expected (no ``://``; starts with ``/``,
    ``~``, ``./`` or ``../``, or ends with .db / .sqlite / .sqlite3)."""
    t = text.strip()
    return "://" not in t and (t.startswith(("/", "~", "./", "../")) or t.endswith(_PATH_SUFFIXES))


def path_as_url(path: str) -> str:
    """A SQLite file path as its store URL: ``/tmp/jobs.db`` -> ``sqlite:////tmp/jobs.db``
    (``~`` expanded; a relative path is taken from the current directory)."""
    return "sqlite:///" + os.path.abspath(os.path.expanduser(path.strip()))


class StoreUrl(NamedTuple):
    """The store URL in force and where it came from (``--store``, ``$SLURM_ENERGY_STORE``,
    ``paths.store_url``), for messages."""

    url: str
    source: str


def resolve_store_url(cli_value: str | None, config_url: str | Callable[[], str],
                      environ: Mapping[str, str] | None = None) -> StoreUrl:
    """The store URL in force: ``--store`` (``cli_value``), else ``$SLURM_ENERGY_STORE``, else the
    site config's ``paths.store_url`` (``config_url``: the URL, or a function returning it, called
    only when needed so a command with ``--store`` never reads the site config).

    A plain file path from ``--store`` or the environment becomes ``sqlite:///<absolute path>``
    (:func:`path_as_url`). An empty ``$SLURM_ENERGY_STORE`` counts as unset (shell habit); an empty
    ``--store`` is refused. Nothing is checked or opened: :func:`check_store_url` / ``open_store`` do that.

    Raises:
        StoreUrlError (a ValueError): ``cli_value`` is given but empty or blank.
    """
    env = os.environ if environ is None else environ
    if cli_value is not None:
        if not cli_value.strip():
            raise StoreUrlError(f"--store {cli_value!r} is empty; give a store URL (sqlite:////abs/path/jobs.db, "
                                "postgresql+psycopg://user:password@host:port/dbname) or a SQLite file "
                                f"path, or leave --store out to use ${ENV_STORE}, else the site config's "
                                "paths.store_url")
        return StoreUrl(_from_user(cli_value), "--store")
    if env.get(ENV_STORE, "").strip():
        return StoreUrl(_from_user(env[ENV_STORE]), f"${ENV_STORE}")
    return StoreUrl(config_url() if callable(config_url) else config_url, "paths.store_url")


def _from_user(text: str) -> str:
    return path_as_url(text) if looks_like_path(text) else text.strip()


def _dialect_hint(dialect: str) -> str:
    """`` (did you mean 'postgresql'?)`` for a near miss (typo, the old ``postgres`` alias), then
    the two URL forms that work (:data:`FIX`)."""
    import difflib

    close = difflib.get_close_matches(dialect.lower(), KNOWN_DIALECTS + ("postgres",), n=1, cutoff=0.6)
    guess = {"postgres": "postgresql"}.get(close[0], close[0]) if close else ""
    return (f" (did you mean {guess!r}?)" if guess and guess != dialect else "") + f"; {FIX}"


def check_store_url(url) -> str | None:
    """Say whether ``url`` can be a store here, without connecting or creating anything.

    Args:
        url: a store URL (``paths.store_url``, ``--store``, ``$SLURM_ENERGY_STORE``).

    Returns:
        None when the URL is supported and its driver is installed; otherwise one line naming the
        URL (password hidden), what is wrong, and the fix. Raises nothing.
    """
    shown = shown_url(str(url)) if url is not None else "None"
    if not isinstance(url, str) or not url.strip():
        return f"store URL {shown!r} is empty or not a string; {FIX}"
    if looks_like_path(url):
        return (f"store URL {shown!r} is a file path, not a URL; for a SQLite file write "
                f"{path_as_url(url) if url.strip().startswith('/') else 'sqlite:////abs/path/jobs.db'} "
                "(sqlite:/// then the absolute path)")
    m = _URL.match(url.strip())
    if not m:
        return f"store URL {shown!r} cannot be parsed (not scheme://...); {FIX}"
    backend, _, driver = m[1].partition("+")
    if backend not in KNOWN_DIALECTS:
        return f"store URL {shown!r}: backend {backend!r} is not supported{_dialect_hint(backend)}"
    if backend == "sqlite":
        return _sqlite_problem(m[2], driver, shown)
    if driver not in ("", "psycopg"):
        return (f"store URL {shown!r}: PostgreSQL driver {driver!r} is not supported; "
                f"write postgresql+psycopg://... (psycopg 3, installed with slurm-energy)")
    try:
        import psycopg  # noqa: F401
    except ImportError as e:
        return (f"store URL {shown!r} needs the psycopg (3) driver, which is not installed here "
                f"({e}); install it into slurm-energy's Python: pip install 'psycopg[binary]'")
    if not m[2].partition("?")[0].rpartition("@")[2].partition("/")[2]:
        return f"store URL {shown!r} names no database; write postgresql+psycopg://user:password@host:port/dbname"
    return None


def _sqlite_problem(rest: str, driver: str, shown: str) -> str | None:
    """:func:`check_store_url` for a ``sqlite`` URL (``rest``: after ``://``): an absolute file path,
    the stdlib driver, no query string."""
    db = rest[1:] if rest.startswith("/") else ""
    if not db or db == ":memory:" or db.startswith("file:"):
        return f"store URL {shown!r} names no database file; {FIX} (four slashes before an absolute path)"
    if not db.startswith("/"):
        return (f"store URL {shown!r}: SQLite path {db!r} is relative (every hook process would find "
                f"another file); write sqlite:////abs/path/jobs.db (four slashes)")
    if driver not in ("", "pysqlite") or "?" in db:
        return f"store URL {shown!r}: write sqlite:///{db.partition('?')[0]} (no driver, no query string)"
    return None
