"""The job store as an output: ``Store.put`` (upsert on cluster, job id, start time)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord

log = logging.getLogger("slurm_energy.outputs.store")

_KEPT: dict[str, Any] = {}  # url -> Store kept open by StoreSink(keep_open=True)


class StoreSink:
    """Put records into the store at ``url`` (``paths.store_url``); one connection per publish, or,
    with ``keep_open`` (a running job's interim flushes, in the sampler's long-lived interim worker),
    one store kept open per URL for the process's life: opening it (engine, schema check) and
    closing it cost ~2/3 of a warm flush's CPU; a failed put closes and drops it (the next reopens).

    Raises what :func:`slurm_energy.store.open_store` / ``Store.put`` raise (StoreError,
    StoreDbError after the put retries): a record that cannot be stored is not silently lost.
    """

    name = "store"
    keeps_errors = True

    def __init__(self, url: str, keep_open: bool = False):
        self.url = url
        self.keep_open = keep_open

    def publish(self, record: JobRecord) -> list[str]:
        """Store ``record``; no notes (failures raise, see the class docstring)."""
        from slurm_energy.accounting.merge import merge_interim
        from slurm_energy.store import open_store

        if not self.keep_open:
            st = open_store(self.url)
            try:
                st.put(record, merge_running=merge_interim)
            finally:
                st.close()
        else:
            kept = _KEPT.get(self.url)
            if kept is None:
                kept = _KEPT[self.url] = open_store(self.url)
            try:
                kept.put(record, merge_running=merge_interim)
            except BaseException:
                _KEPT.pop(self.url, None)
                kept.close()
                raise
        log.info("job=%s stored: it=%s kWh facility=%s kWh co2e=%s kg status=%s", record.job_id, record.it_kwh,
                 record.facility_kwh, record.co2e_kg, record.status.value)
        return []
