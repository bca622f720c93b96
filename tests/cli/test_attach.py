"""``slurm-energy attach PID --gpus 0,1``: a running process and the GPUs it names, until it exits.
GPUs are fake NVML devices behind the real pynvml (no driver here)."""

import argparse
import subprocess
import sys
import time

import pynvml
import pytest

from slurm_energy.cli.run_cmds import cmd_attach
from tests.fakes.nvml import FakeGpu, install

T_START = time.time()


class ClockGpu(FakeGpu):
    """A fake GPU drawing a constant 200 W: its energy counter is 200 W x seconds since T_START."""

    @property
    def energy_mj(self):
        return int((time.time() - T_START) * 200_000)

    @energy_mj.setter
    def energy_mj(self, _value):
        pass


def _args(tmp_path, pid, gpus):
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    return argparse.Namespace(pid=pid, gpus=gpus, config=str(site), interval=0.2, out=str(tmp_path),
                              partition="", no_report=False)


def _child(seconds):
    return subprocess.Popen([sys.executable, "-c", f"import time\nt=time.time()\nwhile time.time()-t<{seconds}: pass"])


def test_attach_measures_the_named_gpus_until_the_process_exits(tmp_path, monkeypatch, capsys):
    gpus = [ClockGpu("GPU-aaaa", 0, power_mw=200_000), ClockGpu("GPU-bbbb", 1, power_mw=200_000),
            ClockGpu("GPU-cccc", 2, power_mw=200_000)]
    install(monkeypatch, gpus)
    child = _child(1.5)
    t0 = time.time()
    assert cmd_attach(_args(tmp_path, child.pid, "0,2")) == 0
    assert time.time() - t0 < 10 and child.poll() is not None  # returned once the process ended
    out = capsys.readouterr().out
    assert f"job pid-{child.pid}" in out
    csv = (tmp_path / f"energy-pid-{child.pid}.csv").read_text()
    gpu_row = next(line for line in csv.splitlines() if line.split(",")[1] == "gpu")
    # GPUs 0 and 2, not 1, measured (by the counter, or by power where a fake's read skew trips the
    # counter/power cross-check: both are 200 W here)
    assert gpu_row.split(",")[2] == "2" and gpu_row.split(",")[3] in ("counter", "power_integration")
    html = (tmp_path / f"energy-pid-{child.pid}.html").read_text()
    assert "GPU-aaaa" in html and "GPU-cccc" in html and "GPU-bbbb" not in html


def test_attach_record_gpu_energy_is_power_times_measured_time(tmp_path, monkeypatch):
    from slurm_energy.config import load_site_config
    from slurm_energy.pipeline import LocalMeasurement
    from slurm_energy.sampling.local import LocalSampler, gpus_by_index
    from slurm_energy.sampling.probes import ProcessTreeProbe

    install(monkeypatch, [ClockGpu("GPU-aaaa", 0, power_mw=200_000), ClockGpu("GPU-bbbb", 1, power_mw=200_000)])
    uuids, unresolved, note = gpus_by_index("1")
    assert (uuids, unresolved, note) == (["GPU-bbbb"], [], "")
    child = _child(1.0)
    cfg = load_site_config(_args(tmp_path, 0, "").config)
    s = LocalSampler(cfg, ProcessTreeProbe(child.pid), "a", uuids, interval_s=0.2).start()
    while child.poll() is None:
        time.sleep(0.05)
    s.stop()
    rec = LocalMeasurement(s).record()
    s.cleanup()
    (d,) = [d for n in rec.nodes for d in n.devices if d.device_class == "gpu"]
    assert d.device_id == "GPU-bbbb" and d.method.value in ("counter", "power_integration")
    assert d.energy_j == pytest.approx(200.0 * d.duration_s * d.coverage, rel=0.01)  # 200 W x measured s


def test_attach_gpus_without_nvml_are_unavailable_not_zero(tmp_path, monkeypatch, capsys):
    install(monkeypatch, [], init_error=pynvml.NVMLError_DriverNotLoaded)
    child = _child(0.5)
    assert cmd_attach(_args(tmp_path, child.pid, "0,1")) == 0
    err = capsys.readouterr().err
    assert "GPUs 0,1 not readable" in err and "reported as not measured" in err
    rows = {r.split(",")[1]: r.split(",") for r in (tmp_path / f"energy-pid-{child.pid}.csv").read_text().splitlines()}
    assert rows["gpu"][2] == "2" and rows["gpu"][3] == "unavailable" and rows["gpu"][5] == ""  # n/a, never 0


def test_attach_bad_gpu_list_is_a_usage_error(tmp_path, capsys):
    child = _child(0.1)
    with pytest.raises(SystemExit) as e:
        cmd_attach(_args(tmp_path, child.pid, "0,x"))
    assert e.value.code == 2 and "--gpus '0,x': give GPU indices as nvidia-smi numbers them" in capsys.readouterr().err
    child.wait()
