"""Which store URLs work here: checked up front (``check-config``), not at the first job's finalizer.

Supported (docs/STORE.md):

* ``sqlite:////abs/path/jobs.db`` -- an absolute path (the hooks run with cwd ``/`` or the spool,
  so a relative path would put the store somewhere different for every process);
* ``postgresql+psycopg://user:password@host:port/db`` -- psycopg 3, the driver we ship
  (``psycopg[binary]`` in pyproject.toml). A plain ``postgresql://`` URL is read as
  ``postgresql+psycopg://`` (:func:`effective_url`) and accepted only when psycopg imports.
"""

from __future__ import annotations

from typing import Optional

import sqlalchemy as sa

FIX = "use sqlite:////abs/path/jobs.db or postgresql+psycopg://user:password@host:port/dbname"


def _shown(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL at all: shown as typed
        return url


def effective_url(u: sa.URL) -> sa.URL:
    """The URL open_store connects with: a plain ``postgresql://`` gets the psycopg (3) driver."""
    if u.get_backend_name() == "postgresql" and u.drivername == "postgresql":
        return u.set(drivername="postgresql+psycopg")
    return u


def check_store_url(url) -> Optional[str]:
    """Say whether ``url`` can be a store here, without connecting or creating anything.

    Args:
        url: a SQLAlchemy URL string (``paths.store_url``, ``--store``, ``$SLURM_ENERGY_STORE``).

    Returns:
        None when the URL is supported and its driver is installed; otherwise one line naming the
        URL (password hidden), what is wrong, and the fix. Raises nothing.
    """
    shown = _shown(str(url)) if url is not None else "None"
    if not isinstance(url, str) or not url.strip():
        return f"store URL {shown!r} is empty or not a string; {FIX}"
    try:
        u = sa.make_url(url)
    except Exception as e:  # sqlalchemy.exc.ArgumentError
        return f"store URL {shown!r} cannot be parsed ({e}); {FIX}"
    backend, driver = u.get_backend_name(), u.get_driver_name()
    if backend == "sqlite":
        db = u.database
        if not db or db == ":memory:" or db.startswith("file:"):
            return f"store URL {shown!r} names no database file; {FIX} (four slashes before an absolute path)"
        if not db.startswith("/"):
            return (f"store URL {shown!r}: SQLite path {db!r} is relative (every hook process would find "
                    f"another file); write sqlite:////abs/path/jobs.db (four slashes)")
        if driver != "pysqlite":
            return f"store URL {shown!r}: SQLite driver {driver!r} is not supported; write sqlite:///{db}"
        return None
    if backend == "postgresql":
        eff = effective_url(u)
        if eff.get_driver_name() != "psycopg":
            return (f"store URL {shown!r}: PostgreSQL driver {driver!r} is not supported; write "
                    f"postgresql+psycopg://... (psycopg 3, installed with slurm-energy)")
        try:
            eff.get_dialect().import_dbapi()
        except ImportError as e:
            return (f"store URL {shown!r} needs the psycopg (3) driver, which is not installed here "
                    f"({e}); install it into slurm-energy's Python: pip install 'psycopg[binary]'")
        if not u.database:
            return f"store URL {shown!r} names no database; write postgresql+psycopg://user:password@host:port/dbname"
        return None
    return f"store URL {shown!r}: backend {backend!r} is not supported; {FIX}"
