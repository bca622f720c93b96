"""CPU time of the Prolog and Epilog scripts of several installations, interleaved (issue 12).

A hook's wall time in a job burst is mostly its own CPU stretched by the machine's load, so this
measures the CPU (user + system of ``sh`` + ``timeout`` + Python, from ``getrusage`` of the waited
children), which the load changes little. Each interpreter's ``slurm-energy install`` writes its
hooks into a throwaway directory with a site config of its own (its own spool, log and store); then N jobs run
Prolog, 0.3 s, Epilog for each installation in turn. The first job of each installation is left
out (it writes the resolved config copy and, since issue 12, the node's counter-file list).
Run as root (the hooks make root-only spools and chown the marks directory):

    python3 benchmarks/hook_cpu.py --python /opt/old/bin/python,/opt/new/bin/python [--jobs 15]
    python3 benchmarks/hook_cpu.py --tree /work/main,. [--jobs 15]   # source trees, one interpreter
    python3 benchmarks/hook_cpu.py --samplers job,node                # the two samplers, this installation

``--tree``: each installation's package comes from that source tree (its install is run with
``PYTHONPATH=<tree>``, so the hook scripts' entry points into the tree), all with ``--python``'s
first interpreter (default this one). Prints, per installation, the median CPU and wall time (ms)
of each hook.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def _run(argv: list[str], env: dict) -> tuple[float, float]:
    """(CPU ms, wall ms) of one hook script run to its end."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    subprocess.run(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime), 1000 * wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="comma-separated interpreters of the installations")
    ap.add_argument("--tree", default="", help="comma-separated source trees (one interpreter: --python's first)")
    ap.add_argument("--jobs", type=int, default=15)
    ap.add_argument("--samplers", default="", help="comma-separated sampling.sampler values (job,node): one "
                    "installation each, --python's first interpreter")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="se-hookcpu-")
    trees = [os.path.abspath(t) for t in args.tree.split(",") if t]
    kinds = [k for k in args.samplers.split(",") if k]
    pys = [args.python.split(",")[0]] * len(trees or kinds) if trees or kinds else args.python.split(",")
    names = trees or [f"sampling.sampler: {k}" for k in kinds] or pys
    for i, py in enumerate(pys):
        # a site config, spool, log and store per installation: the resolved config copy is keyed on
        # the code's config schema, so two installations sharing one would each load it in full
        site = os.path.join(tmp, f"site{i}.yaml")
        with open(site, "w") as f:
            f.write(f"paths:\n  spool_dir: {tmp}/spool{i}\n  log_dir: {tmp}/log{i}\n"
                    f"  store_url: sqlite:///{tmp}/jobs{i}.db\n"
                    + (f"sampling:\n  sampler: {kinds[i]}\n" if kinds else ""))
        env = dict(os.environ, PYTHONPATH=trees[i]) if trees else None
        subprocess.run([py, "-m", "slurm_energy.cli.main", "install", "--hooks-dir", f"{tmp}/hooks{i}",
                        "--config", site], check=True, capture_output=True, cwd="/", env=env)
    res: dict[int, dict[str, list[float]]] = {i: {} for i in range(len(pys))}
    job = 700000
    for n in range(args.jobs + 1):
        for i in range(len(pys)):
            job += 1
            env = {"SLURM_JOB_ID": str(job), "SLURM_JOB_UID": "65534", "SLURM_JOB_GID": "65534",
                   "SLURM_JOB_USER": "nobody", "SLURMD_NODENAME": "b1", "SLURM_NODELIST": "b1",
                   "SLURM_CLUSTER_NAME": "bench", "SLURM_JOB_CPUS_PER_NODE": "1", "SLURM_JOB_WORK_DIR": tmp,
                   "SLURM_JOB_EXIT_CODE2": "0:0", "SLURM_ENERGY_MARKS_DIR": f"{tmp}/marks"}
            for which in ("prolog", "epilog"):
                cpu, wall = _run(["/bin/sh", f"{tmp}/hooks{i}/{which}"], env)
                if n:  # the first job of each: config copy and counter-file list made
                    res[i].setdefault(which, []).append(cpu)
                    res[i].setdefault(which + "_wall", []).append(wall)
                if which == "prolog":
                    time.sleep(0.3)
    for i, name in enumerate(names):
        r = {k: statistics.median(v) for k, v in res[i].items()}
        print(f"{name}: Prolog CPU {r['prolog']:.1f} ms (wall {r['prolog_wall']:.0f} ms), "
              f"Epilog CPU {r['epilog']:.1f} ms (wall {r['epilog_wall']:.0f} ms); median of {args.jobs}")
    time.sleep(3)  # the last finalizers; the directory is left for a look: {tmp}
    print(f"hooks, spool and logs in {tmp}")


if __name__ == "__main__":
    main()
