import os
import time

import pytest

from slurm_energy.cli.main import main as se_main
from slurm_energy.model import Status
from slurm_energy.reporting.rollup_table import month_bounds
from slurm_energy.slurm.jobend.results import write_node_record
from slurm_energy.store import open_store
from tests.helpers.jobrecord_factory import finished, node_record
from tests.helpers.rollup_oracle import rollup
from tests.helpers.store_backends import store, store_url  # noqa: F401  (fixtures)


@pytest.fixture
def site(tmp_path, monkeypatch):
    cfg = tmp_path / "site.yaml"
    cfg.write_text("cluster_name: c1\npue: 1.2\noffline: true\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(cfg))
    return cfg


def _age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_collect_finalises_partial_once(tmp_path, site, store_url, capsys):
    res = tmp_path / "results"
    # 2-node job, only n1 ever reported, 2 h ago
    p = write_node_record(res, node_record(job_id="500", node="n1", expected=("n1", "n2")))
    _age(p, 7200)
    # a fresh 1-node attempt (10 s old) must be left alone with --older-than 60
    write_node_record(res, node_record(job_id="501", node="n1"))
    rc = se_main(["collect", "--store", store_url, "--results-dir", str(res), "--older-than", "60"])
    out = capsys.readouterr().out
    assert rc == 0 and "stored c1/500 attempt 0: status partial, 1 node(s), missing n2" in out
    assert "collect: 1 attempt(s) finalised" in out
    s = open_store(store_url)
    [r] = s.get_job("500")
    assert s.get_job("501") == []
    s.close()
    assert r.status == Status.PARTIAL and "node n2 never reported" in r.errors
    # n1: 3.6e6 + 3.6e5 J = 3.96e6 J = 1.1 kWh; x PUE 1.2 (site config) = 1.32 kWh;
    # x 475 g/kWh (world default, no location configured) = 627 g = 0.627 kg
    assert r.it_kwh == pytest.approx(1.1)
    assert r.facility_kwh == pytest.approx(1.32)
    assert r.co2e_kg == pytest.approx(0.627)
    assert r.coverage_complete is False
    # second run: already stored -> nothing to do
    rc = se_main(["collect", "--store", store_url, "--results-dir", str(res), "--older-than", "60"])
    assert "collect: 0 attempt(s) finalised" in capsys.readouterr().out


def test_collect_rejects_negative_age(tmp_path, site, capsys):
    rc = se_main(["collect", "--store", f"sqlite:///{tmp_path}/s.db", "--older-than", "-5"])
    assert rc == 2 and "--older-than=-5.0 must be >= 0" in capsys.readouterr().err


def test_month_bounds():
    t0, t1 = month_bounds("2024-02")
    # 2024 is a leap year: 29 days x 86400 s = 2505600 s
    assert t1 - t0 == 29 * 86400
    assert t0 == 1706745600.0  # 2024-02-01T00:00:00Z
    with pytest.raises(ValueError, match="--month='2024-13'"):
        month_bounds("2024-13")
    with pytest.raises(ValueError, match="YYYY-MM"):
        month_bounds("March")


def test_rollup_sums_and_counts_unmeasured():
    t0, t1 = month_bounds("2024-02")
    recs = [
        finished(node_record(job_id="1", user="alice", start=t0 + 10, end=t0 + 100)),  # 1.1 kWh IT
        finished(node_record(job_id="2", user="alice", start=t0 + 10, end=t0 + 200, cpu_j=7.2e6)),  # 2.1 kWh
        finished(node_record(job_id="3", user="alice", start=t0, end=t0 + 5, cpu_j=None, ram_j=None)),  # n/a
        finished(node_record(job_id="4", user="bob", start=t0 - 50, end=t0 - 1)),  # ended in January: out
        finished(node_record(job_id="5", user="carol", start=t0, end=t0 + 9, cpu_j=None, ram_j=None)),  # n/a
    ]
    df = rollup(recs, "user", t0, t1)
    rows = {r["user"]: r for r in df.to_dict("records")}
    assert set(rows) == {"alice", "carol"}
    # alice: 1.1 + 2.1 = 3.2 kWh IT; x PUE 1.5 = 4.8 kWh; x 400 g/kWh = 1920 g = 1.92 kg; 1 unmeasured
    assert rows["alice"]["jobs"] == 3 and rows["alice"]["unmeasured_jobs"] == 1
    assert rows["alice"]["it_kwh"] == pytest.approx(3.2)
    assert rows["alice"]["facility_kwh"] == pytest.approx(4.8)
    assert rows["alice"]["co2e_kg"] == pytest.approx(1.92)
    # carol: only unmeasured -> None, not 0
    assert rows["carol"]["it_kwh"] is None and rows["carol"]["unmeasured_jobs"] == 1


def test_rollup_cli(store, store_url, site, capsys):
    t0, _ = month_bounds("2024-02")
    store.put(finished(node_record(job_id="1", user="alice", account="phys", start=t0 + 10, end=t0 + 100)))
    store.put(finished(node_record(job_id="2", user="bob", account="phys", start=t0 + 10, end=t0 + 100,
                                   cpu_j=7.2e6)))
    url = store_url
    rc = se_main(["rollup", "--month", "2024-02", "--by", "account", "-P", "--store", url])
    out = capsys.readouterr().out.strip().splitlines()
    # phys: 1.1 + 2.1 = 3.2 kWh IT, 4.8 kWh facility, 1.92 kg
    # every class of the factory's jobs is the TDP model: all 3.2 kWh estimated, none measured
    # no GPU: no GPU-idle energy (n/a, never 0)
    assert rc == 0 and out == ["account|Jobs|Attempts|Unmeasured|IT_kWh|Facility_kWh|kgCO2e|Measured_IT_kWh|"
                               "Estimated_IT_kWh|GPU_idle_kWh", "phys|2|2|0|3.2|4.8|1.92|n/a|3.2|n/a"]


@pytest.mark.parametrize("cmd", [["rollup", "--month", "2024-02"], ["collect"]])
def test_unreadable_store_is_named_not_a_traceback(tmp_path, site, capsys, cmd):
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite\n")
    rc = se_main(cmd + ["--store", f"sqlite:///{junk}"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"sqlite:///{junk}" in err and "file is not a database" in err and "Traceback" not in err
