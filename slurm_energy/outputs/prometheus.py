"""Prometheus output: a node_exporter textfile-collector file with the jobs' energy on this node.

Each node keeps one file, ``<textfile_dir>/slurm_energy.prom`` (default dir
``/var/lib/prometheus/node-exporter``, Debian's ``prometheus-node-exporter`` textfile directory),
rewritten whole (temp file + ``rename``, as the textfile collector requires) from a small root-only
state directory ``<spool_dir>/prometheus/`` with one JSON entry per job attempt:

* a running job: its energy on *this node* so far (the sampler's interim record, every
  ``sampling.interim_s``; never on the Prolog/Epilog path);
* a finished job: its final merged totals, written by the node whose finalizer completed the job
  (the other nodes drop their running entry), kept for ``outputs.prometheus.keep_finished_s``
  (default 3600 s) after the job's end, then dropped: bounded cardinality (at most ``max_jobs``).

So ``sum by (cluster, job_id) (slurm_energy_job_joules_total)`` is a job's IT energy at any time.

The node sampler publishes the running records of all the node's changed jobs in one flush inside
:func:`one_rewrite`: each job's entry is written, the textfile once at the end (a flush of N jobs
costs N entries and one rewrite, not N rewrites of every entry).

Series (counters follow Prometheus' naming: base unit, ``_total`` suffix)::

    slurm_energy_job_joules_total{cluster,job_id,restart_count,user,account,partition,device_class,method}
        (device_class "rest_of_node": the job's share of the node meter beyond its components,
        method "node_meter:<source>" or "estimate:site_w"; absent where not metered)
        the job's share of IT energy of one device class, J (an unmeasured class has no series,
        never 0; ``method`` says counter / power_integration / tdp_estimate)
    slurm_energy_job_facility_joules_total{cluster,job_id,restart_count,user,account,partition}  IT x PUE, J
    slurm_energy_job_co2e_grams_total{cluster,job_id,restart_count,user,account,partition}       gCO2e
        location-based: facility energy x grid CI, offsets excluded
    slurm_energy_job_co2e_net_grams_total{...same}      net of the datacenter's offset factor alpha
        (x alpha; only for a job whose alpha is not 1)
    slurm_energy_job_embodied_co2e_grams_total{...same} embodied CO2e of the hardware reserved (SCI's
        M = TE x TS/EL x RS; no series = no factor)
    slurm_energy_job_cost_total{...same,currency}       energy cost, facility kWh x the tariff's price
    slurm_energy_job_gpu_idle_seconds_total{cluster,job_id,restart_count,user,account,partition}
        GPU-seconds the job's GPUs were allocated but idle (accounting.idle_gpu; no series = no GPU judged)
    slurm_energy_job_gpu_idle_joules_total{cluster,job_id,restart_count,user,account,partition,method}
        the job's GPU energy in those seconds, J: measured energy in an idle state when ``method`` is
        counter / power_integration, an estimate when tdp_estimate
    slurm_energy_job_info{cluster,job_id,restart_count,sluid,array_job_id,array_task_id,het_job_id,
                          het_job_offset,job_name,status,coverage} 1

Every series is one job *attempt* (one entry): ``job_id`` is Slurm's raw job id, unique per array
task and per het component (each has its own), and ``restart_count`` (SLURM_JOB_RESTART_COUNT)
tells a requeued job's attempts apart, so a new attempt on a node that still exports the previous
attempt's final totals adds series instead of repeating them (the text format allows one sample
per name and label set; node_exporter's registry rejects the whole file otherwise). A reused job id
(same cluster, job id and restart count) replaces the older run's entry.
``sum by (cluster, job_id) (...)`` is then the job's energy over all its attempts.

Text format by ``prometheus_client.generate_latest`` (no hand formatting).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from slurm_energy.fileio import atomic_write
from slurm_energy.model import JobRecord, Method, Status
from slurm_energy.units import J_PER_KWH

log = logging.getLogger("slurm_energy.outputs.prometheus")

FILE_NAME = "slurm_energy.prom"
JOB_LABELS = ("cluster", "job_id", "restart_count", "user", "account", "partition")
#: the info series' labels: its identity (JOB_LABELS' first three), then the entry's ``info``
INFO_LABELS = ("cluster", "job_id", "restart_count", "sluid", "array_job_id", "array_task_id", "het_job_id",
               "het_job_offset", "job_name", "status", "coverage")


def entry_from_record(rec: JobRecord, now: float) -> dict:
    """The JSON state entry for ``rec`` (running: this node's energy so far; else final totals).

    Keys: labels (JOB_LABELS), info (INFO_LABELS less cluster/job_id/restart_count), classes {class: [J, method]}
    with unmeasured classes left out, facility_j, co2e_g (None when not computed), running (bool),
    end_time (epoch s), updated (epoch s). Only copies numbers the accounting computed.
    """
    classes = {c: [j, Method(rec.methods.get(c, Method.UNAVAILABLE)).value]
               for c, j in sorted(rec.energy_it_j.items()) if j is not None}
    if rec.rest_of_node_j is not None:  # part of IT energy: device_class rest_of_node, method node_meter:<source>
        classes["rest_of_node"] = [rec.rest_of_node_j, rec.rest_of_node_method]
    info = {
        "sluid": str(getattr(rec, "sluid", "") or ""), "array_job_id": rec.array_job_id or "",
        "array_task_id": rec.array_task_id or "", "het_job_id": rec.het_job_id or "",
        "het_job_offset": rec.het_job_offset or "", "job_name": rec.job_name[:64],
        "status": rec.status.value,
        "coverage": "complete" if rec.coverage_complete else "partial",
    }
    return {
        "labels": {k: str(getattr(rec, k) or ("0" if k == "restart_count" else "")) for k in JOB_LABELS},
        "info": info, "classes": classes,
        "facility_j": None if rec.facility_kwh is None else rec.facility_kwh * J_PER_KWH,
        "co2e_g": None if rec.co2e_gross_kg is None else rec.co2e_gross_kg * 1000.0,  # location-based
        "co2e_net_g": None if rec.co2e_kg is None or rec.carbon.alpha == 1 else rec.co2e_kg * 1000.0,
        "embodied_g": None if rec.embodied_kg is None else rec.embodied_kg * 1000.0,
        "cost": None if rec.cost is None else [rec.cost, rec.cost_currency],
        "running": rec.status == Status.RUNNING, "end_time": rec.end_time, "updated": now,
        "gpu_idle": None if rec.gpu_idle_s is None else [rec.gpu_idle_s, rec.gpu_idle_energy_j, rec.gpu_idle_method],
    }


class _Entries:
    """prometheus_client collector over state entries (see :func:`entry_from_record`)."""

    def __init__(self, entries: list[dict]):
        self.entries = entries

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, InfoMetricFamily

        j = CounterMetricFamily("slurm_energy_job_joules", "Job's share of IT energy by device class, J "
                                "(method: counter, power_integration or tdp_estimate; unmeasured: no series)",
                                labels=[*JOB_LABELS, "device_class", "method"])
        fac = CounterMetricFamily("slurm_energy_job_facility_joules", "Job's facility energy (IT x PUE), J",
                                  labels=list(JOB_LABELS))
        co2 = CounterMetricFamily("slurm_energy_job_co2e_grams", "Job's operational emissions, location-based "
                                  "(facility energy x grid CI, offsets excluded), gCO2e", labels=list(JOB_LABELS))
        net = CounterMetricFamily("slurm_energy_job_co2e_net_grams", "Job's operational emissions net of the "
                                  "datacenter's offset factor alpha (location-based x alpha), gCO2e", labels=list(JOB_LABELS))
        emb = CounterMetricFamily("slurm_energy_job_embodied_co2e_grams", "Embodied emissions of the hardware "
                                  "reserved for the job (SCI M = TE x TS/EL x RS), gCO2e", labels=list(JOB_LABELS))
        cost = CounterMetricFamily("slurm_energy_job_cost", "Job's energy cost (facility kWh x the tariff's price), "
                                   "in the currency label's unit", labels=[*JOB_LABELS, "currency"])
        idle_s = CounterMetricFamily("slurm_energy_job_gpu_idle_seconds", "GPU-seconds the job's GPUs were "
                                     "allocated but idle (utilisation 0, power at idle draw)", labels=list(JOB_LABELS))
        idle_j = CounterMetricFamily("slurm_energy_job_gpu_idle_joules", "Job's GPU energy while allocated but idle, J "
                                     "(method counter/power_integration: measured in an idle state; tdp_estimate: "
                                     "estimated)", labels=[*JOB_LABELS, "method"])
        info = InfoMetricFamily("slurm_energy_job", "Job identity (SLUID, array and het job ids) and status",
                                labels=list(INFO_LABELS[:3]))
        for e in self.entries:
            lbl = _labels(e)
            lv = [lbl[k] for k in JOB_LABELS]
            for cls, (joules, method) in e["classes"].items():
                j.add_metric([*lv, cls, method], joules)
            if e.get("facility_j") is not None:
                fac.add_metric(lv, e["facility_j"])
            if e.get("co2e_g") is not None:
                co2.add_metric(lv, e["co2e_g"])
            if e.get("co2e_net_g") is not None:
                net.add_metric(lv, e["co2e_net_g"])
            if e.get("embodied_g") is not None:
                emb.add_metric(lv, e["embodied_g"])
            if e.get("cost"):
                cost.add_metric([*lv, e["cost"][1]], e["cost"][0])
            idle = e.get("gpu_idle")
            if idle:
                idle_s.add_metric(lv, idle[0])
                if idle[1] is not None:
                    idle_j.add_metric([*lv, idle[2]], idle[1])
            info.add_metric([lbl[k] for k in INFO_LABELS[:3]],
                            {k: v for k, v in e["info"].items() if k not in INFO_LABELS[:3]})
        yield from (j, fac, co2, net, emb, cost, idle_s, idle_j, info)


def _labels(entry: dict) -> dict:
    """An entry's JOB_LABELS; an entry written before ``restart_count`` was a label has it in ``info``."""
    lbl = dict(entry["labels"])
    lbl.setdefault("restart_count", str(entry.get("info", {}).get("restart_count", "0")))
    return lbl


def render(entries: list[dict]) -> bytes:
    """The textfile's content for ``entries`` (Prometheus text format 0.0.4, via prometheus_client)."""
    from prometheus_client import CollectorRegistry, generate_latest

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Entries(entries))  # type: ignore[arg-type]
    return generate_latest(reg)


#: inside :func:`one_rewrite`: one {(textfile dir, state dir): sink} whose rewrite waits for its end
_DEFERRED: list[dict[tuple[str, str], PrometheusTextfile]] = []


@contextmanager
def one_rewrite() -> Iterator[None]:
    """Publishes inside write their entries only; each textfile they touched is rewritten once,
    at the end (a failed rewrite is logged: the entries are kept for the next one)."""
    if _DEFERRED:  # nested: the outer one rewrites
        yield
        return
    _DEFERRED.append({})
    try:
        yield
    finally:
        for sink in _DEFERRED.pop().values():
            sink.rewrite()


class PrometheusTextfile:
    """Sink: ``publish(record) -> notes`` keeps this node's textfile current. Never raises.

    Args:
        textfile_dir: node_exporter's ``--collector.textfile.directory``.
        state_dir: root-only directory for the per-job entries (``<spool_dir>/prometheus``).
        keep_finished_s: how long a finished job stays exported after its end, s.
        max_jobs: hard cap on exported job attempts (oldest updated dropped first).
        stale_running_s: a running entry not refreshed for this long is dropped (its sampler died).
    """

    name = "prometheus"
    keeps_errors = False  # a note of what failed goes to the stored record instead

    def __init__(self, textfile_dir: str, state_dir: str, keep_finished_s: float = 3600.0, max_jobs: int = 2000,
                 stale_running_s: float = 3600.0, clock: Callable[[], float] = time.time):
        self.textfile_dir, self.state_dir = textfile_dir, state_dir
        self.keep_finished_s, self.max_jobs, self.stale_running_s = keep_finished_s, max_jobs, stale_running_s
        self.clock = clock

    @property
    def path(self) -> str:
        return os.path.join(self.textfile_dir, FILE_NAME)

    def _key(self, cluster: str, job_id: str, restart: int) -> str:
        return os.path.join(self.state_dir, f"{cluster or '-'}_{job_id}_{restart}.json".replace("/", "_"))

    def publish(self, rec: JobRecord) -> list[str]:
        """Add/replace ``rec``'s entry and rewrite the textfile. Returns notes for the record."""
        return self._update(rec.cluster, rec.job_id, rec.restart_count, entry_from_record(rec, self.clock()))

    def forget(self, cluster: str, job_id: str, restart: int) -> list[str]:
        """Drop this node's running entry of a job (another node exports its final totals)."""
        return self._update(cluster, job_id, restart, None)

    def _update(self, cluster: str, job_id: str, restart: int, entry: dict | None) -> list[str]:
        try:
            os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
            with open(os.path.join(self.state_dir, ".lock"), "a") as lk:
                fcntl.flock(lk, fcntl.LOCK_EX)  # samplers and finalizers of other jobs write too
                key = self._key(cluster, job_id, restart)
                if entry is None:
                    if os.path.exists(key):
                        os.unlink(key)
                else:
                    atomic_write(key, json.dumps(entry), mode=0o600, exclusive=True)
                if _DEFERRED:  # one_rewrite(): the textfile once, at its end
                    _DEFERRED[0][(self.textfile_dir, self.state_dir)] = self
                    return []
                entries = self._load_and_prune()
                return self._write_textfile(entries)
        except OSError as e:
            log.warning("prometheus state %s: %s", self.state_dir, e)
            return [f"prometheus: state dir {self.state_dir} not usable ({e.strerror or e}); "
                    "the job's energy is not exported to node_exporter (the record is kept)"]

    def rewrite(self) -> list[str]:
        """The textfile from the entries now (:func:`one_rewrite`'s end). Never raises."""
        try:
            with open(os.path.join(self.state_dir, ".lock"), "a") as lk:
                fcntl.flock(lk, fcntl.LOCK_EX)
                return self._write_textfile(self._load_and_prune())
        except OSError as e:
            log.warning("prometheus state %s: %s", self.state_dir, e)
            return [f"prometheus: state dir {self.state_dir} not usable ({e.strerror or e})"]

    def _load_and_prune(self) -> list[dict]:
        now, keep = self.clock(), []
        for name in os.listdir(self.state_dir):
            if not name.endswith(".json"):
                continue
            p = os.path.join(self.state_dir, name)
            try:
                with open(p, encoding="utf-8") as f:
                    e = json.load(f)
                old = (now - e["updated"] > self.stale_running_s) if e["running"] else \
                    (now - max(e["end_time"], 0.0) > self.keep_finished_s)
            except (OSError, ValueError, KeyError, TypeError):
                old, e = True, None  # an unreadable entry would only break the textfile
            if old:
                os.unlink(p)
            else:
                keep.append((e["updated"], p, e))
        keep.sort(key=lambda x: x[0], reverse=True)
        for _, p, _ in keep[self.max_jobs:]:
            os.unlink(p)
        return [e for _, _, e in keep[:self.max_jobs]]

    def _write_textfile(self, entries: list[dict]) -> list[str]:
        try:
            atomic_write(self.path, render(entries), mode=0o644, exclusive=True)  # node_exporter runs as its own user
        except OSError as e:
            log.warning("prometheus textfile %s: %s", self.path, e)
            return [f"prometheus: textfile dir {self.textfile_dir} not writable ({e.strerror or e}); fix "
                    "outputs.prometheus.textfile_dir or create it; the job's entry is kept and exported "
                    "at the next write"]
        return []


def from_config(cfg, node: str = "") -> PrometheusTextfile | None:
    """The sink for site config ``cfg`` (``outputs.prometheus``), or None when disabled."""
    pc = cfg.outputs.prometheus
    if not pc.enabled:
        return None
    return PrometheusTextfile(pc.textfile_dir, os.path.join(cfg.paths.spool_dir, "prometheus"),
                              keep_finished_s=pc.keep_finished_s, max_jobs=pc.max_jobs,
                              stale_running_s=max(pc.keep_finished_s, 10 * cfg.sampling.interim_s))
