"""Job record store (SQLAlchemy 2: SQLite by default, PostgreSQL for clusters).

Public API: :func:`open_store`, :class:`Store` (``put``, ``get_job``, ``query``) and
:func:`check_store_url` (is a URL usable here, without connecting).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurm_energy.store.opening import open_store
    from slurm_energy.store.sqlstore import Store
    from slurm_energy.store.urls import check_store_url

__all__ = ["Store", "check_store_url", "open_store"]


def __getattr__(name: str) -> Any:
    """Lazy: importing ``slurm_energy.store.fast`` (the light read paths) must not import SQLAlchemy."""
    if name == "Store":
        from slurm_energy.store.sqlstore import Store

        return Store
    if name == "open_store":
        from slurm_energy.store.opening import open_store

        return open_store
    if name == "check_store_url":
        from slurm_energy.store.urls import check_store_url

        return check_store_url
    raise AttributeError(f"module 'slurm_energy.store' has no attribute {name!r}")
