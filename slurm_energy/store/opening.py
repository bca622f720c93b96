"""Opening the store: :func:`open_store` (URL checked, SQLite file created atomically, schema
migrated or, for a reader, checked) -> :class:`slurm_energy.store.sqlstore.Store`.

Split from :mod:`slurm_energy.store.sqlstore` (its length); ``sqlstore.open_store`` still works.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from slurm_energy.errors import StoreError, StoreUrlError
from slurm_energy.store import schema
from slurm_energy.store.fast import check_readable_sqlite
from slurm_energy.store.sqlstore import BUSY_TIMEOUT_S, Store
from slurm_energy.store.urls import check_store_url, effective_url


def _prepare_sqlite_file(url: sa.URL, readonly: bool) -> None:
    db = url.database
    if not db or db == ":memory:" or readonly:
        return
    p = Path(db)
    if not p.parent.exists():
        p.parent.mkdir(parents=True, mode=0o755)
    if not p.exists():
        _create_sqlite_store(p)


def keep_wal_files(db: str) -> None:
    """Make ``<db>-wal`` and ``<db>-shm`` exist (empty, 0644, owned by the store's owner) where
    they are missing: in WAL mode (readers never block the writer) SQLite's last connection removes
    both on close, and a read-only (``mode=ro``) connection of an ordinary user, who cannot create
    them in the root-owned directory, then fails ("attempt to write a readonly database"). With
    them present, empty, it reads (measured as ``nobody``, SQLite 3.40.1:
    ``tests/store/test_store_wal.py``). Missing means no connection is open: everything is in the
    main file, so an empty WAL loses nothing. Only the store's owner makes them (O_EXCL, no
    symlink followed). Never raises."""
    try:
        st = os.stat(db)
    except OSError:
        return
    if os.geteuid() not in (0, st.st_uid):
        return
    for suffix in ("-wal", "-shm"):
        try:
            fd = os.open(db + suffix, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         st.st_mode & 0o666)
        except OSError:  # present (a connection is open, or kept), or the directory is not ours
            continue
        try:
            os.fchmod(fd, st.st_mode & 0o666)  # the store's own read bits, whatever the umask
            if os.geteuid() == 0:
                os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:
            pass
        finally:
            os.close(fd)


#: Filesystems WAL must not be used on: SQLite's WAL index is shared memory, which works only among
#: processes of one host ("WAL does not work over a network filesystem", sqlite.org/wal.html).
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "9p",
              "fuse", "afs", "ocfs2", "gfs2")


def network_fs(path: str) -> str:
    """The type of the filesystem holding ``path`` when it is one of :data:`NETWORK_FS` (``fuse.*``
    included), else '' (local, or /proc/mounts unreadable)."""
    real = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        return ""
    return kind if kind.split(".")[0] in NETWORK_FS else ""


def _use_wal(engine: sa.Engine, db: str) -> None:
    """Switch the store to WAL (a persistent property of the file; once), then keep its files. Not
    on a network filesystem (:func:`network_fs`): there the store stays in rollback-journal mode
    (docs/STORE.md: use PostgreSQL for a store shared by hosts)."""
    if network_fs(db):
        return
    try:
        with engine.connect() as conn:
            if str(conn.exec_driver_sql("PRAGMA journal_mode").scalar()).lower() != "wal":
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    except sa.exc.OperationalError:  # a rollback-mode reader holds the file now: the next writer switches
        pass
    keep_wal_files(db)


def _create_sqlite_store(p: Path) -> None:
    """Create the store file ``p`` with its schema under a temporary name in the same directory,
    then hard-link it into place, so that a reader (``jobenergy``, ``collect``) never sees an empty
    or half-made store while the first job's finalizer creates it. The mode is exact: root writes,
    everyone reads (see the module docstring). Two processes creating it at once: the first link
    wins, the other's file is dropped. Raises OSError (directory not writable) or SQLAlchemy's
    errors from the migration."""
    tmp = p.with_name(f".{p.name}.{os.getpid()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.close(fd)
    try:
        os.chmod(tmp, 0o644)
        engine = sa.create_engine(f"sqlite:///{tmp}")
        try:
            schema.migrate(engine)
        finally:
            engine.dispose()
        try:
            os.link(tmp, p)
        except FileExistsError:
            pass  # another process's store is in place: use it
    finally:
        for f in (tmp, tmp.with_name(tmp.name + "-journal")):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


def open_store(url: str, *, readonly: bool = False, migrate: bool = True,
               busy_timeout_s: float = BUSY_TIMEOUT_S) -> Store:
    """Open (and create or migrate) the store at a SQLAlchemy URL.

    Args:
        url: ``sqlite:////var/spool/slurm-energy/store.db`` (default site layout; the file is created
            0644) or ``postgresql+psycopg://user:pw@host:5432/db``.
        readonly: open for reading only (jobenergy, rollup; also as root): SQLite is opened with
            ``mode=ro`` (a missing or empty file is an error, never a new database), PostgreSQL
            sessions with ``default_transaction_read_only=on``; no migration is attempted, and
            :meth:`Store.put` raises PermissionError.
        migrate: apply missing schema migrations (see :mod:`slurm_energy.store.schema`).
        busy_timeout_s: SQLite only: how long a statement waits for another connection's lock, s.

    Returns:
        A :class:`Store`.

    Raises:
        ValueError: :func:`slurm_energy.store.urls.check_store_url`'s message: the URL cannot be
            parsed, its backend or driver is unsupported or not installed, or a SQLite path is relative.
        RuntimeError: the schema is newer than this code; a read-only store is missing, empty, not
            a database, unreachable or has no schema (the message names it).
    """
    problem = check_store_url(url)
    if problem:
        raise StoreUrlError(problem)
    u = effective_url(sa.make_url(url))
    backend = u.get_backend_name()
    if backend == "sqlite":
        _prepare_sqlite_file(u, readonly)
        if readonly and u.database and u.database != ":memory:":
            check_readable_sqlite(u.database)
            engine = sa.create_engine(
                f"sqlite:///file:{u.database}?mode=ro&uri=true", connect_args={"timeout": busy_timeout_s}
            )
        else:
            engine = sa.create_engine(u, connect_args={"timeout": busy_timeout_s})
    else:  # postgresql+psycopg (check_store_url allows nothing else)
        args = {"options": "-c default_transaction_read_only=on"} if readonly else {}
        engine = sa.create_engine(u, pool_pre_ping=True, connect_args=args)
    if readonly or not migrate:
        shown = u.render_as_string(hide_password=True)
        try:
            with engine.connect() as conn:
                v = schema.current_version(conn)
        except sa.exc.DatabaseError as e:  # "file is not a database", server down: name the store
            raise StoreError(f"store {shown} cannot be read: {str(e.orig or e).splitlines()[0]}; "
                               "check paths.store_url (or --store / $SLURM_ENERGY_STORE)") from None
        if v == 0:
            raise StoreError(f"store {shown} has no slurm-energy schema (no job recorded yet, or not a "
                               "slurm-energy store); check paths.store_url (or --store / $SLURM_ENERGY_STORE)")
        if v > schema.SCHEMA_VERSION:
            raise StoreError(f"store schema version {v} is newer than this slurm-energy ({schema.SCHEMA_VERSION})")
        if v < schema.SCHEMA_VERSION and readonly:
            raise StoreError(f"store {shown} has schema version {v}, older than this slurm-energy's "
                             f"({schema.SCHEMA_VERSION}); a reader does not migrate it: run `slurm-energy collect` "
                             "as root once (or wait for the next job's finalizer), which migrates it in place")
    else:
        schema.migrate(engine)
    db = u.database
    if backend == "sqlite" and not readonly and db and db != ":memory:":
        _use_wal(engine, db)
        return Store(engine, readonly=readonly, on_close=lambda: keep_wal_files(db))
    return Store(engine, readonly=readonly)
