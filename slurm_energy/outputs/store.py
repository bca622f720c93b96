"""The job store as an output: ``Store.put`` (upsert on cluster, job id, start time)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord

log = logging.getLogger("slurm_energy.outputs.store")


class StoreSink:
    """Put records into the store at ``url`` (``paths.store_url``); one connection per publish.

    Raises what :func:`slurm_energy.store.open_store` / ``Store.put`` raise (StoreError,
    StoreDbError after the put retries): a record that cannot be stored is not silently lost.
    """

    name = "store"
    keeps_errors = True

    def __init__(self, url: str):
        self.url = url

    def publish(self, record: JobRecord) -> list[str]:
        """Store ``record``; no notes (failures raise, see the class docstring)."""
        from slurm_energy.accounting.merge import merge_interim
        from slurm_energy.store import open_store

        st = open_store(self.url)
        try:
            st.put(record, merge_running=merge_interim)
        finally:
            st.close()
        log.info("job=%s stored: it=%s kWh facility=%s kWh co2e=%s kg status=%s", record.job_id, record.it_kwh,
                 record.facility_kwh, record.co2e_kg, record.status.value)
        return []
