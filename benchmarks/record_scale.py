"""A job's record against its nodes and samples: size, merge, store, report and ``jobenergy``, with
a baseline commit's code side by side in the same run.

Synthetic node files as large as real ones, made by the product's own pipeline: the sample file of a
``--hours`` job sampled every 5 s on a node with 2 RAPL packages, their 2 DRAM zones and 8 NVIDIA
GPUs (``tests/helpers/samplefile_rows.node_rows``: the rows the real readers write, written by the real
SampleWriter), summarised by ``pipeline.measure_node`` into a node record (4 such nodes, different
seeds; a job of N nodes cycles through them under N node names). Then, for each N and each tree
(this checkout and ``--baseline``, a git worktree of that commit made for the run), each step in its
own process (CPU seconds by process time, peak RSS by ``getrusage``; the machine is shared):

* nodes: the N node records written into a results directory (``results.write_node_record``) and
  one *waiting* finalizer's check -- the (N-1)-th node's ``collect_node_records`` with N-1 files
  present (the merge work summed over a job's nodes is about N x this);
* final: the last node's finalizer: ``collect_node_records`` (all present) + ``finalise_job`` (merge,
  totals), the record's JSON size, ``Store.put`` into SQLite (and PostgreSQL with ``--pg URL``), the
  HTML + CSV report, ``retire_run``;
* ``jobenergy ID``, ``-l`` and ``--json`` as fresh processes on the SQLite store (CPU and wall
  time, peak RSS, bytes out);
* progress: one node's interim update put into a SQLite store holding the other N-1 nodes' progress
  (what each node's sampler does every ``sampling.interim_s``): their node rows where the store has
  per-node progress rows, else (a baseline before them) the job's one running record.

The baseline runs only up to ``--baseline-max-nodes`` (it holds every node's full trace: 1.3 MB per
node-day). At N <= 64 the run asserts that the job's energies (per class, per node and device, kWh,
kgCO2e) are today's within 1e-9 relative.

    python benchmarks/record_scale.py [--nodes 1,16,64,256] [--hours 24] [--baseline 141b60c]
                                      [--baseline-max-nodes 64] [--pg URL] [--html DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
INTERVAL_S = 5.0
TEMPLATES = 4
CLUSTER, JOB = "bench", "4242"


def _node(k: int) -> str:
    return f"gpu{k:04d}"


# -- workers: run in a fresh interpreter with the tree under test first on sys.path -------------------

def w_samples(a) -> dict:
    """Sample files (new format, real SampleWriter) and the static inventory of TEMPLATES nodes."""
    sys.path.append(REPO)  # this checkout's tests.helpers; the tree under test stays first for slurm_energy
    from slurm_energy.sampling.samplefile import SampleWriter
    from tests.helpers.samplefile_rows import node_rows

    n = int(a.hours * 3600 / INTERVAL_S) + 1
    for s in range(TEMPLATES):
        rows, static = node_rows(n, INTERVAL_S, seed=12 + s, dram=True)
        w = SampleWriter(os.path.join(a.dir, f"samples-{s}"), fsync=False)
        for r in rows:
            w.write(r)
        w.close()
        with open(os.path.join(a.dir, "static.json"), "w") as f:
            json.dump(static, f)
        with open(os.path.join(a.dir, "span.json"), "w") as f:
            json.dump([rows[0]["t"], rows[-1]["t"]], f)
    return {"rows": n}


def w_template(a) -> dict:
    """Each template node's record, by pipeline.measure_node, as JSON files in ``a.out``."""
    from slurm_energy.config import SiteConfig
    from slurm_energy.core import JobMeta
    from slurm_energy.pipeline import NodeObservation, measure_node
    from slurm_energy.sampling.samplefile import read_sample_table

    static = json.load(open(os.path.join(a.dir, "static.json")))
    t0, t1 = json.load(open(os.path.join(a.dir, "span.json")))
    expected = [_node(k) for k in range(a.n)]
    c = time.process_time()
    sizes = []
    for s in range(TEMPLATES):
        obs = NodeObservation(f"tmpl{s}", read_sample_table(os.path.join(a.dir, f"samples-{s}")), static, t0, t1,
                              cpus_alloc=64)
        rec = measure_node(obs, JobMeta(job_id=JOB, cluster=CLUSTER, user="alice"), SiteConfig(),
                           interval_s=INTERVAL_S, expected_nodes=expected)
        text = rec.model_dump_json()
        sizes.append(len(text))
        with open(os.path.join(a.out, f"tmpl-{s}.json"), "w") as f:
            f.write(text)
    return {"summary_cpu_s": (time.process_time() - c) / TEMPLATES, "node_record_bytes": max(sizes)}


def _node_records(a):
    from slurm_energy.model import JobRecord

    tmpl = [JobRecord.model_validate_json(open(os.path.join(a.out, f"tmpl-{s}.json")).read()) for s in range(TEMPLATES)]
    expected = [_node(k) for k in range(a.n)]
    for k in range(a.n):
        r = tmpl[k % TEMPLATES].model_copy(deep=True)
        r.expected_nodes = expected
        r.nodes[0].node = _node(k)
        for d in r.nodes[0].devices:
            d.node = _node(k)
        yield r


def w_nodes(a) -> dict:
    """The N node files; the (N-1)-th finalizer's collect (N-1 files present) timed."""
    from slurm_energy.slurm.jobend.results import collect_node_records, write_node_record

    recs = _node_records(a)
    expected = [_node(k) for k in range(a.n)]
    last = None
    wait_s = None
    for k, r in enumerate(recs):
        if k == a.n - 1:
            last = r
            break
        write_node_record(a.results, r)
    if a.n > 1:
        c = time.process_time()
        got = collect_node_records(a.results, CLUSTER, JOB, 0, expected)
        wait_s = time.process_time() - c
        assert got is None, "a node is missing: the collect must wait"
    assert last is not None
    write_node_record(a.results, last)
    return {"waiting_collect_cpu_s": wait_s}


def w_final(a) -> dict:
    """The last finalizer: collect + finalise_job + JSON size + store + report + retire_run."""
    from slurm_energy.config import SiteConfig
    from slurm_energy.pipeline import finalise_job
    from slurm_energy.reporting.report import render_csv, render_html
    from slurm_energy.slurm.jobend.results import collect_node_records, retire_run
    from slurm_energy.store import open_store

    out: dict = {}
    expected = [_node(k) for k in range(a.n)]
    c = time.process_time()
    records = collect_node_records(a.results, CLUSTER, JOB, 0, expected)
    assert records is not None and len(records) == a.n
    out["collect_cpu_s"] = time.process_time() - c
    c = time.process_time()
    final = finalise_job(records, SiteConfig())
    out["merge_cpu_s"] = time.process_time() - c
    del records
    out["record_bytes"] = len(final.model_dump_json())
    for name, url in (("sqlite", a.store), ("pg", a.pg)):
        if not url:
            continue
        c, w = time.process_time(), time.perf_counter()
        st = open_store(url)
        try:
            st.put(final)
        finally:
            st.close()
        out[f"store_{name}_cpu_s"] = time.process_time() - c
        out[f"store_{name}_wall_s"] = time.perf_counter() - w  # the server's work too
    c = time.process_time()
    html, csv = render_html(final), render_csv(final)
    out["report_cpu_s"] = time.process_time() - c
    out["report_bytes"] = len(html.encode()) + len(csv.encode())
    if a.html:
        with open(a.html, "w") as f:
            f.write(html)
    c = time.process_time()
    retire_run(a.results, final)
    out["retire_cpu_s"] = time.process_time() - c
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["energies"] = {
        "energy_it_j": final.energy_it_j, "it_kwh": final.it_kwh, "co2e_kg": final.co2e_kg,
        "devices": {f"{ns.node}/{d.device_id}": d.energy_j for ns in final.nodes for d in ns.devices},
        "hourly": {ns.node: ns.hourly_energy_j for ns in final.nodes[:2]},
    }
    return out


def w_progress(a) -> dict:
    """One node's progress update (the sampler's interim flush, ``StoreSink``'s put with
    ``merge_interim``) into a store that holds the job's running record of the other N-1 nodes."""
    from slurm_energy.accounting.merge import merge_interim
    from slurm_energy.config import SiteConfig
    from slurm_energy.model import Status
    from slurm_energy.pipeline import finalise_job
    from slurm_energy.store import open_store, schema

    site = SiteConfig()
    recs = list(_node_records(a))
    for r in recs:  # an interim view: running, no trace (the sampler's flush has none)
        r.status = r.nodes[0].status = Status.RUNNING
        r.nodes[0].power_trace = []
    st = open_store(a.store)
    try:
        if schema.has_table(st.db, "running_nodes"):  # per-node progress rows: the other nodes' own puts
            for r in recs[:-1]:
                st.put(finalise_job([r], site, merge=False).model_copy(update={"status": Status.RUNNING}))
        elif len(recs) > 1:  # before: the job's one running record of the other N-1 nodes
            st.put(finalise_job(recs[:-1], site).model_copy(update={"status": Status.RUNNING}))
        new = finalise_job([recs[-1]], site, merge=False).model_copy(update={"status": Status.RUNNING})
        c = time.process_time()
        st.put(new, merge_running=merge_interim)
        return {"progress_put_cpu_s": time.process_time() - c}
    finally:
        st.close()


WORKERS = {"samples": w_samples, "template": w_template, "nodes": w_nodes, "final": w_final,
           "progress": w_progress}


# -- driver ------------------------------------------------------------------------------------------

def _run(tree: str, step: str, **kw) -> dict:
    """One worker step in a fresh interpreter with ``tree`` first on the path; its result and peak RSS."""
    argv = [sys.executable, os.path.abspath(__file__), "--worker", step, "--tree", tree]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    env = dict(os.environ, PYTHONPATH=tree)
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/")
    out, err = p.communicate()
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{step} on {tree} failed ({p.returncode}):\n{err.decode()[-3000:]}")
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["wall_s"] = wall
    return res


def _jobenergy(tree: str, store: str, args: list[str]) -> dict:
    """``jobenergy ARGS`` as a fresh process: wall s, peak RSS MB (wait4's rusage), bytes out."""
    env = dict(os.environ, PYTHONPATH=tree)
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "slurm_energy.cli.jobenergy", "--store", store, *args],
                             stdout=out, stderr=subprocess.DEVNULL, env=env, cwd="/")
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        size = out.tell()
    if p.returncode != 0:
        raise RuntimeError(f"jobenergy {args} on {tree}: exit {p.returncode}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "out_bytes": size}


def _same_energies(a: dict, b: dict, rel: float = 1e-9) -> list[str]:
    """The differences between two runs' energies beyond ``rel``; empty when identical within rounding."""
    diffs = []

    def close(x, y):
        return (x is None) == (y is None) and (x is None or abs(x - y) <= rel * max(abs(x), abs(y), 1e-300))

    for k in ("it_kwh", "co2e_kg"):
        if not close(a[k], b[k]):
            diffs.append(f"{k}: {a[k]} vs {b[k]}")
    for part in ("energy_it_j", "devices"):
        if set(a[part]) != set(b[part]):
            diffs.append(f"{part}: keys differ")
        diffs += [f"{part}[{k}]: {a[part][k]} vs {b[part][k]}" for k in a[part] if not close(a[part][k], b[part].get(k))]
    for node, hours in a["hourly"].items():
        diffs += [f"hourly {node} {h}" for h in hours if not close(hours[h], b["hourly"][node].get(h))]
    return diffs


def _mb(x: float) -> str:
    return f"{x / 1e6:.2f} MB" if x >= 1e5 else f"{x / 1e3:.1f} kB"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="1,16,64,256")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--baseline", default="141b60c", help="commit of today's code ('' = none)")
    ap.add_argument("--baseline-max-nodes", type=int, default=64)
    ap.add_argument("--pg", default="", help="PostgreSQL URL to store into as well (scripts/postgres.sh start)")
    ap.add_argument("--html", default="", help="directory to keep each run's HTML report in")
    ap.add_argument("--json-out", default="", help="write all results here as JSON")
    # worker arguments
    ap.add_argument("--worker", default="")
    ap.add_argument("--tree", default=REPO)
    ap.add_argument("--dir", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--results", default="")
    ap.add_argument("--store", default="")
    a = ap.parse_args(argv)
    if a.worker:
        sys.path.insert(0, a.tree)
        if a.worker != "final":
            a.html = ""
        print(json.dumps(WORKERS[a.worker](a)))
        return 0

    nodes = [int(x) for x in a.nodes.split(",")]
    tmp = tempfile.mkdtemp(prefix="record-scale-")
    trees = {"this": REPO}
    try:
        if a.baseline:
            base = os.path.join(tmp, "baseline")
            subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", base, a.baseline], check=True,
                           capture_output=True)
            trees["baseline"] = base
        sdir = os.path.join(tmp, "samples")
        os.makedirs(sdir)
        got = _run(REPO, "samples", dir=sdir, hours=a.hours)
        print(f"{a.hours:g} h at {INTERVAL_S:g} s: {got['rows']} sample rows per node; 2 RAPL packages + 2 DRAM + "
              f"8 GPUs; {TEMPLATES} node templates by measure_node; CPU s (process time), RSS peak per process")
        results: dict = {}
        for n in nodes:
            for label, tree in trees.items():
                if label == "baseline" and n > a.baseline_max_nodes:
                    continue
                run = os.path.join(tmp, f"{label}-{n}")
                os.makedirs(os.path.join(run, "tmpl"))
                tm = _run(tree, "template", dir=sdir, out=os.path.join(run, "tmpl"), n=n, hours=a.hours)
                store = f"sqlite:///{run}/jobs.db"
                nd = _run(tree, "nodes", out=os.path.join(run, "tmpl"), n=n, results=os.path.join(run, "results"))
                html = os.path.join(a.html, f"report-{label}-{n}.html") if a.html else ""
                if html:
                    os.makedirs(a.html, exist_ok=True)
                fin = _run(tree, "final", n=n, results=os.path.join(run, "results"), store=store, pg=a.pg, html=html)
                if a.pg:  # the next run stores the same key: drop this one from PostgreSQL
                    _pg_delete(a.pg)
                je = {name: _jobenergy(tree, store, args) for name, args in
                      (("id", [JOB]), ("long", ["-l", JOB]), ("json", ["--json", JOB]))}
                pr = _run(tree, "progress", out=os.path.join(run, "tmpl"), n=n, store=f"sqlite:///{run}/progress.db")
                results[(label, n)] = {"template": tm, "nodes": nd, "final": fin, "jobenergy": je, "progress": pr}
                _print(label, n, results[(label, n)], a.pg)
                shutil.rmtree(run)
            if ("baseline", n) in results and n <= 64:
                diffs = _same_energies(results[("this", n)]["final"]["energies"],
                                       results[("baseline", n)]["final"]["energies"])
                print(f"  {n} nodes: energies identical to the baseline's within 1e-9: {not diffs}")
                assert not diffs, diffs[:10]
                b, t = results[("baseline", n)]["final"], results[("this", n)]["final"]
                print(f"  {n} nodes: ratios this/baseline: record {t['record_bytes'] / b['record_bytes']:.4f}, "
                      f"merge {t['merge_cpu_s'] / max(b['merge_cpu_s'], 1e-9):.3f}, "
                      f"RSS {t['peak_rss_mb'] / b['peak_rss_mb']:.3f}")
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump({f"{k[0]}-{k[1]}": v for k, v in results.items()}, f, indent=1, default=str)
    finally:
        if "baseline" in trees:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", trees["baseline"]], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _pg_delete(url: str) -> None:
    """Drop the benchmark job from the PostgreSQL store (the next run stores the same key)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as c:
        ids = "SELECT id FROM job_records WHERE job_id = %s"
        c.execute(f"DELETE FROM job_hours WHERE job_row_id IN ({ids})", (JOB,))
        c.execute(f"DELETE FROM job_json WHERE id IN ({ids})", (JOB,))
        c.execute("DELETE FROM job_records WHERE job_id = %s", (JOB,))


def _je(r: dict) -> str:
    return f"{r.get('cpu_s', float('nan')):.2f}/{r['wall_s']:.2f} s/{r['rss_mb']:.0f} MB"


def _print(label: str, n: int, r: dict, pg: str) -> None:
    f, nd, je = r["final"], r["nodes"], r["jobenergy"]
    wait = nd["waiting_collect_cpu_s"]
    pgs = (f", PostgreSQL {f['store_pg_cpu_s']:.2f} s (wall {f.get('store_pg_wall_s', float('nan')):.2f} s)"
           if pg else "")
    print(f"{label:>8} {n:5d} nodes: record {_mb(f['record_bytes'])} (node file {_mb(r['template']['node_record_bytes'])});"
          f" waiting finalizer's collect {'-' if wait is None else f'{wait * 1e3:.1f} ms'};"
          f" last finalizer: collect {f['collect_cpu_s']:.2f} s, merge+totals {f['merge_cpu_s']:.2f} s,"
          f" store SQLite {f['store_sqlite_cpu_s']:.2f} s{pgs}, report {f['report_cpu_s']:.2f} s"
          f" ({_mb(f['report_bytes'])}), retire {f['retire_cpu_s']:.2f} s, peak RSS {f['peak_rss_mb']:.0f} MB;"
          f" jobenergy (CPU s/wall s/peak RSS) ID {_je(je['id'])}, -l {_je(je['long'])},"
          f" --json {_je(je['json'])}/{_mb(je['json']['out_bytes'])} out;"
          f" a progress update (interim put, SQLite) {r['progress']['progress_put_cpu_s']:.2f} s",
          flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
