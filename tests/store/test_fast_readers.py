"""The light read paths (store/fast.py: sqlite3, libpq through ctypes) against the SQLAlchemy path,
on SQLite and PostgreSQL: the same rows, the same CLI output, and neither SQLAlchemy, pydantic,
psycopg nor pandas imported by `jobenergy` (table, -j, -S/-E, today's window) or `rollup
--month` (table, csv, json). Speed is measured by benchmarks/store_rollup.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jobrecord_factory import finished, node_record
from slurm_energy.cli import main as slurm_energy_cli
from slurm_energy.cli.jobenergy import main as jobenergy
from slurm_energy.jobid import parse_jobids
from slurm_energy.reporting.rollup_table import month_bounds, rows_frame
from slurm_energy.store import fast, libpq
from slurm_energy.store.rollup import month_rollup
from store_backends import PG_SKIP, PG_URL, store, store_url  # noqa: F401  (fixtures)

H = 3600.0
T_OCT = 1_790_812_800.0  # 2026-10-01T00:00Z
HEAVY = ("sqlalchemy", "pydantic", "psycopg", "pandas")


def _records():
    """Jobs across 2026-09-30..10-02 (one across the month's start), users u0..u2, a GPU job, an
    unmeasured RAM, a requeued job (two attempts), an array task, a user name with a comma."""
    recs = []
    for k in range(12):
        start = T_OCT - 5 * H + k * 3 * H
        recs.append(finished(node_record(job_id=str(500 + k), start=start, end=start + 2 * H + k * 60,
                                         cpu_j=3.6e6 * (k + 1), ram_j=None if k == 4 else 3.6e5,
                                         gpu_j=1.8e6 if k % 3 == 0 else None, user=f"u{k % 3}",
                                         account="chem" if k % 2 else "", exit_code="0:0" if k != 5 else "1:0")))
    recs.append(finished(node_record(job_id="700", start=T_OCT + H, end=T_OCT + 1.5 * H, restart_count=0)))
    recs.append(finished(node_record(job_id="700", start=T_OCT + 2 * H, end=T_OCT + 3 * H, restart_count=1,
                                     cpu_j=7.2e6)))
    recs.append(finished(node_record(job_id="803", array_job_id="800", array_task_id="3", start=T_OCT,
                                     end=T_OCT + 60, user="o'neil, jr")))
    return recs


FILTERS = [
    {}, {"specs": parse_jobids(["503"])}, {"specs": parse_jobids(["700"])}, {"specs": parse_jobids(["800_3", "505"])},
    {"users": ["u1"]}, {"accounts": ["chem"], "start": T_OCT, "end": T_OCT + 86400},
    {"start": T_OCT + 2 * H, "end": T_OCT + 9 * H}, {"partitions": ["nope"]},
]


def _as_dict(row) -> dict:
    d = dict(vars(row))
    c = d.pop("carbon")
    return {**d, "pue": c.pue, "ci": c.ci_g_per_kwh}


@pytest.mark.parametrize("filters", FILTERS)
def test_light_rows_equal_sqlalchemy_rows(store, filters):  # noqa: F811
    store.put_many(_records())
    url = store.engine.url.render_as_string(hide_password=False)
    kw = dict(filters, jobs=filters.get("specs"))
    kw.pop("specs", None)
    want = store.rows(**kw)
    got = fast.read_rows(url, **filters)
    assert got is not None, "the light reader must answer a plain URL to a v2 store"
    assert [_as_dict(r) for r in got] == [_as_dict(r) for r in want]
    full = fast.read_rows(url, full=True, **filters)
    assert [r.model_dump() for r in full] == [r.model_dump() for r in store.query(**kw)]


def test_light_rows_by_hand(store):  # noqa: F811
    store.put_many(_records())
    url = store.engine.url.render_as_string(hide_password=False)
    [r] = fast.read_rows(url, specs=parse_jobids(["503"]))
    # k = 3: cpu 4 x 3.6e6 J = 4 kWh, gpu 1.8e6 J = 0.5 kWh, ram 0.1 kWh; 2 h + 180 s
    assert (r.job_id, r.user, r.cpu_kwh, r.gpu_kwh, r.ram_kwh, r.elapsed_s) == ("503", "u0", 4.0, 0.5, 0.1, 7380.0)
    assert r.energy_it_j == {"cpu": 4 * 3.6e6, "ram": 3.6e5, "gpu": 1.8e6} and r.account == "chem"  # k odd
    assert isinstance(r.n_nodes, int) and r.coverage_complete is True
    [odd] = fast.read_rows(url, users=["o'neil, jr"])
    assert (odd.job_id, odd.array_job_id, odd.array_task_id) == ("803", "800", "3")


@pytest.mark.parametrize("by", ["user", "account"])
def test_light_rollup_equals_sqlalchemy_rollup(store, by):  # noqa: F811
    store.put_many(_records())
    url = store.engine.url.render_as_string(hide_password=False)
    t0, t1 = month_bounds("2026-10")
    with store.engine.connect() as conn:
        want = month_rollup(conn, by, t0, t1)
    assert fast.rollup(url, by, t0, t1) == want and len(want) >= 2


def test_rollup_csv_json_text_equal_the_dataframe_text():
    """rollup_text (no pandas) gives what pandas wrote from rows_frame: floats as repr, None empty."""
    from slurm_energy.reporting import monthly
    from slurm_energy.reporting import rollup_table as R

    rows = [{"user": "a,b", "jobs": 3, "unmeasured_jobs": 1, "it_kwh": 1666.6666666666267, "facility_kwh": 2500.0,
             "co2e_kg": 1e-05, "measured_it_kwh": None, "estimated_it_kwh": 0.1, "gpu_idle_kwh": 0.0005},
            {"user": "(none)", "jobs": 1, "unmeasured_jobs": 1, "it_kwh": None, "facility_kwh": None,
             "co2e_kg": None, "measured_it_kwh": None, "estimated_it_kwh": None, "gpu_idle_kwh": None}]
    df = rows_frame(rows, "user")
    assert R.csv_text(rows, "user") == df.to_csv(index=False)
    assert R.csv_text([], "user") == rows_frame([], "user").to_csv(index=False)
    assert R.csv_text(rows, "user").splitlines()[1] == '"a,b",3,1,1666.6666666666267,2500.0,1e-05,,0.1,0.0005'
    old = json.dumps({"month": "2026-10", "timezone": "UTC", "by": "user", "rows": monthly._rows(df),
                      "top_gpu_idle_jobs": [], "note": R.NOTE}, indent=2) + "\n"
    assert R.json_text(rows, "user", "2026-10", "UTC") == old


def _site(tmp_path) -> str:
    import pwd

    cfg = tmp_path / "site.yaml"
    cfg.write_text(f"admins: [{pwd.getpwuid(os.getuid()).pw_name}]\n")
    # the hooks' resolved copy (what a Prolog leaves on a node) and the readers' copy beside it
    subprocess.run([sys.executable, "-c", "from slurm_energy.slurm.hookconfig import load_hook_config as f; f()"],
                   env=dict(os.environ, SLURM_ENERGY_CONFIG=str(cfg)), check=True)
    return str(cfg)


CLI_CASES = [
    ("jobenergy", ["-j", "503"]), ("jobenergy", ["-P", "-j", "700,800_3"]), ("jobenergy", []),
    ("jobenergy", ["-S", "2026-10-01T02:00", "-E", "2026-10-01T09:00", "-o", "JobID,User,CPU_kWh,State,Status"]),
    ("rollup", ["--month", "2026-10"]), ("rollup", ["--month", "2026-10", "--by", "account", "--format", "csv"]),
    ("rollup", ["--month", "2026-09", "--format", "json"]),
]


def test_cli_light_paths_print_the_full_paths_output_and_import_nothing_heavy(store, tmp_path,  # noqa: F811
                                                                               monkeypatch, capsys):
    store.put_many(_records())
    url = store.engine.url.render_as_string(hide_password=False)
    cfg = _site(tmp_path)
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", cfg)
    code = ("import sys; from {mod} import main; rc = main(sys.argv[1:]); sys.stdout.flush(); "
            "print('HEAVY', *[m for m in {heavy!r} if m in sys.modules], file=sys.stderr); sys.exit(rc)")
    for prog, argv in CLI_CASES:
        mod = "slurm_energy.cli.jobenergy" if prog == "jobenergy" else "slurm_energy.cli.main"
        args = [*argv, "--store", url] if prog == "jobenergy" else ["rollup", *argv, "--store", url]
        p = subprocess.run([sys.executable, "-c", code.format(mod=mod, heavy=HEAVY), *args], capture_output=True,
                           text=True, env=dict(os.environ, SLURM_ENERGY_CONFIG=cfg))
        heavy = [ln for ln in p.stderr.splitlines() if ln.startswith("HEAVY")]
        assert heavy == ["HEAVY"], (prog, argv, p.stderr)
        # the same command in this process with the light reader switched off: the SQLAlchemy path
        monkeypatch.setattr(fast, "connect", lambda url: None)
        rc = (jobenergy if prog == "jobenergy" else slurm_energy_cli.main)(args)
        monkeypatch.undo()
        monkeypatch.setenv("SLURM_ENERGY_CONFIG", cfg)
        out, err = capsys.readouterr()
        assert (p.returncode, p.stdout) == (rc, out), (prog, argv, p.stderr, err)
        assert p.stdout.strip() or not argv, (prog, argv)  # today: nothing, said on stderr


def test_light_reader_leaves_what_it_cannot_read_to_open_store(tmp_path):
    # nobody listens on port 1: None, and jobenergy's SQLAlchemy path then names the problem
    assert fast.read_rows("postgresql+psycopg://u@127.0.0.1:1/x") is None
    assert fast.rollup("postgresql://u@127.0.0.1:1/x", "user", 0.0, 1.0) is None
    assert fast.connect("mysql://u@h/x") is None  # no reader for other URLs
    assert libpq.conninfo("postgresql+psycopg://u:p%40ss@h:5/db?sslmode=disable") == \
        "postgresql://u:p%40ss@h:5/db?sslmode=disable"


def test_libpq_parameters_and_types_as_psycopg():
    """Parameters typed as psycopg's dumpers type them; results converted by type OID."""
    from decimal import Decimal

    assert libpq._oid_text(1.5) == (701, b"1.5") and libpq._oid_text(True) == (16, b"t")
    assert libpq._oid_text(7) == (21, b"7") and libpq._oid_text(70000)[0] == 23 and libpq._oid_text(2**40)[0] == 20
    assert libpq._oid_text("x") == (0, b"x") and libpq._oid_text(None) == (0, None)
    if not PG_URL:
        pytest.skip(PG_SKIP)
    with libpq.Connection(libpq.conninfo(PG_URL)) as c:
        got = c.execute("SELECT :a::float8 + :a, :s, :n, '' AS e, NULL::text, 1.50::numeric, true, "
                        "count(*) FROM (VALUES (1), (2)) v(x) WHERE x < :k", {"a": 0.25, "s": "é", "n": None, "k": 3})
        assert got == [(0.5, "é", None, "", None, Decimal("1.50"), True, 2)]
        with pytest.raises(libpq.PgError, match="no_such_table"):
            c.execute("SELECT * FROM no_such_table")
