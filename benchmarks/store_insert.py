"""Store insert throughput: N synthetic one-node job records into SQLite and/or PostgreSQL.

    python benchmarks/store_insert.py --n 1000000 --sqlite /tmp/bench.db [--pg URL]

Prints, per backend: records, seconds, records/s for bulk inserts (Store.put_many, the path an
import or the benchmark uses) and for single upserts (Store.put, the Epilog's path; measured on
--n-put records). Records: one node, cpu/ram/gpu devices, user u<k%500>, account a<k%50>, array
tasks every 10th job, spread over one year.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from slurm_energy.model import DeviceEnergy, JobRecord, Method, NodeSummary
from slurm_energy.store import open_store

T0 = 1_700_000_000.0


def synth(k: int, base: JobRecord) -> JobRecord:
    """Job k: raw id 1000000+k, start T0 + k x 30 s (1M jobs ~ 1 year), 1 h long."""
    start = T0 + k * 30.0
    upd = dict(
        job_id=str(1_000_000 + k), user=f"u{k % 500}", uid=10000 + k % 500, account=f"a{k % 50}",
        start_time=start, end_time=start + 3600.0,
        it_kwh=0.5 + (k % 7) * 0.1, facility_kwh=(0.5 + (k % 7) * 0.1) * 1.5,
        co2e_kg=(0.5 + (k % 7) * 0.1) * 1.5 * 0.4,
    )  # fmt: skip
    if k % 10 == 0:
        upd.update(array_job_id=str(1_000_000 + k - k % 100), array_task_id=str(k % 100))
    return base.model_copy(update=upd)


def template() -> JobRecord:
    devs = [DeviceEnergy(device_class=c, device_id=f"{c}-0", node="n1", method=Method.TDP_ESTIMATE,
                         energy_j=1.0e6, coverage=1.0) for c in ("cpu", "ram", "gpu")]  # fmt: skip
    ns = NodeSummary(node="n1", job_id="0", start_time=T0, end_time=T0 + 3600, devices=devs)
    return JobRecord(cluster="bench", job_id="0", partition="batch", start_time=T0, end_time=T0 + 3600,
                     expected_nodes=["n1"], nodes=[ns], energy_it_j={"cpu": 1e6, "ram": 1e6, "gpu": 1e6})  # fmt: skip


def fill(url: str, n: int, n_put: int = 1000, fresh: bool = True) -> dict:
    """Insert n records (bulk) then n_put more one by one; return timings."""
    from slurm_energy.store.db import connect
    from slurm_energy.store.schema import TABLES

    if fresh:
        if url.startswith("sqlite:///"):
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(url[len("sqlite:///"):] + suffix):
                    os.unlink(url[len("sqlite:///"):] + suffix)
        else:
            db = connect(url)
            for t in TABLES:
                db.execute(f"DROP TABLE IF EXISTS {t}")
            db.close()
    st = open_store(url)
    base = template()
    t = time.perf_counter()
    st.put_many(synth(k, base) for k in range(n))
    bulk_s = time.perf_counter() - t
    t = time.perf_counter()
    for k in range(n, n + n_put):
        st.put(synth(k, base))
    put_s = time.perf_counter() - t
    count = st.count()
    st.close()
    return dict(n=n, bulk_s=bulk_s, bulk_rps=n / bulk_s if bulk_s else 0.0, n_put=n_put, put_s=put_s,
                put_rps=n_put / put_s if put_s else 0.0, count=count)  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000, help="records to bulk insert (default 1000000)")
    p.add_argument("--n-put", type=int, default=1000, help="records inserted one by one with Store.put")
    p.add_argument("--sqlite", default="/tmp/slurm-energy-bench.db", help="SQLite file ('' to skip)")
    p.add_argument("--pg", default=os.environ.get("SLURM_ENERGY_TEST_PG_URL", ""), help="PostgreSQL URL ('' to skip)")
    a = p.parse_args()
    urls = ([f"sqlite:///{a.sqlite}"] if a.sqlite else []) + ([a.pg] if a.pg else [])
    for u in urls:
        r = fill(u, a.n, a.n_put)
        name = u.split(":")[0].split("+")[0]
        print(f"{name}: bulk {r['n']} records in {r['bulk_s']:.1f} s = {r['bulk_rps']:.0f} records/s; "
              f"Store.put {r['n_put']} records in {r['put_s']:.2f} s = {r['put_rps']:.0f} records/s; rows {r['count']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
