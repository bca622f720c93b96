"""What the finalizer takes from Slurm's facts about a job (``scontrol show job`` parsed by
:mod:`slurm_energy.slurm.clients.scontrol`, and the job's own environment): its final state, the ids the
Prolog could not see, and its memory request on a node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slurm_energy.model import job_state_from_exit_code
from slurm_energy.slurm.context import JobContext

if TYPE_CHECKING:
    from slurm_energy.sampling.sampletable import SampleTable


def with_slurm_facts(ctx: JobContext, facts: dict[str, Any] | None) -> JobContext:
    """ctx with slurmctld's facts: its array/het ids win over anything else (a job's environment
    is its user's to set: never its identity); its job name wins over the job's environment's."""
    import dataclasses

    if not facts:
        return ctx
    keys = ("array_job_id", "array_task_id", "het_job_id", "het_job_offset", "job_name")
    return dataclasses.replace(ctx, **{k: facts[k] for k in keys if facts.get(k)})


#: states ``scontrol show job -o`` prints for a job that has ended while its Epilogs (or burst
#: buffer stage-out) still run: Slurm's job_state_string() names the flag, not the job's state
ENDED_FLAGS = ("COMPLETING", "STAGE_OUT")


def slurm_facts(ctx: JobContext, record_error: Callable[[str], None]) -> dict[str, Any] | None:
    """slurmctld's facts about the job (:meth:`~slurm_energy.slurm.clients.facts.SlurmFacts.final_facts`), for the
    detached finalizer. Where they came from text that user text made unreadable (a newline, a key
    twice), what was dropped is said through ``record_error`` and the job's state is asked of
    slurmdbd instead (``sacct -o State``: a query with no user text in it), so a cancelled job whose
    comment says ``JobState=COMPLETED`` is still recorded CANCELLED."""
    from slurm_energy.slurm.clients.facts import current

    slurm = current()
    facts = slurm.final_facts(ctx.job_id, attempt=ctx.restart_count)
    if not facts:
        return facts
    distrusted = bool(facts.get("ambiguous") or facts.get("untrusted"))
    if facts.get("untrusted"):
        why = facts.pop("untrusted")
        record_error(f"scontrol show job: {why}" + ("" if facts else "; nothing in it is used"))
    elif distrusted:
        record_error(f"scontrol show job: {', '.join(k + '=' for k in facts['ambiguous'])} appear more than once "
                     "(a job name or comment holding them); those facts are not used")
    # ``scontrol show job -o`` (22.05's text) prints the COMPLETING (or STAGE_OUT) flag in place of
    # the state while the job's Epilogs run (job_state_string()): the job has ended, and slurmdbd
    # has its state, as it has where the text's state was not used
    hidden = facts.get("job_state") if facts.get("job_state") in ENDED_FLAGS else None
    if hidden or (distrusted and not facts.get("job_state")):
        state, why = slurm.final_state(ctx.job_id)
        if state:
            facts["job_state"] = state
        if distrusted:
            record_error("the job's state: " + (f"slurmdbd (sacct State) says {state}" if state else
                                                 f"{why}; derived from slurmd's exit code"))
        elif not state:
            record_error(f"the job's state: slurmctld said {hidden} and slurmdbd (sacct State) is {why}; "
                         "derived from slurmd's exit code")
    return facts


def slurm_job_state(facts: dict[str, Any] | None, ctx: JobContext, exit_code: str) -> str:
    """The attempt's state: slurmctld's (REQUEUED when the job has been restarted since this attempt),
    else derived from the Epilog's exit code (which reads 0:0 for a cancelled or timed-out job)."""
    from slurm_energy.slurm.clients.scontrol import UNFINISHED

    if facts and facts.get("restarts", 0) > ctx.restart_count:
        return "REQUEUED"  # slurmctld already describes a later attempt
    if facts and facts.get("job_state") and facts["job_state"] not in UNFINISHED:
        return str(facts["job_state"])
    return job_state_from_exit_code(exit_code)


def requested_memory(ctx: JobContext, facts: dict[str, Any] | None, cpus: int | None, node_total: int | None,
                      errors: list[str]) -> tuple[int | None, str]:
    """The job's memory request on this node (bytes, how): slurmd's SLURM_MEM_PER_NODE /
    SLURM_MEM_PER_CPU where the Prolog/Epilog environment has them (never the job's own
    environment: its user can export anything there), else slurmctld's
    MinMemoryNode / MinMemoryCPU, else its TRES mem= / nodes; 0 = the whole node (TRES mem per node,
    else the node's MemTotal). A value Slurm never writes is
    recorded as an error and the request left unknown."""
    from slurm_energy.slurm.clients.formats import SlurmFormatError, requested_memory_bytes

    facts = facts or {}
    per_node: str | None
    per_cpu: str | None
    if ctx.mem_per_node or ctx.mem_per_cpu:
        per_node, per_cpu = ctx.mem_per_node, ctx.mem_per_cpu
        src = "slurmd's Prolog/Epilog environment SLURM_MEM_PER_NODE/CPU, MB"
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


def _tres_mem_per_node(facts: dict[str, Any]) -> int | None:
    """slurmctld's TRES mem= (the whole job's memory) / its node count, bytes; None if absent.
    Raises SlurmFormatError for a value Slurm never writes."""
    from slurm_energy.slurm.clients.formats import parse_memory

    got = parse_memory(facts.get("tres_mem"), "TRES mem") if facts.get("tres_mem") else None
    if not got:
        return None
    try:
        n = max(1, int(facts.get("num_nodes") or 1))
    except ValueError:
        n = 1
    return got[0] // n


def true_cpu_time(ctx: JobContext, rows: SampleTable, nodes: list[str], errors: list[str]) -> float | None:
    """The job's true CPU time on this node (sacct TotalCPU, CPU-s) when the sampler did not see the
    job's last stretch (killed sampler, job ending between polls or before the first one) and the
    job ran on this node only (TotalCPU is the whole job's); None otherwise (the stretch is then
    estimated, flagged ``tail_estimated``; why is appended to ``errors``). ``rows``: the node's
    SampleTable. Off the hook path: the detached finalizer only (runs ``sacct``)."""
    from slurm_energy.accounting.node_series import table_columns

    try:
        if len(rows) < 2 or table_columns(rows.sorted(), None).job_cpu[-1] is not None or len(nodes) != 1:
            return None
        from slurm_energy.slurm.clients.facts import current

        got, why = current().total_cpu(ctx.job_id)
    except Exception as e:
        got, why = None, f"unavailable: {type(e).__name__}: {e}"
    if got is None:
        errors.append(f"job CPU time after the sampler's last look: {why}; estimated (flag tail_estimated)")
    return got
