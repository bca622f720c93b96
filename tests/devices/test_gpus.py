"""Resolving SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES to NVML devices (fake devices, real pynvml)."""

import pynvml
import pytest

from slurm_energy.devices.gpu.nvidia import GpuResolveError, resolve_job_gpus
from tests.fakes.nvml import FakeGpu, FakeMig, install

U0 = "GPU-11111111-aaaa-bbbb-cccc-000000000000"
U1 = "GPU-22222222-aaaa-bbbb-cccc-000000000001"
U2 = "GPU-22223333-aaaa-bbbb-cccc-000000000002"
M1 = "MIG-9b7a0c2e-0000-5555-8888-000000000001"
M2 = "MIG-9b7a0c2e-0000-5555-8888-000000000002"


def node():
    # NVML index order 0,1,2; minor numbers deliberately differ from indices (3, 0, 1)
    return [
        FakeGpu(U0, minor=3, name="NVIDIA H100 80GB HBM3"),
        FakeGpu(U1, minor=0),
        FakeGpu(U2, minor=1, migs=[FakeMig(M1, gi=1, ci=0, gi_slices=3), FakeMig(M2, gi=2, ci=0, gi_slices=4)]),
    ]


def test_slurm_job_gpus_physical_indices(monkeypatch):
    install(monkeypatch, node())
    got = resolve_job_gpus(slurm_job_gpus="0,2")
    assert [(g.device_id, g.physical_index, g.minor) for g in got] == [(U0, 0, 3), (U2, 2, 1)]
    assert got[0].model == "NVIDIA H100 80GB HBM3"
    assert got.reason == ""


def test_dev_nvidia_is_minor_number_not_index(monkeypatch):
    install(monkeypatch, node())
    # /dev/nvidia0 is minor 0 -> NVML index 1 (U1), not index 0
    (g,) = resolve_job_gpus(slurm_job_gpus="/dev/nvidia0")
    assert (g.device_id, g.physical_index, g.minor) == (U1, 1, 0)
    (g,) = resolve_job_gpus(slurm_job_gpus="nvidia3")
    assert g.device_id == U0
    with pytest.raises(GpuResolveError, match="minor number 7"):
        resolve_job_gpus(slurm_job_gpus="/dev/nvidia7")


def test_uuid_full_and_unique_prefix_and_ambiguous(monkeypatch):
    install(monkeypatch, node())
    assert [g.device_id for g in resolve_job_gpus(cuda_visible_devices=U1)] == [U1]
    assert [g.device_id for g in resolve_job_gpus(cuda_visible_devices="GPU-1111")] == [U0]
    # "GPU-" optional; all digits = ordinal
    assert [g.device_id for g in resolve_job_gpus(cuda_visible_devices="22223333-a")] == [U2]
    with pytest.raises(GpuResolveError, match=r"CUDA_VISIBLE_DEVICES=GPU-2222.*ambiguous.*2 GPUs"):
        resolve_job_gpus(cuda_visible_devices="GPU-2222")
    with pytest.raises(GpuResolveError, match="no GPU UUID starts with"):
        resolve_job_gpus(cuda_visible_devices="GPU-ffff")


def test_mig_uuid_and_legacy_mig_name(monkeypatch):
    install(monkeypatch, node())
    (a,) = resolve_job_gpus(cuda_visible_devices=M1)
    # 3 GPU-instance slices of 7 -> 3/7
    assert (a.device_id, a.parent_id, a.physical_index, a.gi, a.ci) == (M1, U2, 2, 1, 0)
    assert a.fraction == pytest.approx(3 / 7)
    (b,) = resolve_job_gpus(cuda_visible_devices=f"MIG-{U2}/2/0")
    assert b.device_id == M2 and b.fraction == pytest.approx(4 / 7)
    with pytest.raises(GpuResolveError, match="no MIG instance gi=5 ci=0"):
        resolve_job_gpus(cuda_visible_devices=f"MIG-{U2}/5/0")


def test_uuid_cvd_wins_over_slurm_indices(monkeypatch):
    install(monkeypatch, node())
    got = resolve_job_gpus(slurm_job_gpus="2", cuda_visible_devices=f"{M1},{M2}")
    assert [g.device_id for g in got] == [M1, M2]


def test_numeric_cvd_is_renumbered_ordinal_not_nvml_index(monkeypatch):
    install(monkeypatch, node())
    # in-job CUDA_VISIBLE_DEVICES=0 with SLURM_JOB_GPUS=2: the GPU is NVML index 2, not 0
    assert [g.device_id for g in resolve_job_gpus(slurm_job_gpus="2", cuda_visible_devices="0")] == [U2]
    with pytest.raises(GpuResolveError, match="renumbered ordinal"):
        resolve_job_gpus(cuda_visible_devices="0")
    assert [g.device_id for g in resolve_job_gpus(cuda_visible_devices="1", cuda_ordinals_are_nvml=True)] == [U1]


def test_index_out_of_range_and_duplicates(monkeypatch):
    install(monkeypatch, node())
    with pytest.raises(GpuResolveError, match="SLURM_JOB_GPUS=9: NVML index 9 does not exist"):
        resolve_job_gpus(slurm_job_gpus="9")
    assert [g.device_id for g in resolve_job_gpus(slurm_job_gpus="1,/dev/nvidia0")] == [U1]  # same GPU once


def test_no_gpus_and_no_driver(monkeypatch):
    got = resolve_job_gpus(slurm_job_gpus="", cuda_visible_devices="NoDevFiles")
    assert got == [] and "no GPUs allocated" in got.reason
    calls = install(monkeypatch, node(), init_error=pynvml.NVMLError_DriverNotLoaded)
    got = resolve_job_gpus(slurm_job_gpus="0")
    assert got == [] and "NVMLError_DriverNotLoaded" in got.reason and calls["init"] == 1


def test_this_machine_has_no_nvidia_driver():
    # Real pynvml, no monkeypatch: on this CI box (no driver) resolution yields [] with a reason.
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    except pynvml.NVMLError:
        pass
    got = resolve_job_gpus(slurm_job_gpus="0")
    assert got == [] and got.reason.startswith("NVML cannot initialise")


def test_all_if_unset_outside_slurm(monkeypatch):
    install(monkeypatch, node())
    assert [g.device_id for g in resolve_job_gpus("", "", all_if_unset=True)] == [U0, U1, U2]  # NVML order
    assert resolve_job_gpus("", "") == []  # default: nothing allocated, nothing resolved
