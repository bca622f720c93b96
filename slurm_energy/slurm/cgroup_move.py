"""Move a detached helper (sampler, finalizer) out of the job's cgroups.

With ``PrologFlags=RunInJob`` (Slurm >= 24.05) slurmd runs the Prolog and Epilog inside the job's
extern step (``.../job_<id>/step_extern``), and a child inherits its parent's cgroups: the sampler
the Prolog starts, and the finalizer the Epilog starts, would be counted as the job's processes
(its CPU time, memory and PIDs), and would be killed with the extern step at the job's end -- the
finalizer before it stored anything. Without RunInJob the hooks run outside any job cgroup and
nothing is moved.

The hook moves the child (it runs as root) into the root of each hierarchy where the child sits
in a job's cgroup: cgroup v1 ``<mount>/<controller>/cgroup.procs``, v2 ``<mount>/cgroup.procs``
(or ``<mount>/unified/cgroup.procs`` on a hybrid host).
"""

from __future__ import annotations

import os
import re

#: a job's cgroup: v1 ``.../job_<id>/...``; v2 anything in Slurm's stepd scope, which is
#: ``system.slice/slurmstepd.scope`` or, on builds with several slurmd per host (Debian's),
#: ``system.slice/<NodeName>_slurmstepd.scope`` (SchedMD/slurm src/plugins/cgroup/v2/cgroup_v2.c,
#: ``_set_int_cg_ns``; seen in the project's VM, tests/slurm/data/cgroup-v2-vm.txt), the job directory
#: in it named ``job_<id>`` or, from Slurm 26.05, by the run's SLUID
_JOB_DIR = re.compile(r"/job_\d+(/|$)|/([^/]+_)?slurmstepd\.scope/")


def job_cgroup_exits(proc_cgroup: str, cgroup_root: str = "/sys/fs/cgroup") -> list[str]:
    """The ``cgroup.procs`` files to write a PID into to take it out of a Slurm job's cgroups.

    Args:
        proc_cgroup: text of ``/proc/<pid>/cgroup`` (lines ``id:controllers:path``).
        cgroup_root: where the cgroup hierarchies are mounted.
    Returns:
        One path per hierarchy whose ``path`` is inside a job (``/job_<id>`` or a
        ``slurmstepd.scope``), pointing at that hierarchy's root; [] when the process is in no job.
    """
    out = []
    for line in proc_cgroup.splitlines():
        hid, _, rest = line.partition(":")
        ctrls, _, path = rest.partition(":")
        if not _JOB_DIR.search(path + "/"):
            continue
        if hid == "0" and ctrls == "":  # the v2 (unified) hierarchy
            cands = [cgroup_root, os.path.join(cgroup_root, "unified")]
            cands = [c for c in cands if os.path.isfile(os.path.join(c, "cgroup.controllers"))]
        else:
            names = [ctrls.replace("name=", "")] + ctrls.replace("name=", "").split(",")
            cands = [os.path.join(cgroup_root, n) for n in names if n]
        for c in cands:
            if os.path.isdir(c):
                out.append(os.path.join(c, "cgroup.procs"))
                break
    return out


def leave_job_cgroups(pid: int, cgroup_root: str = "/sys/fs/cgroup", proc_root: str = "/proc") -> list[str]:
    """Move ``pid`` out of any Slurm job cgroup (see :func:`job_cgroup_exits`); needs root.

    Returns the ``cgroup.procs`` files written. Raises OSError when ``/proc/<pid>/cgroup`` cannot be
    read or a move is refused; the caller logs it (the helper then stays in the job's cgroup)."""
    # UTF-8 (loaded already) rather than ascii: one codec module less on the hooks' path; paths are ASCII
    with open(os.path.join(proc_root, str(pid), "cgroup"), encoding="utf-8", errors="replace") as f:
        targets = job_cgroup_exits(f.read(), cgroup_root)
    for t in targets:
        with open(t, "w") as f:
            f.write(f"{pid}\n")
    return targets
