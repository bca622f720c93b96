"""The slow half of the Epilog, run detached: node summary -> merge -> carbon -> store -> report.

Also the sampler's interim flush (every minute): the job's energy so far, stored with status
``running`` so ``jobenergy`` shows a running job.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Optional

from slurm_energy.model import JobRecord, Status, job_state_from_exit_code
from slurm_energy.slurm.env import JobContext, cpus_on_node
from slurm_energy.slurm.spool import JobSpool

log = logging.getLogger("slurm_energy.finalize")


def _expected_nodes(ctx: JobContext) -> list[str]:
    from slurm_energy.slurm.hostlist import expand_hostlist

    try:
        nodes = expand_hostlist(ctx.nodelist) if ctx.nodelist else []
    except ValueError:
        nodes = []
    return nodes or [ctx.node]


def _with_job_env(spool: JobSpool, ctx: JobContext) -> JobContext:
    """ctx completed with what the sampler read from the job's processes (array/het ids, name)."""
    import dataclasses

    try:
        with open(spool.jobenv, encoding="utf-8") as f:
            facts = json.load(f)
    except (OSError, ValueError):
        return ctx
    return dataclasses.replace(ctx, **{k: v for k, v in facts.items()
                                       if hasattr(ctx, k) and not getattr(ctx, k)})


def _with_slurm_facts(ctx: JobContext, facts: Optional[dict]) -> JobContext:
    """ctx completed with slurmctld's facts (array/het ids, job name) where it lacks them."""
    import dataclasses

    if not facts:
        return ctx
    keys = ("array_job_id", "array_task_id", "het_job_id", "het_job_offset", "job_name")
    return dataclasses.replace(ctx, **{k: facts[k] for k in keys if facts.get(k) and not getattr(ctx, k)})


def slurm_job_state(facts: Optional[dict], ctx: JobContext, exit_code: str) -> str:
    """The attempt's state: slurmctld's (REQUEUED when the job has been restarted since this attempt),
    else derived from the Epilog's exit code (which reads 0:0 for a cancelled or timed-out job)."""
    from slurm_energy.slurm.scontrol import UNFINISHED

    if facts and facts.get("restarts", 0) > ctx.restart_count:
        return "REQUEUED"  # slurmctld already describes a later attempt
    if facts and facts.get("job_state") and facts["job_state"] not in UNFINISHED:
        return facts["job_state"]
    return job_state_from_exit_code(exit_code)


def _last_reading(cfg, spool: JobSpool, ctx: JobContext) -> None:
    from slurm_energy.slurm.hooks import _reading_row

    try:
        _reading_row(cfg, ctx, spool, "epilog")
    except Exception as e:
        spool.record_error(f"epilog reading: {type(e).__name__}: {e}")


def node_record(cfg, spool: JobSpool, ctx: JobContext, end_time: float, exit_code: str = "",
                status: Status = Status.COMPLETE, slurm_facts: Optional[dict] = None,
                sampler_outcome: str = "terminated") -> JobRecord:
    """This node's JobRecord (one NodeSummary) from the spool's sample file. Pure but for reads.

    ``sampler_outcome`` is what the Epilog saw (:func:`slurm_energy.slurm.detach.stop_process`):
    anything but ``terminated`` (it flushed its final sample on TERM) makes the node partial."""
    from slurm_energy.accounting.summary import summarise_node
    from slurm_energy.sampling.readers.base import DeviceStatic
    from slurm_energy.sampling.samplefile import read_samples

    rows = list(read_samples(spool.samples))
    ctx = _with_slurm_facts(_with_job_env(spool, ctx), slurm_facts)
    errors = spool.read_errors()
    static: dict = {}
    try:
        with open(spool.static, encoding="utf-8") as f:
            static = json.load(f)
    except (OSError, ValueError):
        errors.append("no device inventory: the sampler did not start on this node")
    statics = [DeviceStatic(**d) for d in static.get("devices", [])]
    if not rows:
        errors.append("no samples: the sampler never wrote a sample on this node")
    nodes = _expected_nodes(ctx)
    idx = nodes.index(ctx.node) if ctx.node in nodes else 0
    st = status
    if status == Status.COMPLETE and (not rows or sampler_outcome != "terminated"):
        st = Status.PARTIAL
    span_known = bool(ctx.prolog_time)  # no Prolog: the job's start on this node is unknown
    if not span_known:
        st = Status.PARTIAL if status == Status.COMPLETE else status
    marks = _read_marks(ctx)
    if not rows and status == Status.COMPLETE:
        st = Status.NO_DATA  # the job ran; nothing was measured on this node (errors say why)
    start = ctx.prolog_time or (slurm_facts or {}).get("start_time") or min([end_time] + [r["t"] for r in rows])
    summary = summarise_node(
        rows, job_id=ctx.job_id, node=ctx.node, start_time=start,
        end_time=end_time, statics=statics, cpus_alloc=cpus_on_node(ctx.cpus_per_node, idx),
        policy=cfg.attribution.policy, interval_s=cfg.sampling.interval_s, status=st, errors=errors,
        span_known=span_known, marks=marks)
    summary.req_mem_bytes, summary.req_mem_source = _requested_memory(
        ctx, slurm_facts, cpus_on_node(ctx.cpus_per_node, idx), rows, errors)
    summary.static = {k: v for k, v in static.items() if k != "devices"}
    summary.static["devices"] = static.get("devices", [])
    return JobRecord(
        cluster=ctx.cluster, job_id=ctx.job_id, job_name=ctx.job_name, array_job_id=ctx.array_job_id, array_task_id=ctx.array_task_id,
        het_job_id=ctx.het_job_id, het_job_offset=ctx.het_job_offset, user=ctx.user, uid=ctx.uid, gid=ctx.gid,
        account=ctx.account, partition=ctx.partition, work_dir=ctx.work_dir, restart_count=ctx.restart_count,
        sluid=ctx.sluid, slurm_start_time=ctx.slurm_start_time,
        exit_code=exit_code, job_state=slurm_job_state(slurm_facts, ctx, exit_code), expected_nodes=nodes, start_time=summary.start_time, end_time=summary.end_time,
        nodes=[summary], status=st, errors=list(summary.errors), tags=dict(marks.tags))


def _read_marks(ctx: JobContext):
    """The job's phase/stage/tag marks on this node (:mod:`slurm_energy.sampling.marks`), parsed
    as data; unreadable or bad marks are flags on the node, never a lost record."""
    from slurm_energy.accounting.phases import Marks, parse_marks
    from slurm_energy.sampling.marks import job_marks_dir, marks_file_name, read_marks_file

    try:
        lines, flags = read_marks_file(job_marks_dir(ctx.job_id), marks_file_name(ctx.node))
        m = parse_marks(lines)
    except Exception as e:  # noqa: BLE001 - the job's own data must never cost its record
        return Marks(flags=[f"marks_unreadable:{type(e).__name__}"])
    m.flags = flags + m.flags
    return m


def _requested_memory(ctx: JobContext, facts: Optional[dict], cpus: Optional[int], rows: list,
                      errors: list) -> tuple[Optional[int], str]:
    """The job's memory request on this node (bytes, how): the job's SLURM_MEM_PER_NODE /
    SLURM_MEM_PER_CPU (read from its processes: 22.05's Prolog does not get them), else slurmctld's
    MinMemoryNode / MinMemoryCPU, else its TRES mem= / nodes; 0 = the whole node (TRES mem per node,
    else the node's MemTotal). A value Slurm never writes is
    recorded as an error and the request left unknown."""
    from slurm_energy.slurm.formats import SlurmFormatError, requested_memory_bytes

    facts = facts or {}
    node_total = next((r["node"]["mem_total_bytes"] for r in reversed(rows)
                       if (r.get("node") or {}).get("mem_total_bytes")), None)
    if ctx.mem_per_node or ctx.mem_per_cpu:
        per_node, per_cpu, src = ctx.mem_per_node, ctx.mem_per_cpu, "job environment SLURM_MEM_PER_NODE/CPU, MB"
    else:
        per_node, per_cpu, src = facts.get("min_memory_node"), facts.get("min_memory_cpu"), "scontrol show job"
    try:
        tres = _tres_mem_per_node(facts)
        whole = tres if tres is not None else node_total  # 0 = the whole node: what Slurm allocated, else MemTotal
        b, how = requested_memory_bytes(per_node or None, per_cpu or None, cpus, whole)
        if b is None and not (per_node or per_cpu) and tres is not None:
            b, how = tres, f"TRES mem={facts['tres_mem']} / {facts.get('num_nodes') or 1} node(s)"
    except SlurmFormatError as e:
        errors.append(f"memory request not understood: {e}")
        return None, ""
    return b, (f"{how} ({src})" if b is not None else how)


def _tres_mem_per_node(facts: dict) -> Optional[int]:
    """slurmctld's TRES mem= (the whole job's memory) / its node count, bytes; None if absent.
    Raises SlurmFormatError for a value Slurm never writes."""
    from slurm_energy.slurm.formats import parse_memory

    got = parse_memory(facts.get("tres_mem"), "TRES mem") if facts.get("tres_mem") else None
    if not got:
        return None
    try:
        n = max(1, int(facts.get("num_nodes") or 1))
    except ValueError:
        n = 1
    return got[0] // n


def finalise(cfg, merged: JobRecord) -> JobRecord:
    """Apply the site's carbon facts (PUE, CI, alpha; hourly CI when imported) once."""
    from slurm_energy.accounting.formulas import finalise_record

    node = merged.nodes[0].node if merged.nodes else ""
    facts = cfg.carbon_for(merged.partition, node)
    hourly = None
    try:
        hourly = cfg.hourly_intensity_for(facts)
    except Exception as e:  # a bad hourly file must not lose the job
        merged.errors.append(f"hourly carbon intensity not used: {e}")
    return finalise_record(merged, facts, hourly)


def finalize_main(job_dir: str, node: str, end_time: float, exit_code: str = "",
                  sampler_outcome: str = "terminated") -> int:
    """Entry point of the detached finalizer. Returns 0; failures are logged and on the record.

    When the Epilog did not see the sampler end cleanly (``sampler_outcome`` killed, not_running,
    no_pidfile...), the counters are read once more here, so the tail after the sampler's last
    flushed sample counts -- here rather than in the Epilog, whose 2 s it would risk."""
    from slurm_energy.slurm.hooks import _load_config, _spool_from_dir, setup_logging

    errors: list[str] = []
    cfg = _load_config(errors)
    setup_logging(cfg.paths.log_dir, "finalize.log")
    spool, ctx = _spool_from_dir(job_dir, node)
    for e in errors:
        spool.record_error(e)
    try:
        from slurm_energy.slurm.scontrol import show_job

        if sampler_outcome != "terminated":  # first: the reading should be as close to the Epilog as can be
            spool.record_error(f"epilog: sampler {sampler_outcome}; the last flushed sample and a reading "
                               "taken after the Epilog are used")
            _last_reading(cfg, spool, ctx)
        facts = show_job(ctx.job_id, attempt=ctx.restart_count)  # off the Prolog/Epilog path: detached
        finalize_spool(cfg, spool, ctx, end_time, exit_code, sampler_outcome, facts)
    except Exception as e:
        log.exception("finalize job=%s node=%s failed", ctx.job_id, node)
        spool.record_error(f"finalize: {type(e).__name__}: {e}")
    return 0


def finalize_spool(cfg, spool: JobSpool, ctx: JobContext, end_time: float, exit_code: str,
                   sampler_outcome: str, facts: Optional[dict]) -> Optional[JobRecord]:
    """This node's record from its spool -> results/merge/store/report, then the marker
    ``finalized-<node>.done`` that tells ``collect`` this node is done (a killed finalizer leaves
    none). Returns what :func:`finish_node` returns. Raises what it raises."""
    from slurm_energy.slurm.spool import write_private

    rec = node_record(cfg, spool, ctx, end_time, exit_code, slurm_facts=facts, sampler_outcome=sampler_outcome)
    out = finish_node(cfg, rec, ctx)
    from slurm_energy.sampling.marks import remove_marks

    remove_marks(ctx.job_id, ctx.node)  # read into this node's record: no longer needed
    try:
        write_private(spool.finalized, repr(time.time()))
    except OSError as e:  # read-only spool: collect will finish it again (idempotent)
        log.warning("job=%s: %s not written: %s", ctx.job_id, spool.finalized, e)
    return out


def finish_node(cfg, rec: JobRecord, ctx: JobContext) -> Optional[JobRecord]:
    """Write this node's record; if every node has reported, merge, finalise, store and report.

    Returns the stored job record, or None while other nodes are still to report.
    """
    from slurm_energy.accounting.merge import retire_run, try_merge, write_node_record

    where = None
    for results_dir in results_dirs(cfg):
        try:
            write_node_record(results_dir, rec)
            where = results_dir
            break
        except OSError as e:  # full or read-only: the fallback spool's results, then none
            log.warning("job=%s node=%s: results dir %s not written: %s", ctx.job_id, ctx.node, results_dir, e)
            rec.errors.append(f"results dir {results_dir} not written: {e}")
    if where is None:  # nowhere to leave the node record: store this node's view (a later merge replaces it)
        return store_and_report(cfg, finalise(cfg, rec))
    merged = try_merge(where, ctx.cluster, ctx.job_id, ctx.restart_count, rec.expected_nodes, record=rec)
    if merged is None:
        log.info("job=%s node=%s: waiting for other nodes %s", ctx.job_id, ctx.node, rec.expected_nodes)
        _forget_running(cfg, rec)  # the node that completes the job exports its totals
        return None
    final = finalise(cfg, merged)
    final.slurm_energy_j, final.slurm_energy_source = _slurm_energy(final.job_id)
    out = store_and_report(cfg, final, outputs=False)
    try:  # stored: its node files must not meet a later run of this job id (Slurm reuses ids)
        retire_run(where, merged)
    except OSError as e:
        log.warning("job=%s: node files not moved to stored/: %s", ctx.job_id, e)
    publish_and_note(cfg, out)  # after the run is retired: outputs may take seconds (sacct, sacctmgr)
    return out


def _slurm_energy(job_id: str) -> tuple[Optional[float], str]:
    """Slurm's own ConsumedEnergy for the job (off the hook path); (None, why) when it has none."""
    try:
        from slurm_energy.slurm.sacct import consumed_energy

        return consumed_energy(job_id)
    except Exception as e:  # Slurm's number is a comparison only: never lose the job over it
        return None, f"unavailable: {type(e).__name__}: {e}"


def store_and_report(cfg, final: JobRecord, outputs: bool = True) -> JobRecord:
    """Store the record, then write energy-<jobid>.html/.csv into its work dir as the job's user,
    then (``outputs``) publish it to the extra outputs (:func:`publish_and_note`).

    The record is stored first, so ``jobenergy`` answers as soon as the report exists; a report
    that cannot be written is recorded on the stored record as an error.
    """
    _put_or_queue(cfg, final)
    log.info("job=%s stored: it=%s kWh facility=%s kWh co2e=%s kg status=%s", final.job_id, final.it_kwh,
             final.facility_kwh, final.co2e_kg, final.status.value)
    if final.work_dir and final.uid is not None:
        try:
            from slurm_energy.reporting.report import write_reports

            html, csv = write_reports(final, final.work_dir, final.uid, final.gid if final.gid is not None else final.uid)
            log.info("job=%s report %s %s", final.job_id, html, csv)
        except Exception as e:
            log.warning("report for job %s not written: %s", final.job_id, e)
            final.report_error = report_problem(final, e)
            final.errors.append(str(e) if "not written" in str(e) else f"report not written: {e}")
            _put_or_queue(cfg, final)
    if outputs:
        publish_and_note(cfg, final)
    return final


def publish_and_note(cfg, final: JobRecord) -> None:
    """Publish a stored final record to the extra outputs; their notes go onto the stored record."""
    notes = publish_outputs(cfg, final)
    if notes:  # each output's failure is a note on the stored record, never a lost record
        final.errors.extend(notes)
        _put_or_queue(cfg, final)


def output_sinks(cfg, running: bool = False) -> list:
    """The site's extra outputs (:mod:`slurm_energy.outputs`): Prometheus textfile, Slurm write-back
    (final records only). Each has ``publish(record) -> list[str]`` (notes) and never raises."""
    from slurm_energy.outputs import prometheus, slurm_writeback

    sinks = [s for s in (prometheus.from_config(cfg),) if s is not None]
    if not running:
        sinks.append(slurm_writeback.from_config(cfg))
    return sinks


def publish_outputs(cfg, rec: JobRecord, running: bool = False) -> list[str]:
    """Publish ``rec`` to every extra output; returns the notes (logged already). Never raises."""
    notes: list[str] = []
    try:
        sinks = output_sinks(cfg, running)
    except Exception as e:
        log.exception("outputs for job %s", rec.job_id)
        return [f"outputs not configured: {type(e).__name__}: {e}"]
    for s in sinks:
        try:
            notes += s.publish(rec)
        except Exception as e:  # a sink bug must not lose the record
            log.exception("output %s for job %s", getattr(s, "name", s), rec.job_id)
            notes.append(f"{getattr(s, 'name', 'output')}: {type(e).__name__}: {e}")
    for n in notes:
        log.warning("job=%s %s", rec.job_id, n)
    return notes


def _forget_running(cfg, rec: JobRecord) -> None:
    try:
        from slurm_energy.outputs import prometheus

        sink = prometheus.from_config(cfg)
        if sink is not None:
            for n in sink.forget(rec.cluster, rec.job_id, rec.restart_count):
                log.warning("job=%s %s", rec.job_id, n)
    except Exception:
        log.exception("prometheus forget job %s", rec.job_id)


def report_problem(rec: JobRecord, e: BaseException) -> str:
    """Why the report is missing, for the user (``complete (no report: <reason>)``): the directory,
    the reason and the fix. ``e`` is write_reports' error (SafeWriteError/ReportWriteError/ValueError)."""
    reason = getattr(e, "reason", "") or str(e)
    who = rec.user or f"uid {rec.uid}"
    if "ermission denied" in reason or "errno 13" in reason or "Read-only" in reason:
        fix = (f"make it writable by {who} or submit from a writable directory (sbatch --chdir=DIR); "
               f"the energy is in `jobenergy -l {rec.job_id}`")
    else:
        fix = f"the energy is in `jobenergy -l {rec.job_id}`"
    return f"{rec.work_dir} not written as {who}: {reason.splitlines()[0][:200]}; {fix}"


def results_dirs(cfg) -> list[str]:
    """``paths.results_dir``, then ``results`` under the fallback spool (collect merges both)."""
    import os

    fb = getattr(cfg.paths, "spool_fallback_dir", "")
    return list(dict.fromkeys(d for d in (cfg.paths.results_dir, fb and os.path.join(fb, "results")) if d))


def _put_or_queue(cfg, rec: JobRecord) -> None:
    """Store a final record; a store that is down or still locked after Store.put's retries gets
    the record queued durably (:mod:`slurm_energy.store.queue`) for ``slurm-energy collect``."""
    try:
        _put(cfg, rec)
    except Exception as e:
        from slurm_energy.slurm.spool import spool_dirs
        from slurm_energy.store.queue import queue_record

        path = queue_record(spool_dirs(cfg), rec, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        log.error("job=%s: store failed (%s); queued as %s for collect", rec.job_id, e, path)
        if path is None:
            raise


def _put(cfg, rec: JobRecord) -> None:
    from slurm_energy.store import open_store

    st = open_store(cfg.paths.store_url)
    try:
        st.put(rec)
    finally:
        st.close()


def interim(cfg, spool: JobSpool, ctx: JobContext) -> None:
    """The sampler's periodic flush: this node's energy so far, stored with status running."""
    rec = node_record(cfg, spool, ctx, time.time(), status=Status.RUNNING)
    running = finalise(cfg, rec).model_copy(update={"status": Status.RUNNING})
    _put(cfg, running)
    publish_outputs(cfg, running, running=True)  # node_exporter: this node's energy so far (notes logged)
