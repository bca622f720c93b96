"""The GPU backend registry (slurm_energy.devices.gpu): a new vendor is this one file plus one
registration. A toy backend (``toy``: not a real vendor, no capture to cite; it counts energy the
test hands it) is registered from here and flows through the Prolog's resolution (the hook's
``_resolve_gpus``), the job context, the readers (``open_readers``) and the node's energy."""

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from types import SimpleNamespace

import pytest

import slurm_energy.devices.gpu as gpu_pkg
from slurm_energy.accounting.summary import summarise_node
from slurm_energy.devices.gpu import (
    Gpu,
    GpuResolveError,
    ResolvedGpus,
    node_gpu_count,
    register,
    resolve_job_gpus,
    split_tokens,
)
from slurm_energy.model import Method
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading
from slurm_energy.sampling.reading import open_readers

T0 = 1_796_034_000.0

#: the toy vendor's cumulative energy counters, uJ, by device id (what its "hardware" reports)
COUNTERS: dict[str, int] = {}


class ToyReader(Reader):
    name = "toy"
    device_class = "gpu"

    def __init__(self, gpus: list[Gpu]):
        self.gpus = gpus

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic("gpu", g.device_id, model=g.model, rated_power_w=300.0,
                             rated_power_source="toy datasheet") for g in self.gpus]

    def read(self) -> list[Reading]:
        return [Reading("gpu", g.device_id, "counter", energy_uj=COUNTERS[g.device_id]) for g in self.gpus]


def open_toy_readers(hw, gpus: list[Gpu], notes: list[str], light: bool = False) -> list[Reader]:
    notes.append(f"toy: {len(gpus)} GPU(s)")
    return [ToyReader(gpus)]


class ToyBackend:
    """Resolves SLURM_JOB_GPUS (GRES indices) to ``toy<i>`` in the Prolog; TOY_VISIBLE_DEVICES in a job."""

    name = "toy"
    reader = f"{__name__}:open_toy_readers"

    def resolve(self, env: Mapping[str, str], hw, *, in_prolog: bool) -> ResolvedGpus:
        toks = split_tokens(env.get("SLURM_JOB_GPUS" if in_prolog else "TOY_VISIBLE_DEVICES"))
        if not toks:
            return ResolvedGpus([], "no toy GPU allocated")
        bad = [t for t in toks if not t.isdigit() or int(t) > 3]
        if bad:
            raise GpuResolveError(f"SLURM_JOB_GPUS={bad[0]}: the toy node has GPUs 0-3")
        return ResolvedGpus(Gpu("toy", "toyvendor", f"toy{t}", "Toy Accelerator T1", physical_index=int(t),
                                source=f"SLURM_JOB_GPUS={t}") for t in toks)

    def node_count(self, hw) -> int | None:
        return 4  # toy0..toy3


@pytest.fixture
def toy(monkeypatch):
    """The registry with the toy backend tried first; the real registry is restored afterwards."""
    monkeypatch.setattr(gpu_pkg, "GPU_BACKENDS", dict(gpu_pkg.GPU_BACKENDS))
    register(ToyBackend(), first=True)
    COUNTERS.clear()
    return gpu_pkg.GPU_BACKENDS


def _site(tmp_path):
    return SimpleNamespace(hardware=SimpleNamespace(rapl_root=str(tmp_path / "no-powercap"),
                                                    hwmon_root=str(tmp_path / "no-hwmon"),
                                                    drm_root=str(tmp_path / "no-drm"),
                                                    kfd_root=str(tmp_path / "no-kfd")))


def test_a_backend_registered_from_one_file_flows_from_the_prolog_to_the_jobs_energy(toy, tmp_path):
    from slurm_energy.slurm.context import JobFacts
    from slurm_energy.slurm.hooks.gpus import resolve_gpus as _resolve_gpus

    assert list(toy)[:1] == ["toy"]
    site = _site(tmp_path)
    # the Prolog: SLURM_JOB_GPUS=1,3 -> the toy backend's devices, kept in the job's context as dicts
    ctx = JobFacts(dict(job_gpus="1,3", cuda_visible_devices=None, gpus=[], gpu_resolution_error=""))
    _resolve_gpus(ctx, site, {})
    assert [(g["backend"], g["vendor"], g["device_id"], g["physical_index"]) for g in ctx.gpus] == [
        ("toy", "toyvendor", "toy1", 1), ("toy", "toyvendor", "toy3", 3)]
    assert ctx.gpu_resolution_error == ""
    gpus = json.loads(json.dumps(ctx.gpus))  # as the sampler reads them back from the spool
    # the sampler: the backend's own reader factory opens the reader for its GPUs
    readers, notes = open_readers(site, gpus)
    (r,) = [x for x in readers if x.device_class == "gpu"]
    assert r.name == "toy" and "toy: 2 GPU(s)" in notes
    assert [(d.device_id, d.rated_power_w) for d in r.devices()] == [("toy1", 300.0), ("toy3", 300.0)]
    # 250 W on toy1 and 100 W on toy3 for 10 s: 2500 J and 1000 J (counter differences, uJ / 1e6)
    rows = []
    for t, e1, e3 in ((0.0, 5_000_000, 0), (10.0, 5_000_000 + 2_500_000_000, 1_000_000_000)):
        COUNTERS.update(toy1=e1, toy3=e3)
        rows.append({"t": T0 + t, "kind": "sample", "job": {"cpu_time_s": t, "mem_bytes": 1, "pids": [1]},
                     "node": {"cpu_busy_s": 2 * t, "cpu_total_s": 4 * t, "ncpu": 4, "mem_used_bytes": 2},
                     "readings": [x.to_dict() for x in r.read()]})
    s = summarise_node(rows, job_id="7", node="n1", start_time=rows[0]["t"], end_time=rows[-1]["t"])
    got = {d.device_id: (d.method, d.energy_j) for d in s.devices if d.device_class == "gpu"}
    assert got == {"toy1": (Method.COUNTER, pytest.approx(2500.0)), "toy3": (Method.COUNTER, pytest.approx(1000.0))}


def test_the_first_backend_that_resolves_wins_and_every_failure_is_kept_in_the_reason(toy, tmp_path):
    hw = SimpleNamespace(drm_root=str(tmp_path / "no-drm"), kfd_root=str(tmp_path / "no-kfd"))
    # inside a job: the toy backend reads its own variable
    assert [g.device_id for g in resolve_job_gpus({"TOY_VISIBLE_DEVICES": "2"}, hw, in_prolog=False)] == ["toy2"]
    # a token no toy GPU has: the toy backend's error is kept, the others are asked, nothing is invented
    res = resolve_job_gpus({"SLURM_JOB_GPUS": "9"}, hw, in_prolog=True)
    assert res == [] and "toy: GpuResolveError: SLURM_JOB_GPUS=9: the toy node has GPUs 0-3" in res.reason
    assert "drm: no AMD/Intel GPU under" in res.reason  # the AMD/Intel backend was asked too


def test_gpus_of_an_unregistered_backend_are_unavailable_never_zero(tmp_path):
    site = _site(tmp_path)
    gone = Gpu("retired", "acme", "acme0").to_dict()  # a context written where a backend is installed
    readers, notes = open_readers(site, [gone])
    (r,) = [x for x in readers if x.device_class == "gpu"]
    (rd,) = r.read()
    assert (rd.device_id, rd.method, rd.energy_uj, rd.flags) == ("acme0", Method.UNAVAILABLE, None,
                                                                 ["reader_error:GpuResolveError"])
    assert any("GPU backend 'retired' is not registered" in n for n in notes)


def test_a_resolved_gpu_without_its_backend_names_the_missing_key():
    with pytest.raises(GpuResolveError, match="lacks backend"):
        Gpu.from_dict({"vendor": "nvidia", "device_id": "GPU-1"})
    g = Gpu("nvml", "nvidia", "MIG-1", fraction=3 / 7, share="mig", gi=1, ci=0)
    assert Gpu.from_dict(json.loads(json.dumps(g.to_dict()))) == g


def test_importing_the_registry_imports_no_backend_and_no_vendor_library():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = (f"import sys; sys.path.insert(0, {repo!r}); base = set(sys.modules); import slurm_energy.devices.gpu; "
            "print(' '.join(sorted(set(sys.modules) - base)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    mods = set(out.stdout.split())
    assert "slurm_energy.devices.gpu" in mods
    assert not mods & {"pynvml", "amdsmi", "typing", "slurm_energy.devices.gpu.nvidia", "slurm_energy.devices.gpu.drm",
                       "slurm_energy.devices.drm"}, sorted(mods)


def test_the_nodes_gpu_count_sums_the_backends_that_answer(toy, tmp_path, monkeypatch):
    from slurm_energy.devices.gpu import nvidia
    from tests.fakes.drm import FakeSysfs

    fs = FakeSysfs(tmp_path / "sys")
    fs.gpu("0000:c1:00.0", "1002:74a1", "amdgpu", card=0, render=128, hwmon={"power1_average": 1})
    fs.gpu("0000:c2:00.0", "1002:74a1", "amdgpu", card=1, render=129, hwmon={"power1_average": 1})
    hw = SimpleNamespace(drm_root=str(fs.drm_root), kfd_root=str(fs.kfd_root))
    monkeypatch.setattr(nvidia, "node_nvidia_gpu_count", lambda dev_dir="/dev": None)  # no /dev/nvidiaN: unknown
    assert node_gpu_count(hw) == 4 + 2  # the toy's 4, the two MI300X render nodes; NVIDIA unknown, not 0
    monkeypatch.setattr(gpu_pkg, "GPU_BACKENDS", {"nvml": gpu_pkg.GPU_BACKENDS["nvml"]})
    assert node_gpu_count(hw) is None  # no backend answers: unknown, never 0
