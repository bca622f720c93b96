"""Fake NVML devices behind the real ``pynvml`` module (this machine has no NVIDIA driver).

:func:`install` monkeypatches the ``pynvml`` functions our code calls so they answer from
:class:`FakeGpu` objects, returning pynvml's own ctypes structs and raising pynvml's own
``NVMLError`` subclasses (``NVMLError_NotSupported``, ``NVMLError_NotFound``...), as the library
does on real hardware. Handles are the fake objects themselves.

Units and semantics, from the NVML API reference (nvml.h of nvidia-ml-py 13.x, the installed one):

* ``nvmlDeviceGetTotalEnergyConsumption``: "total energy consumption for this GPU in millijoules (mJ)
  since the driver was last reloaded" (Volta and newer): an ``int`` that restarts from 0 when the
  driver reloads (:attr:`FakeGpu.energy_mj`; set it lower to model a reload).
* ``nvmlDeviceGetPowerUsage``: mW; "On Ampere (except GA100) or newer GPUs, the API returns power
  averaged over 1 sec interval. On GA100 and older architectures, instantaneous power is returned."
  (:attr:`FakeGpu.power_mw`).
* ``nvmlDeviceGetFieldValues`` with ``NVML_FI_DEV_POWER_INSTANT`` (186, "current instantaneous power
  usage", mW) / ``NVML_FI_DEV_POWER_AVERAGE`` (185): one ``c_nvmlFieldValue_t`` per field with its own
  ``nvmlReturn`` (NOT_SUPPORTED per field where the GPU lacks it, the call itself succeeding) and an
  unsigned-int value (:attr:`FakeGpu.power_instant_mw`, None = not supported: pre-Hopper / old driver).
* Power scopes (nvml.h, ``nvmlPowerScopeType_t``: ``NVML_POWER_SCOPE_GPU`` 0 "Targets only GPU",
  ``NVML_POWER_SCOPE_MODULE`` 1 "Targets the whole module", the "GPU and module (e.g. GPU + CPU)"
  telemetry of a superchip): a field id passed as ``(fieldId, scopeId)`` (pynvml sets
  ``c_nvmlFieldValue_t.scopeId``; a bare id is scope 0). Only a superchip (GH200, GB200) answers the
  module scope (:attr:`FakeGpu.module_power_mw`); a discrete GPU answers NOT_SUPPORTED there.
* ``nvmlDeviceGetEnforcedPowerLimit``: mW (A100 SXM4 40 GB: 400 W; H100 SXM5: 700 W).
* ``nvmlDeviceGetProcessUtilization``: ``NVMLError_NotFound`` when no sample is newer than the
  timestamp passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pynvml


@dataclass
class FakeMig:
    """A MIG instance (compute instance) of a fake GPU."""

    uuid: str
    gi: int
    ci: int
    gi_slices: int  # nvmlDeviceAttributes_t.gpuInstanceSliceCount
    parent: FakeGpu | None = None


@dataclass
class FakeGpu:
    """A fake physical GPU. ``None`` for a quantity = NVML raises NotSupported for it."""

    uuid: str
    minor: int
    name: str = "NVIDIA A100-SXM4-40GB"
    energy_mj: int | None = 0  # nvmlDeviceGetTotalEnergyConsumption
    power_mw: int | None = 100_000  # nvmlDeviceGetPowerUsage
    limit_mw: int | None = 400_000  # nvmlDeviceGetEnforcedPowerLimit
    util_gpu: int = 0  # percent
    util_mem: int = 0
    mem_used: int = 0
    mem_total: int = 40 * 2**30
    # [(pid, smUtil percent)]; None = NotSupported; [] = NotFound (no samples since timestamp)
    proc_samples: list | None = field(default_factory=list)
    migs: list = field(default_factory=list)
    mig_total_slices: int = 7  # largest GPU-instance profile slice count
    power_instant_mw: int | None = None  # NVML_FI_DEV_POWER_INSTANT; None = field NOT_SUPPORTED
    module_power_mw: int | None = None  # the power fields at NVML_POWER_SCOPE_MODULE (superchip only)

    def __post_init__(self):
        for m in self.migs:
            m.parent = self


def _err(cls):
    return cls()


def install(monkeypatch, gpus: list[FakeGpu], init_error: type | None = None) -> dict:
    """Patch ``pynvml`` to expose ``gpus`` (NVML index = list position). Returns a call counter.

    ``init_error``: an ``NVMLError`` subclass ``nvmlInit`` raises (e.g. ``NVMLError_DriverNotLoaded``).
    """
    calls = {"init": 0, "shutdown": 0}
    by_uuid = {g.uuid: g for g in gpus}
    for g in gpus:
        for m in g.migs:
            by_uuid[m.uuid] = m

    def init(*a):
        calls["init"] += 1
        if init_error is not None:
            raise init_error()

    def shutdown():
        calls["shutdown"] += 1

    def phys(h) -> FakeGpu:
        if isinstance(h, FakeMig):
            raise pynvml.NVMLError_NotSupported()
        return h

    def by_index(i):
        if not 0 <= i < len(gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return gpus[i]

    def by_uuid_fn(u):
        u = u.decode() if isinstance(u, bytes) else u
        if u not in by_uuid:
            raise pynvml.NVMLError_NotFound()
        return by_uuid[u]

    def mig_mode(h):
        if not phys(h).migs:
            return [0, 0]
        return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]

    def mig_by_index(h, k):
        g = phys(h)
        if k >= len(g.migs):
            raise pynvml.NVMLError_NotFound()
        return g.migs[k]

    def mig_handle(h):
        return isinstance(h, FakeMig)

    def parent_of(h):
        if not isinstance(h, FakeMig):
            raise pynvml.NVMLError_InvalidArgument()
        return h.parent

    def gi_id(h):
        if not isinstance(h, FakeMig):
            raise pynvml.NVMLError_InvalidArgument()
        return h.gi

    def ci_id(h):
        if not isinstance(h, FakeMig):
            raise pynvml.NVMLError_InvalidArgument()
        return h.ci

    def attributes(h):
        if not isinstance(h, FakeMig):
            raise pynvml.NVMLError_NotSupported()  # "currently only supports MIG device handles"
        a = pynvml.c_nvmlDeviceAttributes()
        a.gpuInstanceSliceCount = h.gi_slices
        a.computeInstanceSliceCount = h.gi_slices
        return a

    def profile_info(h, prof, version=2):
        g = phys(h)
        # profile ids 0..: 1,2,3,4,7 slices (NVML_GPU_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE); others absent
        slices = {pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE: 1, pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE: 2,
                  pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE: 3, pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE: 4,
                  pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE: 7}
        if prof not in slices or slices[prof] > g.mig_total_slices:
            raise pynvml.NVMLError_NotSupported()
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.sliceCount = slices[prof]
        return info

    def energy(h):
        g = phys(h)
        if g.energy_mj is None:
            raise pynvml.NVMLError_NotSupported()
        return g.energy_mj

    def power(h):
        g = phys(h)
        if g.power_mw is None:
            raise pynvml.NVMLError_NotSupported()
        return g.power_mw

    def field_values(h, ids):
        g = phys(h)
        arr = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for v, fid in zip(arr, ids):
            fid, scope = fid if isinstance(fid, tuple) else (fid, pynvml.NVML_POWER_SCOPE_GPU)
            v.fieldId, v.scopeId = fid, scope
            if scope == pynvml.NVML_POWER_SCOPE_MODULE:
                val = g.module_power_mw if fid in (pynvml.NVML_FI_DEV_POWER_INSTANT,
                                                   pynvml.NVML_FI_DEV_POWER_AVERAGE) else None
            else:
                val = {pynvml.NVML_FI_DEV_POWER_INSTANT: g.power_instant_mw,
                       pynvml.NVML_FI_DEV_POWER_AVERAGE: g.power_mw}.get(fid)
            if val is None:
                v.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
            else:
                v.nvmlReturn, v.valueType = pynvml.NVML_SUCCESS, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                v.value.uiVal = val
        return arr

    def limit(h):
        g = phys(h)
        if g.limit_mw is None:
            raise pynvml.NVMLError_NotSupported()
        return g.limit_mw

    def util(h):
        g = phys(h)
        u = pynvml.c_nvmlUtilization_t()
        u.gpu, u.memory = g.util_gpu, g.util_mem
        return u

    def mem(h, version=None):
        g = phys(h)
        m = pynvml.c_nvmlMemory_t()
        m.total, m.used, m.free = g.mem_total, g.mem_used, g.mem_total - g.mem_used
        return m

    def proc_util(h, ts):
        g = phys(h)
        if g.proc_samples is None:
            raise pynvml.NVMLError_NotSupported()
        if not g.proc_samples:
            raise pynvml.NVMLError_NotFound()
        out = []
        for pid, sm in g.proc_samples:
            s = pynvml.c_nvmlProcessUtilizationSample_t()
            s.pid, s.smUtil, s.timeStamp = pid, sm, ts + 1
            out.append(s)
        return out

    def minor(h):
        return phys(h).minor

    def name(h):
        return phys(h).name

    def uuid(h):
        return h.uuid

    patches = {
        "nvmlInit": init,
        "nvmlShutdown": shutdown,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": by_index,
        "nvmlDeviceGetHandleByUUID": by_uuid_fn,
        "nvmlDeviceGetUUID": uuid,
        "nvmlDeviceGetMinorNumber": minor,
        "nvmlDeviceGetName": name,
        "nvmlDeviceGetMigMode": mig_mode,
        "nvmlDeviceGetMaxMigDeviceCount": lambda h: 7 if phys(h).migs else 0,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_by_index,
        "nvmlDeviceIsMigDeviceHandle": mig_handle,
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle": parent_of,
        "nvmlDeviceGetGpuInstanceId": gi_id,
        "nvmlDeviceGetComputeInstanceId": ci_id,
        "nvmlDeviceGetAttributes": attributes,
        "nvmlDeviceGetGpuInstanceProfileInfo": profile_info,
        "nvmlDeviceGetTotalEnergyConsumption": energy,
        "nvmlDeviceGetPowerUsage": power,
        "nvmlDeviceGetEnforcedPowerLimit": limit,
        "nvmlDeviceGetFieldValues": field_values,
        "nvmlDeviceGetUtilizationRates": util,
        "nvmlDeviceGetMemoryInfo": mem,
        "nvmlDeviceGetProcessUtilization": proc_util,
    }
    for k, v in patches.items():
        monkeypatch.setattr(pynvml, k, v)
    return calls
