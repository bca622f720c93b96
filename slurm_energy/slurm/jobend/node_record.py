"""A node's record of a job attempt from its spool's files (:func:`node_record`, by
:func:`slurm_energy.pipeline.measure_node`): the rows, how the sampler ended, the device
inventory, the marks, the node meter, and Slurm's facts; and the last counter reading taken for a
sampler that did not write its own (:func:`last_reading`). Publishing it:
:mod:`slurm_energy.slurm.jobend.publish`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from slurm_energy.core import DeviceStatic, Status
from slurm_energy.model import JobRecord, NodeStatic
from slurm_energy.pipeline import NodeObservation, measure_node
from slurm_energy.slurm.attempt import Attempt, SamplerEnd, read_json
from slurm_energy.slurm.context import JobContext, cpus_on_node
from slurm_energy.slurm.jobend.jobfacts import (
    requested_memory,
    slurm_job_state,
    true_cpu_time,
    with_slurm_facts,
)
from slurm_energy.slurm.node_reading import prolog_reading_by_sampler, reading_row

if TYPE_CHECKING:
    from slurm_energy.accounting.phases import Marks
    from slurm_energy.accounting.running import RunningSummary
    from slurm_energy.config import SiteConfig
    from slurm_energy.sampling.sampletable import SampleTable

log = logging.getLogger("slurm_energy.finalize")


def _expected_nodes(ctx: JobContext) -> list[str]:
    from hostlist import BadHostlist, expand_hostlist  # python-hostlist (not on the Prolog/Epilog path)

    try:
        nodes = expand_hostlist(ctx.nodelist.strip())
    except BadHostlist:
        nodes = []
    return nodes or [ctx.node]


def last_reading(cfg: SiteConfig, spool: Attempt, ctx: JobContext) -> str:
    """The job's last counter reading on this node, taken now (the sampler did not end cleanly);
    returns '' when it was written, else why not."""
    if not os.path.exists(spool.samples):  # the sampler never started: the Prolog's row first
        prolog_reading_by_sampler(cfg, ctx, spool)
    try:
        reading_row(cfg, ctx, spool, "epilog")
        return ""
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _static(spool: Attempt, errors: list[str]) -> NodeStatic:
    try:
        with open(spool.static, encoding="utf-8") as f:
            return NodeStatic(**json.load(f))
    except (OSError, ValueError) as e:
        why = "missing" if isinstance(e, FileNotFoundError) else f"unreadable ({type(e).__name__})"
        errors.append(f"no device inventory: {os.path.basename(spool.static)} {why} (neither the Prolog nor the "
                      "sampler wrote it on this node)")
        return NodeStatic()


def node_record(cfg: SiteConfig, spool: Attempt, ctx: JobContext, end_time: float, exit_code: str = "",
                status: Status = Status.COMPLETE, slurm_facts: dict[str, Any] | None = None,
                sampler_outcome: SamplerEnd = SamplerEnd.TERMINATED, running: RunningSummary | None = None) -> JobRecord:
    """This node's JobRecord (one NodeSummary) from the spool's files, by :func:`pipeline.measure_node`.

    ``sampler_outcome`` is what the Epilog saw (:func:`slurm_energy.slurm.detach.stop_process`):
    anything but ``terminated`` (it flushed its final sample on TERM) makes the node partial, unless
    the rows still reach the job's end; so does a final sample written before the Epilog
    (``end_time``): an early stop. Both: :mod:`slurm_energy.slurm.sampler_end`.
    ``running``: the sampler's :class:`RunningSummary` of the sample file (interim records: only the
    rows added since the previous one are read)."""
    from slurm_energy.sampling.samplefile import read_sample_table
    from slurm_energy.sampling.sampletable import SampleTable
    from slurm_energy.slurm.sampler_end import classify_end, measured_to_the_end

    name = read_json(spool.jobenv).get("job_name")  # where ctx has none (JOB_ENV_FACTS; slurmctld's wins later)
    if isinstance(name, str) and name and not ctx.job_name:
        ctx = dataclasses.replace(ctx, job_name=name)
    ctx = with_slurm_facts(ctx, slurm_facts)
    errors = spool.read_errors()
    if status != Status.RUNNING and os.path.exists(spool.prolog_running):
        errors.append(f"prolog: killed before it finished on {ctx.node} (its 1.9 s time guard, timeout -s KILL): "
                      "what it had not done yet (marks directory, first reading, sampler) is missing from this node")
    static = _static(spool, errors)
    nodes = _expected_nodes(ctx)
    idx = nodes.index(ctx.node) if ctx.node in nodes else 0
    cpus = cpus_on_node(ctx.cpus_per_node, idx)
    if running is not None:
        running.update(statics=[DeviceStatic(**d) for d in static.get("devices", [])], cpus_alloc=cpus,
                       policy=cfg.attribution.policy)
        rows: SampleTable = SampleTable()
        n_rows, first_t, mem_total = running.n_rows, running.first_t, running.mem_total
    else:
        rows, sampler_outcome = classify_end(read_sample_table(spool.samples), end_time, sampler_outcome, spool,
                                             errors)
        n_rows, first_t = len(rows), min(rows.t, default=None)
        mem_total = next((m for m in reversed(rows.node["mem_total_bytes"]) if m), None)
    if not n_rows:
        errors.append("no samples: no sample row was written on this node (by the Prolog, the sampler or "
                      "the Epilog's finalizer)" + _full(spool))
    st = status
    if status == Status.COMPLETE and (not n_rows or not measured_to_the_end(rows, sampler_outcome, errors)):
        st = Status.PARTIAL
    span_known = bool(ctx.prolog_time)  # no Prolog: the job's start on this node is unknown
    if not span_known:
        st = Status.PARTIAL if status == Status.COMPLETE else status
    # a node that measured nothing (no rows, or no device with an energy) becomes no_data in
    # measure_node (accounting.merge.node_status), whatever made it partial here
    start = ctx.prolog_time or (slurm_facts or {}).get("start_time") or min(end_time, first_t or end_time)
    total_cpu = true_cpu_time(ctx, rows, nodes, errors) if status != Status.RUNNING else None
    req_mem = requested_memory(ctx, slurm_facts, cpus, mem_total, errors)
    meter_rows, meter_source, meter_note = _meter_rows(cfg, spool, start, end_time) if running is None else (None, "", "")
    from slurm_energy.devices.gpu import node_gpu_count
    from slurm_energy.devices.hardware import HardwareConfig

    obs = NodeObservation(
        ctx.node, rows, static, start_time=start, end_time=end_time, span_known=span_known, cpus_alloc=cpus,
        errors=errors, status=st, marks=_read_marks(ctx), job_cpu_total_s=total_cpu,
        meter_rows=meter_rows, meter_source=meter_source, meter_note=meter_note, mem_alloc_bytes=req_mem[0],
        gpus_node=node_gpu_count(HardwareConfig.of(cfg.hardware)) if meter_rows else None)
    rec = measure_node(obs, ctx, cfg, expected_nodes=nodes, exit_code=exit_code,
                       job_state=slurm_job_state(slurm_facts, ctx, exit_code), running=running)
    ns = rec.nodes[0]
    ns.req_mem_bytes, ns.req_mem_source = req_mem
    rec.errors = list(ns.errors)
    return rec


def _meter_rows(cfg: SiteConfig, spool: Attempt, start: float,
                end: float) -> tuple[list[tuple[float, Any]] | None, str, str]:
    """The node meter's rows over the job's span (:mod:`slurm_energy.sampling.meterspool`, written by
    the node's meter process), one each side within two meter intervals, and their source;
    ``(None, "", why)`` without (why: the meter process's own note, e.g. ``auto`` found no meter, or
    its configuration error; '' where the site has no meter)."""
    from slurm_energy.sampling import meterspool
    from slurm_energy.slurm.nodemeter import meter_note

    nm = getattr(cfg, "node_meter", None)
    if nm is None or nm.source == "none":
        return None, "", ""
    rows = meterspool.read_span(meterspool.meter_path(spool.spool_dir, spool.node), start, end,
                                margin_s=2 * float(nm.interval_s))
    if not rows:
        return None, "", meter_note(spool.spool_dir, spool.node)
    return [(r.t, r.reading) for r in rows], rows[-1].source, ""


def _full(spool: Attempt) -> str:
    """``"; spool <dir> is full ..."`` when the job's spool filesystem has no block left (why nothing
    could be written, not even that error), else ''."""
    try:
        full = os.statvfs(spool.dir).f_bfree == 0  # as root (the sampler) sees it
    except OSError:
        return ""
    return (f"; spool {spool.spool_dir} is full (no space left on its filesystem): free space there, or set "
            "paths.spool_fallback_dir on another filesystem") if full else ""


def _read_marks(ctx: JobContext) -> Marks:
    """The job's phase/stage/tag marks on this node (:mod:`slurm_energy.sampling.marks`), parsed
    as data; unreadable or bad marks are flags on the node, never a lost record."""
    from slurm_energy.accounting.phases import Marks, parse_marks
    from slurm_energy.sampling.marks import job_marks_dir, marks_file_name, read_marks_file

    try:
        lines, flags = read_marks_file(job_marks_dir(ctx.job_id), marks_file_name(ctx.node))
        m = parse_marks(lines)
    except Exception as e:
        return Marks(flags=[f"marks_unreadable:{type(e).__name__}"])
    m.flags = flags + m.flags
    return m
