"""The slow half of the Epilog, run detached: the spool's files -> :mod:`slurm_energy.pipeline`
(node record -> merge -> carbon) -> store -> report; for a job whose node had no usable spool, a
``no_data`` record from its context on the command line (:func:`finalize_env_main`).

Also the sampler's interim flush (every minute): the job's energy so far, stored with status
``running`` so ``jobenergy`` shows a running job.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import TYPE_CHECKING

from slurm_energy.core import DeviceStatic, Status, one_line
from slurm_energy.model import JobRecord, NodeStatic
from slurm_energy.outputs.sinks import forget_running, publish_final, publish_outputs, site_sinks
from slurm_energy.pipeline import NodeObservation, finalise_job, measure_node, publish
from slurm_energy.slurm.attempt import Attempt, SamplerEnd, no_spool_entry, read_json, spool_dirs
from slurm_energy.slurm.config_cache import load_config
from slurm_energy.slurm.context import JobContext, cpus_on_node
from slurm_energy.slurm.jobend.finish import AfterSlot, Trigger
from slurm_energy.slurm.jobend.jobfacts import (
    requested_memory,
    slurm_job_state,
    true_cpu_time,
    with_slurm_facts,
)
from slurm_energy.slurm.log import setup_logging
from slurm_energy.slurm.node_reading import prolog_reading_by_sampler, reading_row, spool_from_dir

if TYPE_CHECKING:
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
                status: Status = Status.COMPLETE, slurm_facts: dict | None = None,
                sampler_outcome: SamplerEnd = SamplerEnd.TERMINATED, running: RunningSummary | None = None) -> JobRecord:
    """This node's JobRecord (one NodeSummary) from the spool's files, by :func:`pipeline.measure_node`.

    ``sampler_outcome`` is what the Epilog saw (:func:`slurm_energy.slurm.detach.stop_process`):
    anything but ``terminated`` (it flushed its final sample on TERM) makes the node partial, unless
    the rows still reach the job's end; so does a final sample written before the Epilog
    (``end_time``): an early stop. Both: :mod:`slurm_energy.slurm.jobend.sampler_end`.
    ``running``: the sampler's :class:`RunningSummary` of the sample file (interim records: only the
    rows added since the previous one are read)."""
    from slurm_energy.sampling.samplefile import read_sample_table
    from slurm_energy.sampling.sampletable import SampleTable
    from slurm_energy.slurm.jobend.sampler_end import classify_end, measured_to_the_end

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
    meter_rows, meter_source = _meter_rows(cfg, spool, start, end_time) if running is None else (None, "")
    from slurm_energy.devices.gpu import node_gpu_count
    from slurm_energy.devices.hardware import HardwareConfig

    obs = NodeObservation(
        ctx.node, rows, static, start_time=start, end_time=end_time, span_known=span_known, cpus_alloc=cpus,
        errors=errors, status=st, marks=_read_marks(ctx), job_cpu_total_s=total_cpu,
        meter_rows=meter_rows, meter_source=meter_source, mem_alloc_bytes=req_mem[0],
        gpus_node=node_gpu_count(HardwareConfig.of(cfg.hardware)) if meter_rows else None)
    rec = measure_node(obs, ctx, cfg, expected_nodes=nodes, exit_code=exit_code,
                       job_state=slurm_job_state(slurm_facts, ctx, exit_code), running=running)
    ns = rec.nodes[0]
    ns.req_mem_bytes, ns.req_mem_source = req_mem
    rec.errors = list(ns.errors)
    return rec


def _meter_rows(cfg, spool: Attempt, start: float, end: float) -> tuple[list | None, str]:
    """The node meter's rows over the job's span (:mod:`slurm_energy.sampling.meterspool`, written by
    the node's meter process), one each side within two meter intervals; ``(None, "")`` without."""
    from slurm_energy.sampling import meterspool

    nm = getattr(cfg, "node_meter", None)
    if nm is None or nm.source == "none":
        return None, ""
    rows = meterspool.read_span(meterspool.meter_path(spool.spool_dir, spool.node), start, end,
                                margin_s=2 * float(nm.interval_s))
    if not rows:
        return None, ""
    return [(r.t, r.reading) for r in rows], rows[-1].source


def _full(spool: Attempt) -> str:
    """``"; spool <dir> is full ..."`` when the job's spool filesystem has no block left (why nothing
    could be written, not even that error), else ''."""
    try:
        full = os.statvfs(spool.dir).f_bfree == 0  # as root (the sampler) sees it
    except OSError:
        return ""
    return (f"; spool {spool.spool_dir} is full (no space left on its filesystem): free space there, or set "
            "paths.spool_fallback_dir on another filesystem") if full else ""


def _read_marks(ctx: JobContext):
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


def finalize_main(job_dir: str, node: str, end_time: float, exit_code: str = "",
                  sampler_outcome: SamplerEnd = SamplerEnd.TERMINATED, deferred: AfterSlot | None = None,
                  logging_ready: bool = False, trigger: Trigger | None = None) -> int:
    """Entry point of the detached finalizer, for one job attempt on one node (the node's queue
    runner, :mod:`slurm_energy.slurm.jobend.queue`, calls it for each job it takes; a finalizer
    for one job, ``SINGLE``): loads the site config, then :func:`~slurm_energy.slurm.jobend.finish.finish`.
    Returns 0; failures are logged and on the record. ``logging_ready``: the caller has set up the log.

    ``deferred``: where the user's report writing and a marker the spool had no room for are left
    for the caller, to run once it has released its finalizer slot (the job's user can stop or hang
    that writer, which then must not delay other users' jobs); None: written here."""
    from slurm_energy.slurm.jobend.finish import finish

    errors: list[str] = []
    cfg = load_config(errors)  # per job: site.yaml may have changed since the runner's previous one
    if not logging_ready:
        setup_logging(cfg.paths.log_dir, "finalize.log")
    spool, ctx = spool_from_dir(job_dir, node)
    if trigger is None:
        trigger = Trigger.NO_EPILOG if sampler_outcome == SamplerEnd.EPILOG_MISSING else Trigger.QUEUE
    try:
        finish(cfg, spool, ctx, trigger, end_time=end_time, exit_code=exit_code, sampler=sampler_outcome,
               after=deferred, errors=errors)
    except Exception as e:
        log.exception("finalize job=%s node=%s failed", one_line(ctx.job_id), one_line(node))
        spool.record_error(f"finalize: {type(e).__name__}: {e}")
    finally:
        from slurm_energy.sampling.marks import remove_marks

        remove_marks(ctx.job_id, ctx.node)  # whatever happened: a user's marks never outlive the job
    return 0


#: How long (s) a finalizer retries writing a ``finalized`` marker the spool had no room for
#: (:class:`MarkerPending`): a spool full for minutes, then freed, must not leave its jobs for
#: ``collect`` to do again.
MARKER_RETRY_S = 180.0


class MarkerPending:
    """An attempt's FINALIZED marker not written (a full or read-only spool) for a job whose
    record was published: :meth:`retry` tries again for a while, so ``collect`` does not finish the
    job a second time once the spool has room again. A deferred item of :func:`finalize_main`, not
    a report to run: the caller retries it (:func:`slurm_energy.slurm.jobend.queue.run_reports` skips it)."""

    def __init__(self, path: str):
        self.path = path

    def retry(self, for_s: float, every_s: float = 5.0, sleep=time.sleep) -> bool:
        """Try writing the marker every ``every_s`` s for ``for_s`` s; True once written."""
        from slurm_energy.slurm.attempt import write_private

        for k in range(int(for_s // every_s) + 1):  # at 0, every_s, ... up to for_s
            if k:
                sleep(every_s)
            try:
                write_private(self.path, repr(time.time()))
                return True
            except OSError:
                continue
        return False


def report_umask(jobenv: dict) -> tuple[int | None, str]:
    """(the umask the job's report is written with, the record's note when it is unknown): the
    sampler's ``umask`` from the job's processes (``jobenv``: the spool's job facts, ``"0022"``),
    else None (the report is then private, :data:`~slurm_energy.reporting.safe_write.UNKNOWN_UMASK`)
    and :data:`~slurm_energy.reporting.safe_write.PRIVATE_REPORT_NOTE`, so the record says why."""
    from slurm_energy.reporting.safe_write import PRIVATE_REPORT_NOTE

    um = jobenv.get("umask")
    if isinstance(um, str) and um.isdigit() and set(um) <= set("01234567") and int(um, 8) <= 0o777:
        return int(um, 8), ""
    return None, PRIVATE_REPORT_NOTE


def finish_node(cfg: SiteConfig, rec: JobRecord, ctx: JobContext, umask: int | None = None,
                deferred: list | None = None) -> JobRecord | None:
    """Write this node's record (``paths.results_dir``, else the fallback spool's results); if every
    node has reported, finalise the job (:func:`slurm_energy.pipeline.finalise_job`) and publish it
    (:func:`store_and_report`). Returns the published record, or None while other nodes are still to
    report. With nowhere to leave the node record, this node's view is published (a later merge
    replaces it)."""
    from slurm_energy.slurm.jobend.results import collect_node_records, retire_run, write_node_record

    where = None
    for results_dir in results_dirs(cfg):
        try:
            write_node_record(results_dir, rec)
            where = results_dir
            break
        except OSError as e:  # full or read-only: the fallback spool's results, then none
            log.warning("job=%s node=%s: results dir %s not written: %s", ctx.job_id, ctx.node, results_dir, e)
            rec.errors.append(f"results dir {results_dir} not written: {e}")
    if where is None:
        return store_and_report(cfg, finalise_job([rec], cfg, merge=False), umask=umask, deferred=deferred)
    records = collect_node_records(where, ctx.cluster, ctx.job_id, ctx.restart_count, rec.expected_nodes, record=rec)
    if records is None:
        log.info("job=%s node=%s: waiting for other nodes %s", ctx.job_id, ctx.node, rec.expected_nodes)
        forget_running(cfg, rec)  # the node that completes the job exports its totals
        return None
    final = finalise_job(records, cfg)
    final.slurm_energy_j, final.slurm_energy_source = _slurm_energy(final.job_id)
    out = store_and_report(cfg, final, outputs=False, umask=umask, deferred=deferred)
    try:  # stored: its node files must not meet a later run of this job id (Slurm reuses ids)
        retire_run(where, final)
    except OSError as e:
        log.warning("job=%s: node files not moved to stored/: %s", ctx.job_id, e)
    publish_outputs(cfg, out, queue_in=spool_dirs(cfg))  # after the run is retired: outputs may take seconds
    return out


def _slurm_energy(job_id: str) -> tuple[float | None, str]:
    """Slurm's own ConsumedEnergy for the job (off the hook path); (None, why) when it has none."""
    try:
        from slurm_energy.slurm.clients.facts import current

        return current().consumed_energy(job_id)
    except Exception as e:  # Slurm's number is a comparison only: never lose the job over it
        return None, f"unavailable: {type(e).__name__}: {e}"


def store_and_report(cfg: SiteConfig, final: JobRecord, outputs: bool = True, umask: int | None = None,
                     deferred: list | None = None) -> JobRecord:
    """:func:`slurm_energy.outputs.sinks.publish_final`, a store that is down queueing in the spools."""
    return publish_final(cfg, final, umask=umask, queue_in=spool_dirs(cfg), deferred=deferred, outputs=outputs)


def results_dirs(cfg: SiteConfig) -> list[str]:
    """``paths.results_dir``, then ``results`` under the fallback spool (collect merges both)."""
    fb = cfg.paths.spool_fallback_dir
    return list(dict.fromkeys(d for d in (cfg.paths.results_dir, fb and os.path.join(fb, "results")) if d))


#: The sampler's running summaries, by sample file (one per sampler process).
_RUNNING: dict[str, RunningSummary] = {}


def interim(cfg: SiteConfig, spool: Attempt, ctx: JobContext) -> None:
    """The sampler's periodic flush: this node's energy so far, stored with status running, and
    exported to node_exporter. Costs the rows added since the previous flush
    (:class:`~slurm_energy.accounting.running.RunningSummary`); the record has no power trace and
    no phase windows (the Epilog's has them)."""
    from slurm_energy.accounting.running import RunningSummary

    summary = _RUNNING.get(spool.samples)
    if summary is None:
        summary = _RUNNING[spool.samples] = RunningSummary(spool.samples)
    rec = node_record(cfg, spool, ctx, time.time(), status=Status.RUNNING, running=summary)
    running = finalise_job([rec], cfg, merge=False).model_copy(update={"status": Status.RUNNING})
    publish(running, site_sinks(cfg, running=True))


def finalize_env_main(ctx_json: str, end_time: float, exit_code: str, sampler_outcome: SamplerEnd,
                      errors: list[str], logging_ready: bool = False) -> int:
    """The finalizer of a job whose node had no usable spool (both spools full or read-only):
    ``finalize-env CONTEXT_JSON T EXIT OUTCOME ERRORS_JSON``, the job's context parsed from the
    Epilog's environment, nothing read from disk (:meth:`Attempt.without_spool
    <slurm_energy.slurm.attempt.Attempt.without_spool>`): :func:`~slurm_energy.slurm.jobend.finish.finish`
    with trigger ``NO_SPOOL``. Asks slurmctld for the job's state and times and stores a ``no_data``
    record saying why nothing was measured (if ``collect`` later finds the node's spool files after
    all, the measured record replaces it). Returns 0.

    ``errors``: why each spool was unusable (the Epilog's messages), put on the record. Removes the
    job's :data:`~slurm_energy.slurm.attempt.NO_SPOOL_JOBS` entry once done (a killed one leaves it for
    the node finalizer's sweep). ``logging_ready``: the caller has set up the log."""
    from slurm_energy.slurm.jobend.finish import finish

    problems: list[str] = []
    cfg = load_config(problems)
    if not logging_ready:
        setup_logging(cfg.paths.log_dir, "finalize.log")
    ctx = JobContext.from_json(ctx_json)
    reason = ("no usable spool on this node: " + "; ".join(str(e) for e in errors) + "; free space in "
              f"{cfg.paths.spool_dir} (or make it writable) and check {cfg.paths.spool_fallback_dir}")
    try:
        rec = finish(cfg, Attempt.without_spool(ctx), ctx, Trigger.NO_SPOOL, end_time=end_time, exit_code=exit_code,
                     sampler=sampler_outcome, errors=[reason, *problems])
        if rec is None:  # its node record is waiting for the other nodes' in results
            log.info("job=%s node=%s: node record left without a spool", ctx.job_id, ctx.node)
        else:
            log.info("job=%s node=%s: stored without a spool (status %s)", ctx.job_id, ctx.node, rec.status.value)
    except Exception:
        log.exception("finalize-env job=%s node=%s failed", ctx.job_id, ctx.node)
        try:  # failed in a way a second run would repeat (logged): not run again
            os.unlink(no_spool_entry(cfg.paths.log_dir, ctx.job_id, ctx.restart_count, ctx.node))
        except OSError:
            pass
    return 0
