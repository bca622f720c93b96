"""`jobenergy -j` latency on a large store (SQLite and PostgreSQL), and `sacct -j` for comparison.

    python benchmarks/jobenergy_latency.py --n 1000000 [--pg URL] [--no-fill]

Fills each store with N synthetic jobs (benchmarks/store_insert.py; prints insert throughput), then
times `jobenergy -j <id>` for --reps random raw ids, one array id (whole array, 10 tasks) and one
array task: in-process (main(), store opened each call, as the CLI does) and as a fresh process
(`python -m slurm_energy.cli.jobenergy`, interpreter start included). When the test cluster runs
(scripts/testcluster.sh status), also times `sacct -j <id>` on its last job. Prints medians in ms.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

from store_insert import fill  # noqa: E402

from slurm_energy.cli.jobenergy import main as jobenergy  # noqa: E402


def _time_inproc(argv, reps):
    ts = []
    for _ in range(reps):
        buf = io.StringIO()
        t = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            rc = jobenergy(argv)
        ts.append(time.perf_counter() - t)
        assert rc == 0, (argv, rc)
    return statistics.median(ts) * 1000


def _time_proc(cmd, reps, env=None, user=None):
    """Median ms of ``cmd`` run ``reps`` times (as ``user``, a login name, when given)."""
    drop = None
    if user:
        import pwd

        pw = pwd.getpwnam(user)

        def drop():
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/",  # PYTHONPATH picks the checkout
                           preexec_fn=drop)
        ts.append(time.perf_counter() - t)
        assert p.returncode == 0, p.stderr
    return statistics.median(ts) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="synthetic jobs per store (default 1000000)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sqlite", default="/tmp/slurm-energy-bench.db")
    ap.add_argument("--pg", default=os.environ.get("SLURM_ENERGY_TEST_PG_URL", ""))
    ap.add_argument("--no-fill", action="store_true", help="reuse stores filled by an earlier run")
    ap.add_argument("--as-user", default="", help="also time `jobenergy` as this ordinary user (SQLite: the "
                    "lock-free reader a user gets, the -shm being root's 0600)")
    ap.add_argument("--baseline", default="", help="with --as-user: another checkout (e.g. a worktree of main) "
                    "timed the same way in the same run; its users read with mode=ro, so -wal/-shm are made "
                    "0644 (what it leaves) for its runs, 0600 again after")
    a = ap.parse_args()
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(f"admins: [{a.as_user}]\n" if a.as_user else "{}\n")  # the user sees every job, as root does
    cfg.close()
    os.chmod(cfg.name, 0o644)
    os.environ["SLURM_ENERGY_CONFIG"] = cfg.name
    env = dict(os.environ, PYTHONPATH=REPO)
    print(f"store size: {a.n} jobs; {a.reps} repetitions; medians")
    urls = ([f"sqlite:///{a.sqlite}"] if a.sqlite else []) + ([a.pg] if a.pg else [])
    rnd = random.Random(1)
    for url in urls:
        name = url.split(":")[0].split("+")[0]
        if not a.no_fill:
            r = fill(url, a.n, 1000)
            print(f"{name}: insert {r['n']} in {r['bulk_s']:.1f} s ({r['bulk_rps']:.0f}/s bulk), "
                  f"Store.put {r['put_rps']:.0f}/s")
        ids = [str(1_000_000 + rnd.randrange(a.n)) for _ in range(a.reps)]
        ts = []
        for jid in ids:
            ts.append(_time_inproc(["--store", url, "-P", "-j", jid], 1))
        print(f"{name}: jobenergy -j <raw id>       in-process {statistics.median(ts):7.1f} ms")
        arr = str(1_000_000 + (a.n // 2) - (a.n // 2) % 100)
        print(f"{name}: jobenergy -j {arr} (array) in-process {_time_inproc(['--store', url, '-P', '-j', arr], a.reps):7.1f} ms")
        print(f"{name}: jobenergy -j {arr}_10     in-process "
              f"{_time_inproc(['--store', url, '-P', '-j', arr + '_10'], a.reps):7.1f} ms")
        cmd = [sys.executable, "-m", "slurm_energy.cli.jobenergy", "--store", url, "-P", "-j", ids[0]]
        print(f"{name}: jobenergy -j <raw id>       new process {_time_proc(cmd, max(3, a.reps // 4), env):7.1f} ms")
        if a.as_user and name == "sqlite":
            os.chmod(os.path.dirname(a.sqlite) or ".", os.stat(os.path.dirname(a.sqlite) or ".").st_mode | 0o005)
            reps = max(5, a.reps // 2)
            mine = _time_proc(cmd, reps, env, a.as_user)
            print(f"{name}: jobenergy -j <raw id> as {a.as_user} new process {mine:7.1f} ms (this checkout)")
            if a.baseline:
                for suffix in ("-wal", "-shm"):
                    os.chmod(a.sqlite + suffix, 0o644)
                base = _time_proc(cmd, reps, dict(env, PYTHONPATH=a.baseline), a.as_user)
                for suffix in ("-wal", "-shm"):
                    os.chmod(a.sqlite + suffix, 0o600)
                print(f"{name}: jobenergy -j <raw id> as {a.as_user} new process {base:7.1f} ms ({a.baseline}); "
                      f"ratio {mine / base:.2f}")
    tc = os.path.join(REPO, "scripts", "testcluster.sh")
    if os.path.exists(tc) and subprocess.run([tc, "status"], capture_output=True).returncode == 0:
        out = subprocess.run([tc, "env"], capture_output=True, text=True).stdout
        conf = out.strip().split("=", 1)[1]
        senv = dict(os.environ, SLURM_CONF=conf)
        last = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now-7days"], capture_output=True,
                              text=True, env=senv).stdout.split()
        if last:
            jid = last[-1]
            print(f"sacct -j {jid} (test cluster, slurmdbd+MariaDB, few jobs)  "
                  f"{_time_proc(['sacct', '-j', jid], max(3, a.reps // 4), senv):7.1f} ms")
    else:
        print("sacct: test cluster not running; not measured")
    os.unlink(cfg.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
