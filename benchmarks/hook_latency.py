"""Wall time of the installed Prolog and Epilog scripts as slurmd runs them (root, no PATH).

slurmd drains a node whose Prolog/Epilog fails; the hooks' own budget is 2 s (guarded by
`timeout -s KILL 1.9`). This runs the real hook scripts N times against a throwaway spool, with a
job process carrying SLURM_JOB_ID (the no-cgroup path), and prints p50 / p95 / max wall seconds.

    /opt/slurm-energy/venv/bin/python benchmarks/hook_latency.py [N]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/opt/slurm-energy/venv/bin/python"


def main(n: int = 10) -> None:
    tmp = tempfile.mkdtemp(prefix="se-hookbench-")
    with open(os.path.join(tmp, "site.yaml"), "w") as f:
        f.write(f"paths:\n  spool_dir: {tmp}/spool\n  store_url: sqlite:///{tmp}/jobs.db\n  log_dir: {tmp}/log\n"
                f"hardware:\n  rapl_root: {tmp}/none\n")
    subprocess.run([PY, "-m", "slurm_energy.cli.main", "install", "--hooks-dir", f"{tmp}/hooks",
                    "--config", f"{tmp}/site.yaml"], check=True, capture_output=True, cwd="/")
    times = {"prolog": [], "epilog": []}
    for i in range(n):
        env = {"SLURM_JOB_ID": str(900000 + i), "SLURM_JOB_UID": "65534", "SLURM_JOB_GID": "65534",
               "SLURM_JOB_USER": "nobody", "SLURM_JOB_WORK_DIR": tmp, "SLURMD_NODENAME": "b1",
               "SLURM_NODELIST": "b1", "SLURM_JOB_CPUS_PER_NODE": "1"}
        for which in ("prolog", "epilog"):
            t = time.monotonic()
            r = subprocess.run([f"{tmp}/hooks/{which}"], env=env, capture_output=True)
            times[which].append(time.monotonic() - t)
            assert r.returncode == 0
            if which == "prolog":
                time.sleep(1.0)  # the "job"
    print(f"hook wall time over {n} jobs (s), budget 2.0:")
    for which, ts in times.items():
        ts = sorted(ts)
        p95 = ts[min(len(ts) - 1, int(0.95 * len(ts)))]
        print(f"  {which:6s} p50 {statistics.median(ts):.3f}  p95 {p95:.3f}  max {ts[-1]:.3f}  "
              f"(max / budget = {ts[-1] / 2.0:.2f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
