"""The node_exporter textfile holds each series (name + label set) once, across a requeued job's
attempts, array tasks and het components: the text format allows one sample per series
(https://prometheus.io/docs/instrumenting/exposition_formats/, "Each ... must be unique"), and
node_exporter's registry (client_golang ``Gather``) drops a repeated one and logs "collected metric
... was collected before with the same name and label values" -- the second attempt's energy lost.
promtool does not catch it (Debian prometheus 2.42: ``promtool check metrics`` exits 0 on a
duplicate), so the file is checked three ways: prometheus_client's parser plus a uniqueness check as
the registry does it, promtool (when installed), and Debian's prometheus-node-exporter itself
scraping the directory on loopback (when installed; scripts/setup.sh installs both)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm_energy.model import Status
from slurm_energy.outputs.prometheus import FILE_NAME, PrometheusTextfile
from tests.helpers.jobrecord_factory import finished, node_record

T0 = 1_700_000_000.0


def series(text: str) -> list[tuple[str, frozenset]]:
    """Every sample of ``text`` as (name, label set), parsed by prometheus_client."""
    return [(s.name, frozenset(s.labels.items())) for fam in text_string_to_metric_families(text) for s in fam.samples]


def duplicates(text: str) -> list[tuple[str, frozenset]]:
    """The (name, label set) pairs that occur more than once: what node_exporter's registry rejects."""
    return [k for k, n in Counter(series(text)).items() if n > 1]


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _sink(tmp_path, t):
    (tmp_path / "tf").mkdir(exist_ok=True)
    return PrometheusTextfile(str(tmp_path / "tf"), str(tmp_path / "state"), clock=Clock(t))


def _requeue_and_friends(tmp_path) -> str:
    """One node's textfile while: job 300's attempt 0 ended (final totals kept), its attempt 1 runs
    on the same node (requeued: same job id, user, account, partition); array 500's tasks 1 and 2
    (raw ids 501, 502) ran; het job 600's components 0 and 1 (raw ids 600, 601) ran."""
    sink = _sink(tmp_path, T0 + 700)
    sink.publish(finished(node_record(job_id="300", start=T0, end=T0 + 500, restart_count=0)))
    sink.publish(finished(node_record(job_id="300", start=T0 + 600, end=T0 + 700, restart_count=1,
                                      status=Status.RUNNING, cpu_j=1.8e6, ram_j=1.8e5)))
    for task in ("1", "2"):
        sink.publish(finished(node_record(job_id=f"50{task}", array_job_id="500", array_task_id=task, end=T0 + 600)))
    for off in ("0", "1"):
        sink.publish(finished(node_record(job_id=f"60{off}", het_job_id="600", het_job_offset=off, end=T0 + 600)))
    return (tmp_path / "tf" / FILE_NAME).read_text()


def test_duplicate_check_catches_a_repeated_series():
    # the check itself: the same name and labels twice is a duplicate, whatever the value
    text = '# TYPE x_total counter\nx_total{a="1"} 1\nx_total{a="1"} 2\nx_total{a="2"} 2\n'
    assert duplicates(text) == [("x_total", frozenset({("a", "1")}))]


def test_requeue_array_and_het_series_are_unique(tmp_path):
    text = _requeue_and_friends(tmp_path)
    assert duplicates(text) == []
    joules = {(dict(lbl)["job_id"], dict(lbl)["restart_count"], dict(lbl)["device_class"]): v
              for fam in text_string_to_metric_families(text) for s in fam.samples
              if s.name == "slurm_energy_job_joules_total" for lbl, v in [(s.labels.items(), s.value)]}
    # both attempts of 300 are there, each with its own energy: 3.6e6 J (attempt 0's final cpu)
    # and 1.8e6 J (attempt 1's cpu so far); sum by (cluster, job_id) = 5.4e6 J
    assert joules[("300", "0", "cpu")] == 3.6e6 and joules[("300", "1", "cpu")] == 1.8e6
    assert {k[0] for k in joules} == {"300", "501", "502", "600", "601"}
    info = [dict(lbl) for name, lbl in series(text) if name == "slurm_energy_job_info"]
    assert sorted((i["job_id"], i["restart_count"], i["status"]) for i in info if i["job_id"] == "300") == [
        ("300", "0", "complete"), ("300", "1", "running")]


def test_a_reused_job_id_replaces_the_older_run(tmp_path):
    # the same cluster, job id and restart count (Slurm reused the id): one entry, the newer run
    sink = _sink(tmp_path, T0 + 5000)
    sink.publish(finished(node_record(job_id="42", start=T0, end=T0 + 100)))
    sink.publish(finished(node_record(job_id="42", start=T0 + 4000, end=T0 + 4900, cpu_j=7.2e6)))
    text = (tmp_path / "tf" / FILE_NAME).read_text()
    assert duplicates(text) == []
    cpu = [v for fam in text_string_to_metric_families(text) for s in fam.samples
           if s.name == "slurm_energy_job_joules_total" and s.labels["device_class"] == "cpu" for v in [s.value]]
    assert cpu == [7.2e6]


def test_an_entry_from_before_the_label_still_exports_its_attempt(tmp_path):
    # a state entry written by the previous version (restart_count only in "info") next to a new one
    import json

    sink = _sink(tmp_path, T0 + 700)
    sink.publish(finished(node_record(job_id="300", start=T0 + 600, end=T0 + 700, restart_count=1)))
    old = json.loads((tmp_path / "state" / "c1_300_1.json").read_text())
    old["labels"].pop("restart_count")
    old["info"]["restart_count"] = "0"
    (tmp_path / "state" / "c1_300_0.json").write_text(json.dumps(old))
    sink.forget("c1", "none", 0)  # rewrite
    text = (tmp_path / "tf" / FILE_NAME).read_text()
    assert duplicates(text) == []
    assert {dict(lbl)["restart_count"] for n, lbl in series(text) if n == "slurm_energy_job_info"} == {"0", "1"}


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian's prometheus) not installed")
def test_promtool_check_metrics_is_clean(tmp_path):
    text = _requeue_and_friends(tmp_path)
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "" and p.stderr.strip() == "", (p.stdout, p.stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not shutil.which("prometheus-node-exporter"), reason="Debian's prometheus-node-exporter not installed")
def test_node_exporter_gathers_every_series_without_error(tmp_path):
    text = _requeue_and_friends(tmp_path)
    want = set(series(text))
    port = _free_port()
    log = tmp_path / "ne.log"
    with open(log, "w") as out:
        ne = subprocess.Popen(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
                               "--collector.disable-defaults", "--collector.textfile",
                               f"--collector.textfile.directory={tmp_path / 'tf'}"], stdout=out, stderr=subprocess.STDOUT)
    try:
        body = ""
        for _ in range(100):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert body, log.read_text()
    finally:
        ne.terminate()
        ne.wait(timeout=10)
    got = {k for k in series(body) if k[0].startswith("slurm_energy_")}
    assert got == want  # nothing dropped
    assert "node_textfile_scrape_error 0" in body
    assert "was collected before" not in log.read_text()
    assert os.path.exists(tmp_path / "tf" / FILE_NAME)
