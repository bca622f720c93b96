"""Store fixtures for both backends: SQLite (always) and PostgreSQL (SLURM_ENERGY_TEST_PG_URL).

Start a server with ``scripts/postgres.sh start`` and export the URL it prints. Each test gets an
empty schema (tables dropped first), so tests run in any order against one test database.
"""

from __future__ import annotations

import os

import pytest

from slurm_energy.store import open_store
from slurm_energy.store.db import connect
from slurm_energy.store.schema import TABLES

PG_URL = os.environ.get("SLURM_ENERGY_TEST_PG_URL")
PG_SKIP = "SLURM_ENERGY_TEST_PG_URL not set: run `export SLURM_ENERGY_TEST_PG_URL=$(scripts/postgres.sh start)`"


def empty_pg(url: str) -> None:
    """Drop the store's tables from the PostgreSQL database at ``url``."""
    db = connect(url)
    for t in TABLES:
        db.execute(f"DROP TABLE IF EXISTS {t}")
    db.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/spool/store.db"
    if not PG_URL:
        pytest.skip(PG_SKIP)
    empty_pg(PG_URL)
    return PG_URL


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()
