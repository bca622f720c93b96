"""The one measurement flow, Slurm-free: readers -> sample file -> node record -> job record -> outputs.

Used by the Slurm hooks and their finalizer (:mod:`slurm_energy.slurm`), ``run``/``attach``,
``track()`` and anything embedding slurm-energy::

    readers, notes = open_readers(site, gpus)               # device information collector
    static = device_inventory(readers, notes)
    ... a Sampler (slurm_energy.sampling) writes the sample file ...
    rec = measure_node(NodeObservation(node, rows, static, t0, t1), meta, site)   # one node
    job = finalise_job([rec, ...], site)                    # merge nodes, carbon facts, totals
    publish(job, [StoreSink(url), ReportSink()])            # outputs

:class:`LocalMeasurement` does all of it for a process tree. ``site`` is a
:class:`slurm_energy.config.SiteConfig`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from slurm_energy.core import DeviceStatic, JobMeta, Sample, Status
from slurm_energy.outputs.base import publish as publish  # the pipeline's API: outputs own every write
from slurm_energy.sampling.local import LocalSampler, RunEnd
from slurm_energy.sampling.reading import device_inventory as device_inventory  # the pipeline's API
from slurm_energy.sampling.reading import open_readers as open_readers

if TYPE_CHECKING:
    from slurm_energy.accounting.phases import Marks
    from slurm_energy.accounting.running import RunningSummary
    from slurm_energy.config import SiteConfig
    from slurm_energy.model import JobRecord, NodeStatic
    from slurm_energy.sampling.sampletable import SampleTable


@dataclass
class NodeObservation:
    """What one node saw of one job: its sample file (:func:`~slurm_energy.sampling.samplefile.read_sample_table`,
    or ``read_sample_file``'s samples), :func:`device_inventory`'s dict, the job's span on the node
    (epoch s; ``span_known`` False when no Prolog ran), the CPUs allocated there, errors to record."""

    node: str
    samples: SampleTable | list[Sample]
    static: NodeStatic
    start_time: float
    end_time: float
    span_known: bool = True
    cpus_alloc: int | None = None
    errors: list[str] = field(default_factory=list)
    status: Status = Status.COMPLETE  # the node's
    marks: Marks | None = None  # the job's phase/stage/tag marks on this node (accounting.phases.parse_marks)
    job_cpu_total_s: float | None = None  # the job's true CPU time on the node (sacct TotalCPU), CPU-s
    # the node meter's rows over the span ((t, Reading), sampling.meterspool) and their source; None = none read
    meter_rows: list[Any] | None = None
    meter_source: str = ""
    meter_note: str = ""  # why there are no meter rows where the site configured a meter (the meter process's note)
    mem_alloc_bytes: float | None = None  # memory allocated to the job on the node (its share of the rest)
    gpus_node: int | None = None  # the node's GPUs (None = unknown): the rest is not metered where the job has fewer


def measure_node(obs: NodeObservation, meta: JobMeta, site: SiteConfig, *, expected_nodes: Sequence[str] = (),
                 exit_code: str = "", job_state: str = "", interval_s: float | None = None,
                 tags: dict[str, Any] | None = None, running: RunningSummary | None = None) -> JobRecord:
    """One node's :class:`~slurm_energy.model.JobRecord` (exactly one NodeSummary) from what it saw:
    energy per device by its readings' method, the job's share by the site's attribution policy
    (:func:`slurm_energy.accounting.summary.summarise_node`); totals and carbon are left to
    :func:`finalise_job`. ``interval_s`` defaults to the site's ``sampling.interval_s``, ``tags`` to
    the marks'; ``obs.errors`` are recorded each once; a finished node that measured nothing is
    ``no_data`` (:func:`slurm_energy.accounting.merge.node_status`). ``running``: while the job runs,
    the node's :class:`~slurm_energy.accounting.running.RunningSummary`, brought up to date by the
    caller (``obs.samples`` unused). Raises ValueError on an unknown attribution policy."""
    from slurm_energy.accounting.idle_gpu import rule_from
    from slurm_energy.accounting.merge import combine_errors, node_status
    from slurm_energy.accounting.summary import summarise_node
    from slurm_energy.model import JobRecord, NodeStatic, text_safe

    statics = [DeviceStatic(**d) for d in obs.static.get("devices", [])]
    summarise: Any = running.summary if running is not None else partial(summarise_node, obs.samples)
    summary = summarise(
        job_id=meta.job_id, node=obs.node, start_time=obs.start_time, end_time=obs.end_time,
        statics=statics, cpus_alloc=obs.cpus_alloc, policy=site.attribution.policy,
        interval_s=interval_s or site.sampling.interval_s, status=obs.status, errors=combine_errors(obs.errors),
        span_known=obs.span_known, marks=obs.marks, job_cpu_total_s=obs.job_cpu_total_s, gpu_idle=rule_from(site))
    node_meter = getattr(site, "node_meter", None)
    if running is None and node_meter is not None:  # the rest of the node: meter minus components (docs/NODE_METER.md)
        from slurm_energy.accounting.rest_of_node import rest_for_node
        from slurm_energy.sampling.sampletable import table_from

        summary.rest_of_node = rest_for_node(summary, table_from(obs.samples).sorted(), obs.meter_rows,
                                             obs.meter_source, node_meter, cpus_alloc=obs.cpus_alloc,
                                             mem_alloc_bytes=obs.mem_alloc_bytes, gpus_node=obs.gpus_node,
                                             note=obs.meter_note)
    summary.static = NodeStatic(**{k: v for k, v in obs.static.items() if k != "devices"})  # type: ignore[typeddict-item]
    summary.static["devices"] = obs.static.get("devices", [])
    # a finished node that measured nothing is no_data, never partial/complete, saying why when its
    # rows are why (no rows at all: the caller says why there are none)
    status = node_status(summary.status, summary)
    if status != summary.status:
        summary.status, n = status, summary.n_samples
        if n >= 2:
            summary.errors.append(f"nothing measured on this node: {n} sample rows, but every device is unavailable "
                                  "(no reader gave an energy or power it could be computed from; see the devices' flags)")
        elif n == 1:
            summary.errors.append("nothing measured on this node: 1 sample row, and a device's energy needs two "
                                  "readings within the job")
        elif not summary.errors:
            summary.errors.append("nothing measured on this node: no sample rows")
    return text_safe(JobRecord.from_meta(
        meta, exit_code=exit_code, job_state=job_state, expected_nodes=list(expected_nodes or [obs.node]),
        start_time=summary.start_time, end_time=summary.end_time, nodes=[summary], status=summary.status,
        errors=list(summary.errors), tags=dict(tags if tags is not None else (obs.marks.tags if obs.marks else {}))))


def finalise_job(node_records: Sequence[JobRecord], site: SiteConfig, *, merge: bool = True) -> JobRecord:
    """The job's record: node records merged (:func:`slurm_energy.accounting.merge.merge_records`:
    a node expected but absent makes it partial), the site's carbon facts (PUE, carbon intensity,
    alpha; hourly intensity when imported, a bad file noted in ``errors``) applied once, totals filled
    (:func:`slurm_energy.accounting.formulas.finalise_record`). ``merge=False`` (one record): a node's
    own view while the job runs (the interim flush), the other nodes not finished yet.
    Raises MergeError (a ValueError) for records of different jobs, ValueError for an empty list
    or for several records with ``merge=False``."""
    from slurm_energy.accounting.formulas import finalise_record
    from slurm_energy.accounting.merge import combine_errors, merge_records
    from slurm_energy.config.carbon import hourly_series_for, resolve_carbon
    from slurm_energy.model import text_safe

    if not node_records:
        raise ValueError("finalise_job: no node records; pass at least one measure_node() result")
    if not merge and len(node_records) != 1:
        raise ValueError(f"finalise_job: merge=False takes one record, got {len(node_records)}")
    merged = merge_records(list(node_records)) if merge else node_records[0]
    node = merged.nodes[0].node if merged.nodes else ""
    facts = resolve_carbon(site, merged.partition, node)
    hourly = marginal = None
    try:
        got = hourly_series_for(site, facts)
        if got is not None:
            hourly, label = got
            facts = facts.model_copy(update={"hourly_source": label})
    except Exception as e:  # a bad hourly file must not lose the job
        merged.errors = combine_errors(merged.errors, [f"hourly carbon intensity not used: {e}"])
    try:
        got = hourly_series_for(site, facts, "marginal")
        if got is not None:
            marginal, label = got
            facts = facts.model_copy(update={"marginal_source": label})
    except Exception as e:
        merged.errors = combine_errors(merged.errors, [f"hourly marginal intensity not used: {e}"])
    prices = None
    if site.tariff is not None and site.tariff.zone:
        from slurm_energy.carbon.prices import load_zone_prices

        try:
            prices = load_zone_prices(site.paths.hourly_price_dir, site.tariff.zone)
        except Exception as e:  # a bad price file must not lose the job: the flat price (if any) is used
            merged.errors = combine_errors(merged.errors, [f"hourly prices not used: {e}"])
    return text_safe(finalise_record(merged, facts, hourly, embodied=site.embodied.factors(), hourly_price=prices,
                                     marginal_ci=marginal, intensity=site.attribution.intensity,
                                     lifetimes={str(k): v for k, v in site.embodied.lifetime_years.items()}, tariff=site.tariff))


def local_site_config(path: str | None, given_by: str, partition: str = "", **carbon: Any) -> SiteConfig:
    """The site config at ``path`` (default ``$SLURM_ENERGY_CONFIG``, /etc/slurm-energy/site.yaml) for a
    measurement on this node outside Slurm, with the carbon facts given to ``run``/``attach``/``track()``
    (``country``, ``zone``, ``pue``, ``ci``, ``alpha``; None: not given) applied, labelled ``given_by``
    (:func:`slurm_energy.config.overrides.with_carbon_overrides`). Raises ConfigError naming the field."""
    import socket

    from slurm_energy.config import load_site_config
    from slurm_energy.config.overrides import with_carbon_overrides

    return with_carbon_overrides(load_site_config(path), given_by=given_by, partition=partition,
                                 node=socket.gethostname().split(".")[0],
                                 **{k: v for k, v in carbon.items() if v is not None})


class LocalMeasurement:
    """Measure a process tree on this node (``run``, ``attach``, ``track()``): a
    :class:`slurm_energy.sampling.local.LocalSampler` (started, stopped and cleaned up through
    :attr:`sampler`) and what the flow makes of its sample file: :meth:`record`, :meth:`report`,
    :meth:`marks`, :meth:`close`."""

    def __init__(self, sampler: LocalSampler):
        self.sampler = sampler
        self.report_paths: tuple[str, ...] = ()  # the HTML and CSV written by report()

    def record(self, marks: Marks | None = None, tags: dict[str, Any] | None = None,
               ended: RunEnd | None = None) -> JobRecord:
        """The finalised JobRecord: energy so far while sampling, final after the sampler's
        :meth:`~slurm_energy.sampling.local.LocalSampler.stop`, by :func:`measure_node` and
        :func:`finalise_job` (one node, not merged).

        ``marks``: :class:`slurm_energy.accounting.phases.Marks` of the job (phases, stages).
        ``ended``: how the run ended (:class:`slurm_energy.sampling.local.RunEnd`); one that did not
        end cleanly (an exception, a signal, a non-zero exit status) makes the record ``partial``
        with the reason in ``errors``, its ``exit_code`` and ``job_state`` set (FAILED, CANCELLED)."""
        import getpass  # here, not at import: the Prolog imports this module
        import socket

        from slurm_energy.sampling.samplefile import read_sample_table

        s = self.sampler
        running = s.running
        end = time.time() if running else s.t1
        node = socket.gethostname().split(".")[0]
        status = Status.RUNNING if running else Status.COMPLETE
        errors: list[str] = []
        if ended is not None and not ended.clean and not running:
            status, errors = Status.PARTIAL, [ended.error_text()]
        obs = NodeObservation(node, read_sample_table(s.samples), s.static, s.t0, end, cpus_alloc=os.cpu_count(),
                              status=status, marks=marks, errors=errors)
        meta = JobMeta(job_id=s.label, cluster=s.cfg.cluster_name, user=getpass.getuser(), uid=os.getuid(),
                       gid=os.getgid(), partition=s.partition, work_dir=s.work_dir)
        rec = measure_node(obs, meta, s.cfg, interval_s=s.interval_s, tags=dict(tags) if tags else None,
                           exit_code=ended.exit_code if ended is not None else "",
                           job_state=ended.job_state if ended is not None else "")
        return finalise_job([rec], s.cfg, merge=False)

    def report(self, rec: JobRecord, out: str, overwrite: bool, how_to_replace: str) -> list[str]:
        """Publish ``rec`` to ``energy-<job id>.html/.csv`` in ``out`` (the report sink, as this user);
        returns the problems (empty: written, :attr:`report_paths`), each also printed on stderr. An
        existing report of its label is never overwritten unless ``overwrite``: ``rec`` is relabelled
        ``<label>-2``, ``-3``... and stderr says so and names ``how_to_replace`` (``--overwrite``)."""
        from slurm_energy.outputs.report import ReportSink, free_label

        out = os.path.abspath(out)
        label = rec.job_id if overwrite else free_label(out, rec.job_id)
        if label != rec.job_id:
            print(f"slurm-energy: a report labelled {rec.job_id!r} exists in {out}; this one is labelled "
                  f"{label!r} ({how_to_replace} replaces it)", file=sys.stderr)
            rec.job_id = label
        sink = ReportSink(out, os.getuid(), os.getgid())
        problems = publish(rec, [sink])[sink.name]
        self.report_paths = () if problems else tuple(sink.written)
        for p in problems:
            print(f"slurm-energy: {p}", file=sys.stderr)
        return problems

    def close(self, keep: bool, note: str = "") -> None:
        """Remove the private sample directory, or (``keep``: the samples are the measurement's only
        copy) leave it and say where it is on stderr, with ``note``."""
        if keep:
            print(f"slurm-energy: samples kept in {self.sampler.samples}{note}", file=sys.stderr)
        else:
            self.sampler.cleanup()

    def marks(self) -> Marks:
        """The phase/stage/tag marks written beside the sample file (``marks.jsonl``: ``track()``'s
        own, or those of the ``track()`` calls inside ``slurm-energy run``'s command), parsed."""
        from slurm_energy.accounting.phases import parse_marks
        from slurm_energy.sampling.marks import read_marks_file

        lines, flags = read_marks_file(self.sampler.dir, "marks.jsonl")
        m = parse_marks(lines)
        m.flags = flags + m.flags
        return m

    @property
    def marks_path(self) -> str:
        """Where the marks of this measurement are appended."""
        return os.path.join(self.sampler.dir, "marks.jsonl")
