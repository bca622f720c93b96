"""The per-node meter process: one per node, its own cadence, readings shared through the node's
meter file, gone once no job runs."""

from __future__ import annotations

import os
import subprocess
import sys

from slurm_energy.config.schema import SiteConfig
from slurm_energy.core import Reading
from slurm_energy.sampling import meterspool
from slurm_energy.slurm import nodemeter


class _Meter:
    name = "hwmon-power"

    def __init__(self, watts):
        self.watts = list(watts)
        self.requests = 0

    def read(self):
        self.requests += 1
        return [Reading("node", "acpi-power-meter-hwmon0", "power_integration", power_w=self.watts.pop(0))]


def test_run_meter_writes_checked_rows_at_its_cadence_and_leaves_without_jobs(tmp_path):
    path = str(tmp_path / "node-meter-n1.jsonl")
    clock = [1000.0]
    slept = []
    jobs = [True, True, False]
    m = _Meter([300.0, 0.0, 310.0])

    def sleep(s):
        slept.append(s)
        clock[0] += s

    n = nodemeter.run_meter(m, "acpi_power_meter", path, 10.0, lambda: jobs.pop(0), clock=lambda: clock[0], sleep=sleep)
    assert n == 3 and m.requests == 3 and slept == [10.0, 10.0]
    rows = meterspool.read_span(path, 1000.0, 1020.0, margin_s=10.0)
    assert [(r.t, r.reading.power_w, r.reading.method) for r in rows] == [
        (1000.0, 300.0, "power_integration"), (1010.0, 0.0, "unavailable"), (1020.0, 310.0, "power_integration")]
    assert rows[1].reading.flags == ["meter_implausible"] and rows[0].source == "acpi_power_meter"
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_read_span_takes_one_row_each_side(tmp_path):
    path = str(tmp_path / "m.jsonl")
    for t in (90.0, 95.0, 105.0, 115.0, 125.0, 140.0):
        meterspool.append(path, meterspool.MeterRow(t, "redfish", Reading("node", "redfish", "power_integration",
                                                                         power_w=t)))
    with open(path, "a") as f:
        f.write('{"t": 130, "source": "red')  # a torn line: skipped, never fatal
    assert [r.t for r in meterspool.read_span(path, 100.0, 120.0, margin_s=10.0)] == [95.0, 105.0, 115.0, 125.0]
    assert meterspool.trim(path, now=140.0, keep_s=30.0) == 3  # 90, 95 and 105 s are older than 140 - 30 = 110 s
    assert [r.t for r in meterspool.read_span(path, 0.0, 200.0, margin_s=0.0)] == [115.0, 125.0, 140.0]


def test_ensure_running_starts_one_and_only_when_none_holds_the_lock(tmp_path):
    cfg = SiteConfig()
    started = []
    assert nodemeter.ensure_running(cfg, str(tmp_path), "n1", start=started.append)
    assert started == [["-m", "slurm_energy.slurm.nodemeter", str(tmp_path), "n1"]]
    # a second job's sampler starting before the process holds its lock: the claim says one is starting
    assert not nodemeter.ensure_running(cfg, str(tmp_path), "n1", start=started.append)
    os.unlink(tmp_path / "node-meter-n1.starting")  # what the started process does once it holds the lock
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
                               nodemeter.lock_path(str(tmp_path), "n1")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert not nodemeter.ensure_running(cfg, str(tmp_path), "n1", start=started.append)
    finally:
        holder.kill()
        holder.wait()
    assert len(started) == 1
    none = SiteConfig(node_meter={"source": "none"})
    assert not nodemeter.ensure_running(none, str(tmp_path), "n2", start=started.append)


def test_jobs_on_node_sees_live_samplers_only(tmp_path):
    d = tmp_path / "jobs" / "7-r0"
    d.mkdir(parents=True)
    assert not nodemeter.jobs_on_node(str(tmp_path), "n1")
    (d / "sampler-n1.pid").write_text(str(os.getpid()))
    assert nodemeter.jobs_on_node(str(tmp_path), "n1") and not nodemeter.jobs_on_node(str(tmp_path), "n2")
    (d / "sampler-n1.pid").write_text("999999999")
    assert not nodemeter.jobs_on_node(str(tmp_path), "n1")


def test_a_node_without_meter_is_not_looked_at_again_within_the_hour(tmp_path):
    cfg = SiteConfig()
    started = []
    (tmp_path / "node-meter-n1.none").write_text("node meter: none found in-band\n")
    assert not nodemeter.ensure_running(cfg, str(tmp_path), "n1", start=started.append)
    old = 1_000_000.0  # an hour and more ago: looked for again (a meter may have been configured)
    os.utime(tmp_path / "node-meter-n1.none", (old, old))
    assert nodemeter.ensure_running(cfg, str(tmp_path), "n1", start=started.append) and len(started) == 1


def test_read_span_parses_only_the_rows_it_needs(tmp_path, monkeypatch):
    path = str(tmp_path / "m.jsonl")
    for t in range(0, 100000, 10):
        meterspool.append(path, meterspool.MeterRow(float(t), "acpi_power_meter",
                                                    Reading("node", "m", "power_integration", power_w=300.0)))
    parsed = []
    real = meterspool.json.loads
    monkeypatch.setattr(meterspool.json, "loads", lambda s: parsed.append(1) or real(s))
    rows = meterspool.read_span(path, 5000.0, 5100.0, margin_s=20.0)
    assert [r.t for r in rows] == [4990.0 + 10 * k for k in range(13)]  # 4990 .. 5110 s
    assert len(parsed) == 15  # 4980 .. 5120 s inside the margins: not the file's 10 000 rows


def test_the_record_says_why_the_node_has_no_meter_reading(tmp_path, monkeypatch):
    """A site that configured a meter, a job with no meter row: the record's rest of the node says
    why, in the meter process's words: its settings error (the next job still starts one), else
    what ``auto`` found, else that it took no reading (a tester found only "not metered")."""
    from slurm_energy.sampling.readers import node_meter as nm_reader

    spool, started = str(tmp_path), []
    assert nodemeter.meter_note(spool, "n1") == (
        f"the node meter process took no reading in the job's span (see {spool}/node-meter.log)")
    (tmp_path / "node-meter-n1.none").write_text("auto: no hwmon power meter, no DCMI\n")
    assert nodemeter.meter_note(spool, "n1") == "node meter: auto: no hwmon power meter, no DCMI"

    def bad(cfg, node):
        raise ValueError("node_meter.redfish.url: 'bmc' is no http(s) URL; give https://<bmc>/")

    monkeypatch.setattr(nm_reader, "open_node_meter", bad)
    monkeypatch.setattr("slurm_energy.slurm.log.setup_logging", lambda *a, **k: None)
    assert nodemeter.main([spool, "n1"]) == 0
    assert nodemeter.meter_note(spool, "n1") == (
        "node_meter settings: node_meter.redfish.url: 'bmc' is no http(s) URL; give https://<bmc>/")
    os.unlink(tmp_path / "node-meter-n1.none")
    assert nodemeter.ensure_running(SiteConfig(), spool, "n1", start=started.append) and len(started) == 1
