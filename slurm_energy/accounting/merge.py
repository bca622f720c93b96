"""Multi-node merge (pure): each node's finalizer writes one JobRecord (one NodeSummary); they are
unioned here. Where the node records are kept, read under a lock and moved aside is the Slurm
glue's business (:mod:`slurm_energy.slurm.jobend.results`).

``restart_count`` (SLURM_JOB_RESTART_COUNT) separates the attempts of a requeued job, which share a
job id but are separate records (key cluster, job_id, start_time). A job id Slurm *reused* (state
reset, MaxJobId wrap) may find an older run's node records in the same directory: records are
grouped into runs (:func:`split_runs`: SLUID or Slurm's start time where Slurm gives them, else the
run's node list and overlapping time spans) and only one run is ever merged; once stored, its files
are moved to ``stored/<start>/`` (:func:`slurm_energy.slurm.jobend.results.retire_run`).

Energy is kept per (node, device): the merged record's ``nodes`` is the union of the node summaries,
keyed by node name. Nothing is multiplied by a node or task count and no totals are computed here;
:func:`slurm_energy.accounting.formulas.finalise_record` sums the devices once and applies PUE and
carbon intensity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from slurm_energy.accounting.trace import bound_traces
from slurm_energy.errors import MergeError
from slurm_energy.jobmeta import RunKey
from slurm_energy.jobmeta import same_run as same_run_key
from slurm_energy.model import JobRecord, NodeSummary, Status
from slurm_energy.natsort import natural_key, sort_devices

#: Status precedence when the same node reported twice (an interim flush and the Epilog's record).
_NODE_STATUS_RANK = {Status.RUNNING: 0, Status.NO_DATA: 1, Status.PARTIAL: 1, Status.FAILED: 1, Status.COMPLETE: 2}


def run_span(r: JobRecord) -> tuple[float, float]:
    starts = [r.start_time] + [ns.start_time for ns in r.nodes]
    ends = [r.end_time] + [ns.end_time for ns in r.nodes]
    return min(starts), max(ends)


def same_run(a: JobRecord, b: JobRecord) -> bool:
    """True if two records of one (cluster, job id) belong to one run of the job: the one run rule
    (:func:`slurm_energy.jobmeta.same_run`) on their :class:`~slurm_energy.jobmeta.RunKey`: same
    restart count, SLUID or Slurm start time where Slurm gives them, else the same node list and
    overlapping spans."""
    return same_run_key(RunKey.of_record(a), RunKey.of_record(b)) is True


def split_runs(records: list[JobRecord]) -> list[list[JobRecord]]:
    """Group node records into runs of the job (:func:`same_run`), oldest run first.

    A job id Slurm reused (state reset, MaxJobId wrap) on the same or another set of nodes, and a
    requeued attempt, are different runs: their node records are never merged into one job.
    """
    runs: list[list[JobRecord]] = []
    for r in sorted(records, key=lambda r: run_span(r)[0]):
        for run in runs:
            if any(same_run(r, x) for x in run):
                run.append(r)
                break
        else:
            runs.append([r])
    return runs


def _better_node(a: NodeSummary, b: NodeSummary) -> NodeSummary:
    """Of two summaries of the same node, keep the final one (Epilog over interim), then the longer."""
    ka = (_NODE_STATUS_RANK.get(a.status, 0), a.end_time, a.n_samples)
    kb = (_NODE_STATUS_RANK.get(b.status, 0), b.end_time, b.n_samples)
    return b if kb > ka else a


def unique_union(lists: Iterable[list[str]]) -> list[str]:
    """The lists' items, each once, in first-seen order."""
    return list(dict.fromkeys(x for lst in lists for x in lst))


#: The time stamp :meth:`slurm_energy.slurm.attempt.Attempt.record_error` puts before a message.
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d ")


def combine_errors(*lists: Iterable[str]) -> list[str]:
    """Errors from several sources as one list: each error once, in order, its first occurrence
    kept. Messages that differ only by the spool's leading time stamp (``2026-12-02T10:49:33 ``)
    are one error: a site-config problem is recorded by the Prolog, the sampler and the finalizer
    of the same job, each at its own time. Every list of errors a record gets is combined here
    (node: :func:`slurm_energy.pipeline.measure_node`; job: :func:`merge_records`; notes added later)."""
    seen: set[str] = set()
    out: list[str] = []
    for lst in lists:
        for e in lst:
            key = _STAMP.sub("", e, count=1)
            if key not in seen:
                seen.add(key)
                out.append(e)
    return out


def _check_one_attempt(records: list[JobRecord]) -> None:
    """Raise MergeError unless ``records`` is non-empty and of one (cluster, job_id, restart_count)."""
    if not records:
        raise MergeError("merge_records: no records given; pass at least one node's JobRecord")
    first = records[0]
    for r in records[1:]:
        for f in ("cluster", "job_id", "restart_count"):
            if getattr(r, f) != getattr(first, f):
                raise MergeError(
                    f"merge_records: {f} differs ({getattr(first, f)!r} vs {getattr(r, f)!r}); "
                    "merge only the node records of one job attempt"
                )


def _slurm_facts(ordered: list[JobRecord]) -> JobRecord:
    """A copy of the first record with each Slurm fact it lacks taken from the next record that has it."""
    base = ordered[0].model_copy(update={"nodes": []}).model_copy(deep=True)  # its nodes are replaced: not copied
    for field in ("array_job_id", "array_task_id", "het_job_id", "het_job_offset", "uid", "gid"):
        if getattr(base, field) is None:
            setattr(base, field, next((getattr(r, field) for r in ordered if getattr(r, field) is not None), None))
    for field in ("job_name", "user", "account", "partition", "work_dir", "exit_code"):
        if not getattr(base, field):
            setattr(base, field, next((getattr(r, field) for r in ordered if getattr(r, field)), ""))
    return base


def measured_nothing(ns: NodeSummary) -> bool:
    """True when nothing was measured on the node: no device has an energy, neither the job's share
    nor the whole device's over the job (every device's method is ``unavailable``, or the node has
    no device at all: no sample rows). A device estimated by the TDP model has an energy: an
    estimate is a (labelled) measurement, not "nothing". A device whose whole energy is known but
    not the job's share (a job gone before the sampler first saw it) was measured: the job is then
    partial (coverage), not no_data."""
    return all(d.energy_j is None and d.device_energy_j is None for d in ns.devices)


def node_status(status: Status, ns: NodeSummary) -> Status:
    """A finished node's status given what it measured: ``no_data`` for a ``complete`` or
    ``partial`` node that measured nothing (:func:`measured_nothing`) -- "partial" would say that
    part of the job was measured -- else ``status``. Interim (``running``) and ``failed`` nodes keep
    theirs."""
    if status in (Status.COMPLETE, Status.PARTIAL) and measured_nothing(ns):
        return Status.NO_DATA
    return status


def _merged_status(nodes: list[NodeSummary], missing: list[str]) -> Status:
    """partial (a node missing, partial, failed or unmeasured) > running (an interim view) > complete;
    failed when every node failed, no_data when no reporting node measured anything (each is
    ``no_data``, or a finished node whose devices are all unavailable: :func:`node_status`)."""
    if nodes and all(ns.status == Status.FAILED for ns in nodes):
        return Status.FAILED
    if nodes and all(node_status(ns.status, ns) == Status.NO_DATA for ns in nodes):
        return Status.NO_DATA  # the job ran, nothing was measured on any node that reported
    if missing or any(ns.status in (Status.PARTIAL, Status.FAILED, Status.NO_DATA) for ns in nodes):
        return Status.PARTIAL
    if any(ns.status == Status.RUNNING for ns in nodes):
        return Status.RUNNING
    return Status.COMPLETE


def merge_records(records: list[JobRecord]) -> JobRecord:
    """Union per-node records of one job attempt into one record. Pure; does not compute totals.

    Args:
        records: JobRecords of the same (cluster, job_id, restart_count), each normally holding one
            NodeSummary. The same node may appear more than once (a retried Epilog, an interim
            flush): it counts once -- the final summary wins over an interim one, then the later
            ``end_time``.

    Returns:
        A new JobRecord: Slurm facts from the records (first non-empty value, records taken in node
        order), ``nodes`` in numeric name order (n2 before n10, as Slurm's hostlist), ``start_time`` =
        min, ``end_time`` = max,
        ``expected_nodes`` = union, ``errors`` = union (each error once: :func:`combine_errors`;
        plus one per missing node), ``tags`` = union
        (the first node's value wins per key), ``job_trace`` for several nodes (the job's summed
        power and the nodes' band; only a few chosen nodes keep their own ``power_trace``:
        :func:`slurm_energy.accounting.trace.bound_traces`). ``status``:
        ``no_data`` if every node that reported measured nothing (no device of any node has an
        energy; TDP estimates count as measured), else ``partial`` if an expected
        node has not reported or a node is partial/failed/no_data, ``running`` if
        any node summary is an interim one, else ``complete``. Totals (``energy_it_j``, ``it_kwh``,
        ...) are left empty for ``finalise_record``.

    Raises:
        ValueError: empty list, or records of different jobs/attempts (names the differing field).
    """
    _check_one_attempt(records)
    by_node: dict[str, NodeSummary] = {}
    for r in records:
        for ns in r.nodes:
            by_node[ns.node] = _better_node(by_node[ns.node], ns) if ns.node in by_node else ns
    nodes = [by_node[k].model_copy(deep=True) for k in sorted(by_node, key=natural_key)]
    for ns in nodes:
        ns.devices = sort_devices(ns.devices)
        ns.errors = combine_errors(ns.errors)  # node records written before errors were combined

    ordered = sorted(records, key=lambda r: (0, natural_key(r.nodes[0].node)) if r.nodes else (1, natural_key("")))
    base = _slurm_facts(ordered)
    expected = unique_union(r.expected_nodes for r in records)
    missing = [n for n in expected if n not in by_node]
    errors = combine_errors(*(r.errors for r in records), *(ns.errors for ns in nodes),
                            [f"node {n} never reported" for n in missing])
    status = _merged_status(nodes, missing)

    tags: dict[str, Any] = {}
    for r in ordered:  # what the script declared: first node's value wins per key
        for k, v in (r.tags or {}).items():
            tags.setdefault(k, v)

    starts = [r.start_time for r in records] + [ns.start_time for ns in nodes]
    ends = [r.end_time for r in records] + [ns.end_time for ns in nodes]
    raw_text: dict[str, str] = {}
    for r in ordered:  # the original bytes of non-UTF-8 text, from every node's record
        for k, v in r.raw_text.items():
            raw_text.setdefault(k, v)
    start, end = min(starts), max(ends)
    # a job of several nodes: its summed power and the nodes' band, and a few nodes' own traces
    # (bounded whatever the nodes: accounting.trace); a re-merge of merged records keeps their trace
    job_trace = bound_traces(nodes, start, end) if len(nodes) > 1 else None
    if job_trace is None and len(nodes) > 1:
        job_trace = next((r.job_trace for r in ordered if r.job_trace is not None), None)
    return base.model_copy(
        update=dict(
            nodes=nodes,
            job_trace=job_trace,
            raw_text=raw_text,
            expected_nodes=expected,
            start_time=start,
            end_time=end,
            errors=errors,
            status=status,
            tags=tags,
            energy_it_j={},
            device_energy_j={},
            methods={},
            it_kwh=None,
            facility_kwh=None,
            co2e_kg=None,
            co2e_gross_kg=None,
            coverage_complete=not missing,
        )
    )


def merge_interim(stored: list[JobRecord], new: JobRecord) -> JobRecord:
    """A running attempt's interim node views (``stored``, as kept by the store) with ``new``:
    unioned (:func:`merge_records`, views of the same attempt only), re-totalled with ``new``'s
    carbon facts, status ``running``. Pure; the store calls it inside its write transaction."""
    from slurm_energy.accounting.formulas import finalise_record

    parts = [o for o in stored if o.restart_count == new.restart_count and same_run(o, new)] + [new]
    merged = finalise_record(merge_records(parts), new.carbon)
    return merged.model_copy(update={"status": Status.RUNNING})
