"""``track()`` outside Slurm measures the AMD and Intel GPUs it sees (issue 29, defect A: the child
sampler's reader spec once left them out, so they were listed and neither measured nor marked
unavailable). The child sampler opens its readers from the parent's spec
(``LocalSampler.reader_spec``, :func:`slurm_energy.sampling.reading.open_readers`).

The GPUs are fake sysfs trees in the drivers' layouts (tests/fakes/drm.py, which cites them):
Intel Data Center GPU Max 1550 on xe (``energy1_input`` = the card's energy in uJ, labelled
"card": Documentation/ABI/testing/sysfs-driver-intel-xe-hwmon), AMD Instinct MI300X on amdgpu
(``power1_input`` only, in uW: smu_v13_0_6_ppt.c answers AMDGPU_PP_SENSOR_GPU_INPUT_POWER), and an
amdgpu card whose hwmon has neither file (an SMU that reports no power).
"""

import os
import time

import pytest

from slurm_energy.api import track
from slurm_energy.model import Method
from tests.fakes.drm import MI300X_HWMON, XE_HWMON, FakeSysfs, put

MAX1550, MI300X = "8086:0bd5", "1002:74a1"


@pytest.fixture
def gpus_outside_slurm(tmp_path, monkeypatch):
    for var in ("SLURM_JOB_ID", "LOCAL_RANK", "SLURM_LOCALID", "SLURM_ENERGY_MARKS_DIR", "SLURM_ENERGY_RUN_MARKS",
                "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    fs = FakeSysfs(tmp_path / "sys")
    xe = fs.gpu("0000:8a:00.0", MAX1550, "xe", card=0, render=128, hwmon=dict(XE_HWMON))  # energy1_input 0 uJ
    fs.gpu("0000:c1:00.0", MI300X, "amdgpu", card=1, render=129, hwmon=dict(MI300X_HWMON, power1_input=300_000_000))
    fs.gpu("0000:c2:00.0", MI300X, "amdgpu", card=2, render=130, hwmon={})  # no power, no energy file
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n  drm_root: {fs.drm_root}\n"
                    f"  kfd_root: {fs.kfd_root}\n")
    monkeypatch.setenv("SLURM_ENERGY_CONFIG", str(site))
    (tmp_path / "out").mkdir()
    return tmp_path, xe


def test_track_measures_amd_and_intel_gpus_in_its_child_sampler(gpus_outside_slurm):
    tmp, xe = gpus_outside_slurm
    with track("drm", out=str(tmp / "out"), interval_s=0.2) as t:  # returns once the child's first row is written
        put(xe / "energy1_input", 2_000_000_000)  # the card used 2e9 uJ = 2000 J since that row
        t.result()  # a row now, then more at 0.2 s
        time.sleep(1.0)  # several rows, so a loaded machine's late row leaves most of the run covered
    rec = t.record
    devs = {d.device_id: d for n in rec.nodes for d in n.devices if d.device_class == "gpu"}
    assert set(devs) == {"0000:8a:00.0", "0000:c1:00.0", "0000:c2:00.0"}  # every card listed ...
    xe_d, amd, dark = devs["0000:8a:00.0"], devs["0000:c1:00.0"], devs["0000:c2:00.0"]
    # ... and each measured by its method: the xe counter's difference, 2000 J (the whole card: no
    # allocation outside Slurm, the process may use every visible GPU)
    assert xe_d.method == Method.COUNTER and xe_d.energy_j == pytest.approx(2000.0)
    # 300 W held over the covered part of the run: 300 W x coverage x elapsed s
    assert amd.method == Method.POWER_INTEGRATION and amd.coverage > 0.5
    assert amd.energy_j == pytest.approx(300.0 * amd.coverage * rec.elapsed_s, rel=1e-6)
    # the card with nothing to read is unavailable: no energy (never 0), and the class says it is partly unmeasured
    assert dark.method == Method.UNAVAILABLE and dark.energy_j is None
    assert rec.energy_it_j["gpu"] == pytest.approx(2000.0 + amd.energy_j)
    assert os.path.exists(tmp / "out" / "energy-drm.html")


def test_child_and_parent_open_readers_from_one_spec(gpus_outside_slurm, monkeypatch):
    from slurm_energy.config import load_site_config
    from slurm_energy.sampling.local import LocalSampler

    m = LocalSampler(load_site_config(), None, "spec", [], child_of=os.getpid())
    try:
        spec = m._child_spec["readers"]
        assert spec is m.reader_spec and spec["unresolved_gpus"] == [] and {g["backend"] for g in spec["gpus"]} == {"drm"}
        assert sorted(g["device_id"] for g in spec["gpus"]) == ["0000:8a:00.0", "0000:c1:00.0", "0000:c2:00.0"]
        # the parent's inventory (what the record lists) has the cards the child will read
        assert sorted(d["device_id"] for d in m.static["devices"] if d["device_class"] == "gpu") == \
            ["0000:8a:00.0", "0000:c1:00.0", "0000:c2:00.0"]
    finally:
        m.cleanup()
