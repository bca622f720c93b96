"""The site's outputs, built from its config: one registry (after CEEMS' ``RegisterCollector``).

:data:`OUTPUTS` maps each output's name to its factory ``(cfg, running, umask) -> Sink | None``
(None: off in the config, or not for this kind of record). Adding an output is one class (a
:class:`~slurm_energy.outputs.base.Sink`), its settings under ``outputs.<name>`` in the site
config, and one entry here. Every entry point publishes with :func:`site_sinks`: the finalizer,
the sampler's interim flush, ``slurm-energy collect`` (every path) and ``mail``'s note.

Order is publishing order: the store first (the record exists whatever an output does; a store
that is down queues it for ``collect`` where a queue is given), the report as the job's user
(final records only), then Prometheus' textfile and Slurm's write-back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from slurm_energy.outputs.base import publish

if TYPE_CHECKING:
    from slurm_energy.config import SiteConfig
    from slurm_energy.model import JobRecord
    from slurm_energy.outputs.base import Sink

log = logging.getLogger("slurm_energy.outputs")


class QueueingStoreSink:
    """The store at ``url``; a store that is down or still locked after ``Store.put``'s retries gets
    the record queued durably (:mod:`slurm_energy.store.queue`) in the first writable of
    ``queue_in`` (the spools) for ``slurm-energy collect``; raises only when it cannot even be queued."""

    name = "store"
    keeps_errors = True

    def __init__(self, url: str, queue_in: Sequence[str]):
        from slurm_energy.outputs.store import StoreSink

        self.store, self.queue_in = StoreSink(url), list(queue_in)

    def publish(self, record: JobRecord) -> list[str]:
        """Store (or queue) ``record``; no notes."""
        try:
            return self.store.publish(record)
        except Exception as e:
            from slurm_energy.store.queue import queue_record

            why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            path = queue_record(self.queue_in, record, why)
            log.error("job=%s: store failed (%s); queued as %s for collect", record.job_id, e, path)
            if path is None:
                raise
            return []


def _store(cfg: SiteConfig, running: bool, umask: int | None, queue_in: Sequence[str]) -> Sink:
    from slurm_energy.outputs.store import StoreSink

    if running:  # an interim view is never queued (the next one replaces it); the store kept open
        return StoreSink(cfg.paths.store_url, keep_open=True)
    if not queue_in:
        return StoreSink(cfg.paths.store_url)
    return QueueingStoreSink(cfg.paths.store_url, queue_in)


def _report(cfg: SiteConfig, running: bool, umask: int | None, queue_in: Sequence[str]) -> Sink | None:
    from slurm_energy.outputs.report import ReportSink

    def hourly_ci(rec):  # the report's what-if: the hourly intensity imported for the job's zone
        from slurm_energy.config.carbon import hourly_intensity_for

        return hourly_intensity_for(cfg, rec.carbon)

    return None if running else ReportSink(umask=umask, hourly_ci=hourly_ci)


def _prometheus(cfg: SiteConfig, running: bool, umask: int | None, queue_in: Sequence[str]) -> Sink | None:
    from slurm_energy.outputs import prometheus

    return prometheus.from_config(cfg)


def _slurm(cfg: SiteConfig, running: bool, umask: int | None, queue_in: Sequence[str]) -> Sink | None:
    from slurm_energy.outputs import slurm_writeback

    return None if running else slurm_writeback.from_config(cfg)


#: name -> factory ``(cfg, running, umask, queue_in) -> Sink | None``, in publishing order.
OUTPUTS: dict[str, Callable[..., Sink | None]] = {
    "store": _store, "report": _report, "prometheus": _prometheus, "slurm": _slurm}


def site_sinks(cfg: SiteConfig, *, running: bool = False, umask: int | None = None, queue_in: Sequence[str] = (),
               only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[Sink]:
    """The site's sinks for a record (:data:`OUTPUTS`, those named in ``only`` if given, less
    ``skip``): ``running`` for a running job's interim record (no report, no write-back);
    ``umask`` the job user's, for the report; ``queue_in`` the spools where a final record the
    store refuses is queued (empty: the store's error is raised). An output whose configuration
    cannot be turned into a sink is logged and left out (the record is never lost over it)."""
    sinks: list[Sink] = []
    for name, factory in OUTPUTS.items():
        if (only and name not in only) or name in skip:
            continue
        try:
            sink = factory(cfg, running, umask, queue_in)
        except Exception:
            log.exception("output %s not configured", name)
            continue
        if sink is not None:
            sinks.append(sink)
    return sinks


def publish_final(cfg: SiteConfig, final: JobRecord, *, umask: int | None = None, queue_in: Sequence[str] = (),
                  deferred: list | None = None, outputs: bool = True) -> JobRecord:
    """Publish a finished job to every site sink: the store first, then the report as the job's
    user (``umask``: theirs; into ``deferred`` when given, for the caller to write once its
    finalizer slot is free), then (``outputs``) the site's other outputs (:func:`publish_outputs`).
    What did not reach an output is a note on the stored record. Returns ``final``."""
    store = site_sinks(cfg, queue_in=queue_in, only=("store",))
    publish(final, store)

    def report() -> None:
        publish(final, site_sinks(cfg, umask=umask, only=("report",)), kept_by=store)

    if deferred is not None:
        deferred.append(report)
    else:
        report()
    if outputs:
        publish_outputs(cfg, final, queue_in=queue_in)
    return final


def publish_outputs(cfg: SiteConfig, final: JobRecord, *, queue_in: Sequence[str] = ()) -> None:
    """Publish a stored final record to the site's outputs besides the store and the report; their
    notes go onto the stored record (stored again)."""
    publish(final, site_sinks(cfg, skip=("store", "report")), kept_by=site_sinks(cfg, queue_in=queue_in, only=("store",)))


def forget_running(cfg: SiteConfig, rec: JobRecord) -> None:
    """Drop this node's exported running entry of ``rec``'s job (the node that completes the job
    exports its totals). Never raises."""
    try:
        from slurm_energy.outputs import prometheus

        sink = prometheus.from_config(cfg)
        if sink is not None:
            for n in sink.forget(rec.cluster, rec.job_id, rec.restart_count):
                log.warning("job=%s %s", rec.job_id, n)
    except Exception:
        log.exception("prometheus forget job %s", rec.job_id)
