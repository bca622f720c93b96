"""Spool trees for the job-end tests, built by :class:`~slurm_energy.slurm.attempt.Attempt`'s own
methods (as the Prolog, the Epilog and the finalizer write them), never by hand."""

from __future__ import annotations

from slurm_energy.slurm.attempt import Attempt, AttemptState, SamplerEnd, enqueue_finalize
from slurm_energy.slurm.context import JobContext

#: the node all trees are on; each state's attempt is job 700 + its index, restart 0
NODE = "n1"
T_PROLOG, T_END = 1_796_034_000.0, 1_796_034_060.0


def started(spool_dir: str, job_id: str, node: str = NODE) -> Attempt:
    """What a Prolog leaves: the attempt's directory and its context file."""
    ctx = JobContext(job_id=job_id, uid=0, gid=0, node=node, nodelist=node, prolog_time=T_PROLOG)
    a = Attempt(spool_dir, job_id, 0, node).ensure()
    with open(a.context, "w", encoding="utf-8") as f:
        f.write(ctx.to_json())
    return a




def build_trees(sd: str) -> dict[AttemptState, Attempt]:
    """One attempt in each state, in the spool ``sd``."""
    out: dict[AttemptState, Attempt] = {}
    out[AttemptState.STARTED] = started(sd, "700")
    a = started(sd, "701")
    a.mark_epilog(T_END, SamplerEnd.TERMINATED, "0:0")
    out[AttemptState.EPILOG_DONE] = a
    a = started(sd, "702")
    a.mark_epilog(T_END, SamplerEnd.KILLED, "0:9")
    enqueue_finalize(a, T_END, "0:9", SamplerEnd.KILLED)
    out[AttemptState.QUEUED] = a
    a = started(sd, "703")
    a.mark_epilog(T_END, SamplerEnd.TERMINATED, "0:0")
    a.mark_finalized(T_END + 5)
    out[AttemptState.FINALIZED] = a
    a = started(sd, "704")
    import shutil

    shutil.rmtree(a.dir)  # pruned
    out[AttemptState.RETIRED] = a
    return out
