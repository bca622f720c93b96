"""Read-only PostgreSQL queries through libpq and ctypes, for the store's light read paths.

``jobenergy`` and ``rollup`` (table/csv/json) must start faster than ``sacct -j`` answers: importing
psycopg costs ~0.1 s here (its type system, errors, logging), SQLAlchemy more; ctypes and libpq load
in ~10 ms. This module speaks to the same server with the same SQL and the same parameter types as
psycopg's server-side binding (``PQexecParams``: a Python float as float8, an int as the smallest of
int2/int4/int8, a str as ``unknown``), so plans and results are the ones the SQLAlchemy path gets.

The library is psycopg's own bundled libpq (``psycopg_binary.libs/libpq-*.so*`` next to the
installed package: the one the full path uses), else the system's ``libpq.so.5``. When neither
loads, :func:`connect` raises :class:`PgUnavailable` and the caller takes the SQLAlchemy path.

Values come back as text and are converted by type OID: bool, integers, float4/float8, numeric
(:class:`decimal.Decimal`, as psycopg), everything else str; SQL NULL is None.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from typing import Any, Optional, Sequence

#: libpq's CONNECTION_OK, PGRES_COMMAND_OK, PGRES_TUPLES_OK
_CONNECTION_OK, _COMMAND_OK, _TUPLES_OK = 0, 1, 2
#: PostgreSQL type OIDs of psycopg's parameter dumpers (int2, int4, int8, float8, bool, unknown)
_INT2, _INT4, _INT8, _FLOAT8, _BOOL, _UNKNOWN = 21, 23, 20, 701, 16, 0
_INTS, _FLOATS, _NUMERIC = frozenset((20, 21, 23, 26)), frozenset((700, 701)), 1700
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class PgError(Exception):
    """A query failed (the server's message), or libpq could not connect."""


class PgUnavailable(PgError):
    """No libpq could be loaded here."""


_lib: Optional[ctypes.CDLL] = None


def _candidates() -> list[str]:
    """psycopg_binary's bundled libpq under installed site dirs, then the system's soname."""
    out = []
    for d in sys.path:
        if not os.path.isabs(d) or not d.rstrip("/").endswith(("site-packages", "dist-packages")):
            continue  # never the working directory
        libs = os.path.join(d, "psycopg_binary.libs")
        try:
            out += sorted(os.path.join(libs, n) for n in os.listdir(libs) if n.startswith("libpq-") and ".so" in n)
        except OSError:
            pass
    return out + ["libpq.so.5"]


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, i, u, s = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_char_p
    for name, res, args in (
        ("PQconnectdbParams", p, [ctypes.POINTER(s), ctypes.POINTER(s), i]), ("PQstatus", i, [p]),
        ("PQerrorMessage", s, [p]), ("PQfinish", None, [p]),
        ("PQexecParams", p, [p, s, i, ctypes.POINTER(u), ctypes.POINTER(s), p, p, i]),
        ("PQresultStatus", i, [p]), ("PQresultErrorMessage", s, [p]), ("PQclear", None, [p]),
        ("PQntuples", i, [p]), ("PQnfields", i, [p]), ("PQftype", u, [p, i]),
        ("PQgetvalue", s, [p, i, i]), ("PQgetisnull", i, [p, i, i]),
    ):  # fmt: skip
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    return lib


#: PQgetvalue / PQgetisnull without argtypes (called once per cell: ctypes' argument conversion
#: tripled their cost), from a second handle on the same library
_cell: Optional[ctypes.CDLL] = None


def load() -> ctypes.CDLL:
    """libpq, loaded once (see the module docstring). Raises PgUnavailable."""
    global _lib, _cell
    if _lib is None:
        for path in _candidates():
            try:
                _lib = _declare(ctypes.CDLL(path))
                _cell = ctypes.CDLL(path)
                _cell.PQgetvalue.restype = ctypes.c_char_p
                _cell.PQgetisnull.restype = ctypes.c_int
                break
            except (OSError, AttributeError):
                _lib = None
                continue
        else:
            raise PgUnavailable("no libpq (psycopg_binary's or libpq.so.5) could be loaded")
    return _lib


def conninfo(url: str) -> Optional[str]:
    """The libpq connection URI of a store URL (``postgresql+psycopg://`` or ``postgresql://``,
    as :func:`slurm_energy.store.urls.effective_url` reads both), else None. libpq parses the rest
    (user, percent-encoded password, host, port, database, ``?sslmode=...`` parameters) as psycopg
    does when SQLAlchemy hands it the same parts."""
    for scheme in ("postgresql+psycopg://", "postgresql://"):
        if url.startswith(scheme):
            return "postgresql://" + url[len(scheme):]
    return None


def _oid_text(v: Any) -> tuple[int, Optional[bytes]]:
    """(type OID, text) of one parameter, as psycopg's default dumpers type it."""
    if v is None:
        return _UNKNOWN, None
    if isinstance(v, bool):
        return _BOOL, b"t" if v else b"f"
    if isinstance(v, int):
        oid = _INT2 if -(2**15) <= v < 2**15 else _INT4 if -(2**31) <= v < 2**31 else _INT8
        return oid, str(v).encode()
    if isinstance(v, float):
        return _FLOAT8, repr(v).encode()
    return _UNKNOWN, str(v).encode()


def _numeric(raw: bytes) -> Any:
    from decimal import Decimal

    return Decimal(raw.decode())


def _converter(oid: int):
    """The text -> Python function of a result column's type; for a non-text type, b"" (what
    libpq gives for NULL: a number, bool or numeric is never empty text) is None."""
    if oid in _FLOATS:
        return lambda raw: float(raw) if raw else None
    if oid in _INTS:
        return lambda raw: int(raw) if raw else None
    if oid == _BOOL:
        return lambda raw: (raw == b"t") if raw else None
    if oid == _NUMERIC:
        return lambda raw: _numeric(raw) if raw else None
    return None  # text: "" is a value or NULL (PQgetisnull tells)


class Connection:
    """One libpq connection; :meth:`execute` runs a statement with ``:name`` parameters."""

    def __init__(self, uri: str, options: str = ""):
        """Connect to ``uri`` (a libpq URI) with ``options`` (``-c name=value`` settings) and UTF-8.
        Raises PgUnavailable (no libpq) or PgError (cannot connect: libpq's message)."""
        lib = load()
        keys = [b"dbname", b"client_encoding"] + ([b"options"] if options else [])
        vals = [uri.encode(), b"UTF8"] + ([options.encode()] if options else [])
        karr = (ctypes.c_char_p * (len(keys) + 1))(*keys, None)
        varr = (ctypes.c_char_p * (len(vals) + 1))(*vals, None)
        self._lib, self._conn = lib, lib.PQconnectdbParams(karr, varr, 1)
        if not self._conn or lib.PQstatus(self._conn) != _CONNECTION_OK:
            msg = (lib.PQerrorMessage(self._conn) or b"out of memory").decode("utf-8", "replace").strip()
            self.close()
            raise PgError(msg)

    def execute(self, sql: str, params: Optional[dict] = None) -> list[tuple]:
        """Rows of one statement; ``:name`` in ``sql`` is bound from ``params`` as ``$n``.
        Raises PgError (the server's message), KeyError (a name missing from ``params``)."""
        names: list[str] = []
        index: dict[str, int] = {}

        def number(m: re.Match) -> str:
            if m.group(1) not in index:
                names.append(m.group(1))
                index[m.group(1)] = len(names)
            return f"${index[m.group(1)]}"

        text = _PARAM.sub(number, sql)
        typed = [_oid_text((params or {})[n]) for n in names]
        types = (ctypes.c_uint * len(typed))(*[t for t, _ in typed])
        values = (ctypes.c_char_p * len(typed))(*[v for _, v in typed])
        lib = self._lib
        res = lib.PQexecParams(self._conn, text.encode(), len(typed), types, values, None, None, 0)
        try:
            status = lib.PQresultStatus(res) if res else -1
            if status not in (_COMMAND_OK, _TUPLES_OK):
                err = lib.PQresultErrorMessage(res) if res else lib.PQerrorMessage(self._conn)
                raise PgError((err or b"query failed").decode("utf-8", "replace").strip())
            return self._rows(res)
        finally:
            if res:
                lib.PQclear(res)

    def _rows(self, res: int) -> list[tuple]:
        lib, cell = self._lib, _cell
        assert cell is not None  # loaded with _lib
        nf, get, isnull, handle = lib.PQnfields(res), cell.PQgetvalue, cell.PQgetisnull, ctypes.c_void_p(res)
        cols = [(j, _converter(lib.PQftype(res, j))) for j in range(nf)]
        out = []
        for r in range(lib.PQntuples(res)):
            row = []
            for j, conv in cols:
                raw = get(handle, r, j)
                if conv is not None:
                    row.append(conv(raw))
                elif raw:
                    row.append(raw.decode("utf-8"))
                else:  # libpq gives "" for NULL too
                    row.append(None if isnull(handle, r, j) else "")
            out.append(tuple(row))
        return out

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._conn:
            self._lib.PQfinish(self._conn)
            self._conn = None

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Sequence[Any]) -> None:
        self.close()
