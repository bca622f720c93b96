"""NVIDIA GPU energy via NVML (``pynvml`` from nvidia-ml-py), for the job's GPUs only.

Per GPU, the best source NVML offers, probed once at start (the counter wins):

1. ``nvmlDeviceGetTotalEnergyConsumption`` -- mJ since driver load, Volta and newer
   -> ``method="counter"``, ``energy_uj = mJ x 1000``, no range (64-bit, does not wrap). Power
   (``nvmlDeviceGetPowerUsage``, a 1 s average on Ampere and newer) and the enforced power limit
   (``max_power_w``) go beside it, for accounting's counter-vs-power rule
   (:mod:`slurm_energy.accounting.crosscheck`: a moving counter is trusted over the averaged power;
   a stuck or runaway interval is charged by power integration; a reset skips that interval).
2. ``nvmlDeviceGetPowerUsage`` -- mW -> ``method="power_integration"``, ``power_w = mW / 1000``
   (accounting integrates by the trapezoidal rule). nvml.h: "On Ampere (except GA100) or newer GPUs,
   the API returns power averaged over 1 sec interval. On GA100 and older architectures,
   instantaneous power is returned." Where the driver has the field ``NVML_FI_DEV_POWER_INSTANT``
   ("current instantaneous power usage", mW; ``nvmlDeviceGetFieldValues``, R535 and newer), that
   instant reading is used instead, both for integration and beside the counter (probed once at
   start; ``DeviceStatic.extra["power_source"]`` says which).
   A counter that fails to read mid-job hands the GPU over to its power reading for the rest of the
   job (``power_integration``, flag ``nvml_counter_handed_over:<NVMLError class>``): the GPU stays
   measured while a source reads.
3. Neither: ``method="unavailable"`` (energy ``None``, never 0), or, when the site configured a
   fallback wattage, ``method="tdp_estimate"`` with ``mean_power_w = fallback_w x utilisation``
   flagged ``gpu_fallback_w`` (an estimate, labelled).

Every reading also carries utilisation (``nvmlDeviceGetUtilizationRates``, 0..1), memory in use
(bytes) and per-process SM utilisation ``proc_util = {pid: 0..1}`` from
``nvmlDeviceGetProcessUtilization`` (samples since the previous read), which accounting uses to
split a GPU shared by several jobs. Rated power (:meth:`NvmlReader.devices`) is the enforced power
limit (``nvmlDeviceGetEnforcedPowerLimit``, mW / 1000).

Superchips (GH200, GB200): NVML reports power at two scopes (nvml.h ``NVML_POWER_SCOPE_GPU`` "Targets
only GPU", ``NVML_POWER_SCOPE_MODULE`` "Targets the whole module", i.e. GPU + Grace CPU + memory). A
GPU named a superchip (:data:`SUPERCHIP_NAME`) whose power fields answer at the module scope is
charged its GPU scope: the instant power field read at ``NVML_POWER_SCOPE_GPU``
(``power_integration``, flag ``superchip_gpu_scope``), not the energy counter, whose scope NVML does
not document for a superchip. The module scope is never read
into a reading, and the Grace CPU is measured apart (its ACPI power meters,
:mod:`slurm_energy.sampling.readers.hwmon_power`), so nothing is counted twice. A superchip GPU
without the GPU-scope field keeps the counter, flagged ``superchip_scope_unverified``.

MIG: NVML measures the parent GPU only. A MIG instance reads its parent's counter/power and is
flagged ``mig_estimated``, with ``Reading.mig_fraction`` = f (f = instance slices / parent slices, see
:mod:`slurm_energy.devices.gpu.nvidia`); accounting multiplies by f, so the jobs on one GPU never sum to
more than the parent. If f is unknown the instance is ``unavailable`` (flag
``mig_fraction_unknown``) rather than charged the whole parent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slurm_energy.core import Method
from slurm_energy.devices.gpu import Gpu
from slurm_energy.devices.gpu.nvidia import mig_instance_fraction
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading, UnavailableReader

if TYPE_CHECKING:
    from slurm_energy.devices.hardware import HardwareConfig

#: nvmlDeviceGetTotalEnergyConsumption counts whole millijoules (NVML API reference): 1 mJ = 1000 uJ.
NVML_ENERGY_RESOLUTION_UJ = 1000
#: nvidia-smi --help-query-gpu, power.draw: "This reading is accurate to within +/- 5 watts." (on
#: Ampere and newer a 1 s average, on older GPUs instantaneous; nvmlDeviceGetPowerUsage is the same).
NVML_POWER_ACCURACY_W = 5.0


#: A superchip's NVML name ("NVIDIA GH200 480GB", "NVIDIA GB200"): with the module power scope
#: answering, what marks a GPU whose power NVML reports at two scopes. The name guards a discrete
#: GPU whose driver might answer the module scope too (it then keeps its energy counter).
SUPERCHIP_NAME = re.compile(r"\bG[BH]\d{3}\b")


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


@dataclass
class _Target:
    uuid: str  # what the job sees: GPU-... or MIG-...
    handle: object  # handle to read energy/power from (the parent for MIG)
    own_handle: object  # handle of the device itself (MIG handle for MIG)
    mode: str  # counter / power_integration / tdp_estimate / unavailable
    mig_fraction: float | None = None
    is_mig: bool = False
    model: str = ""
    limit_w: float | None = None
    error: str = ""
    last_ts: int = 0  # last process-utilisation sample timestamp seen, us
    instant: bool = False  # NVML_FI_DEV_POWER_INSTANT answers: read it instead of the 1 s average
    superchip: bool = False  # the power fields answer at NVML_POWER_SCOPE_MODULE (GH200, GB200)
    handed_over: str = ""  # the counter failed (this NVMLError): power integration from then on


class NvmlReader(Reader):
    """Reads the job's GPUs through NVML.

    Args:
        gpus: the job's GPUs: UUIDs (``GPU-...``, ``MIG-...``) or :class:`~slurm_energy.devices.gpu.Gpu`
            from :func:`slurm_energy.devices.gpu.nvidia.resolve_job_gpus`.
        fallback_w: site's rated wattage per GPU for GPUs with neither energy counter nor power
            reading (labelled ``tdp_estimate``); ``None`` = leave such GPUs unmeasured.
        pynvml_module: the ``pynvml`` module (default ``import pynvml``).

    Never raises: if NVML cannot initialise every reading is ``unavailable`` with flag
    ``nvml_init_failed`` (``reason`` says why).

    Raises:
        ValueError: ``fallback_w`` negative (names the field).
    """

    name = "nvml"
    device_class = "gpu"

    def __init__(self, gpus: list[str | Gpu], fallback_w: float | None = None,
                 pynvml_module: Any = None):
        if fallback_w is not None and fallback_w < 0:
            raise ValueError(f"fallback_w: GPU fallback wattage must be >= 0 W, got {fallback_w!r}")
        if pynvml_module is None:
            import pynvml

            pynvml_module = pynvml
        self.nv: Any = pynvml_module
        self.fallback_w = fallback_w
        self.reason = ""
        self._ids = [g.device_id if isinstance(g, Gpu) else str(g) for g in gpus]
        self.targets: list[_Target] = []
        self._init = False
        try:
            self.nv.nvmlInit()
            self._init = True
        except self.nv.NVMLError as e:
            self.reason = f"NVML cannot initialise: {type(e).__name__}: {e}"
            return
        for g in gpus:
            self.targets.append(self._target(g))

    # -- setup -------------------------------------------------------------------------------

    def _target(self, g: str | Gpu) -> _Target:
        nv = self.nv
        uuid = g.device_id if isinstance(g, Gpu) else str(g)
        try:
            own = nv.nvmlDeviceGetHandleByUUID(uuid)
        except nv.NVMLError as e:
            return _Target(uuid, None, None, "unavailable", error=f"nvml_error:{type(e).__name__}")
        handle, frac, is_mig = own, None, False
        try:
            is_mig = bool(nv.nvmlDeviceIsMigDeviceHandle(own))
        except nv.NVMLError:
            is_mig = False
        if is_mig:
            try:
                handle = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(own)
            except nv.NVMLError as e:
                return _Target(uuid, None, own, "unavailable", is_mig=True,
                               error=f"nvml_error:{type(e).__name__}")
            given = g.fraction if isinstance(g, Gpu) else None
            frac = given if given is not None else mig_instance_fraction(nv, own, handle)
        t = _Target(uuid, handle, own, "unavailable", mig_fraction=frac, is_mig=is_mig)
        try:
            t.model = _s(nv.nvmlDeviceGetName(handle))
        except nv.NVMLError:
            pass
        try:
            t.limit_w = nv.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
        except nv.NVMLError:
            pass
        if is_mig and frac is None:
            t.error = "mig_fraction_unknown"
            return t
        t.instant = self._instant_mw(handle) is not None
        t.superchip = bool(SUPERCHIP_NAME.search(t.model)) and self._module_scope_answers(handle)
        if t.superchip and t.instant:
            t.mode = "power_integration"  # the GPU scope, never the module's
            return t
        try:
            nv.nvmlDeviceGetTotalEnergyConsumption(handle)
            t.mode = "counter"
        except nv.NVMLError:
            try:
                if not t.instant:
                    nv.nvmlDeviceGetPowerUsage(handle)
                t.mode = "power_integration"
            except nv.NVMLError:
                t.mode = "tdp_estimate" if self.fallback_w is not None else "unavailable"
                if t.mode == "unavailable":
                    t.error = "no_energy_or_power"
        return t

    # -- Reader API --------------------------------------------------------------------------

    def devices(self) -> list[DeviceStatic]:
        """One :class:`DeviceStatic` per GPU; rated power = enforced power limit (W).

        For a MIG instance the rated power is the parent's limit x slice fraction.
        """
        if not self._init:
            return [DeviceStatic("gpu", u, extra={"unavailable": self.reason}) for u in self._ids]
        out = []
        for t in self.targets:
            rated, src = t.limit_w, "NVML enforced power limit" if t.limit_w is not None else ""
            if t.mode == "tdp_estimate":
                rated, src = self.fallback_w, "site config gpu_fallback_w"
            if t.is_mig and rated is not None and t.mig_fraction is not None:
                rated, src = rated * t.mig_fraction, src + " x MIG slice fraction"
            extra: dict[str, Any] = {"energy_source": t.mode,
                     "power_source": "NVML_FI_DEV_POWER_INSTANT" if t.instant else "nvmlDeviceGetPowerUsage"}
            if t.superchip:
                extra["power_scope"] = ("NVML_POWER_SCOPE_GPU (superchip: the module scope answers and is never added)"
                                        if t.instant else "unverified (superchip without the GPU-scope field)")
            try:  # the GPU's number, for listing GPUs in numeric order (their UUIDs carry none)
                extra["minor"] = int(self.nv.nvmlDeviceGetMinorNumber(t.handle))
            except (self.nv.NVMLError, TypeError, ValueError):
                pass
            if t.is_mig:
                extra.update(mig=True, mig_fraction=t.mig_fraction)
            if t.error:
                extra["error"] = t.error
            out.append(DeviceStatic("gpu", t.uuid, model=t.model, rated_power_w=rated,
                                    rated_power_source=src, extra=extra))
        return out

    def read(self) -> list[Reading]:
        """One :class:`Reading` per GPU, now. Never raises."""
        if not self._init:
            return [Reading("gpu", u, "unavailable", flags=["nvml_init_failed"]) for u in self._ids]
        return [self._read_one(t) for t in self.targets]

    def _read_one(self, t: _Target) -> Reading:
        nv = self.nv
        flags = []
        if t.is_mig:
            flags += ["mig_estimated"]
        if t.mode == "unavailable" or t.handle is None:
            return Reading("gpu", t.uuid, "unavailable", flags=flags + [t.error or "unavailable"],
                           mig_fraction=t.mig_fraction)
        if t.superchip:
            flags.append("superchip_gpu_scope" if t.instant else "superchip_scope_unverified")
        r = Reading("gpu", t.uuid, t.mode, flags=flags, mig_fraction=t.mig_fraction)
        r.util = self._util(t)
        r.mem_bytes = self._mem(t)
        r.proc_util = self._proc_util(t)
        try:
            if t.mode == "counter":
                r.energy_uj = int(nv.nvmlDeviceGetTotalEnergyConsumption(t.handle)) * 1000
                r.energy_resolution_uj = NVML_ENERGY_RESOLUTION_UJ
                r.power_w, r.power_accuracy_w = self._power_beside_counter(t)
                r.max_power_w = t.limit_w  # enforced power limit: a counter beyond it is a runaway
            elif t.mode == "power_integration":
                r.power_w = self._power_mw(t) / 1000.0
            else:  # tdp_estimate with the site's fallback wattage
                u = r.util
                if u is None:
                    u = 1.0
                    flags.append("util_unknown_assumed_1")
                r.mean_power_w = None if self.fallback_w is None else self.fallback_w * u
                flags.append("gpu_fallback_w")
        except nv.NVMLError as e:
            lost = getattr(nv, "NVMLError_GpuIsLost", None)
            if t.mode == "counter" and not (lost and isinstance(e, lost)):  # a lost GPU reads nothing
                # hand over to the power reading for the rest of the job
                try:
                    r.power_w = self._power_mw(t) / 1000.0
                except nv.NVMLError:
                    pass
                else:
                    t.mode, t.handed_over = "power_integration", type(e).__name__
                    r.method, r.energy_uj, r.energy_resolution_uj = Method.POWER_INTEGRATION, None, None
                    r.power_accuracy_w = r.max_power_w = None
                    r.flags = flags + [f"nvml_counter_handed_over:{t.handed_over}"]
                    return r
            return Reading("gpu", t.uuid, "unavailable", util=r.util, mem_bytes=r.mem_bytes,
                           flags=flags + [f"nvml_error:{type(e).__name__}"])
        if t.handed_over:
            r.flags = flags + [f"nvml_counter_handed_over:{t.handed_over}"]
        return r

    def _power_beside_counter(self, t: _Target) -> tuple[float | None, float | None]:
        """Power (W) read with the counter, for accounting's cross-check; (None, None) if unsupported."""
        try:
            return self._power_mw(t) / 1000.0, NVML_POWER_ACCURACY_W
        except self.nv.NVMLError:
            return None, None

    def _instant_mw(self, handle: Any) -> int | None:
        """``NVML_FI_DEV_POWER_INSTANT`` at the GPU scope in mW, or None where the driver or GPU
        lacks the field."""
        return self._field_mw(handle, "NVML_FI_DEV_POWER_INSTANT", getattr(self.nv, "NVML_POWER_SCOPE_GPU", 0))

    def _module_scope_answers(self, handle: Any) -> bool:
        """True when a power field answers at ``NVML_POWER_SCOPE_MODULE`` (a superchip)."""
        scope = getattr(self.nv, "NVML_POWER_SCOPE_MODULE", None)
        if scope is None:
            return False
        return any(self._field_mw(handle, f, scope) is not None
                   for f in ("NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE"))

    def _field_mw(self, handle: Any, field: str, scope: int) -> int | None:
        """The power field ``field`` (an ``NVML_FI_*`` name) at ``scope`` in mW; None where it
        does not answer."""
        nv = self.nv
        fid = getattr(nv, field, None)
        if fid is None:
            return None
        try:
            (v,) = nv.nvmlDeviceGetFieldValues(handle, [(fid, scope)])
        except (nv.NVMLError, AttributeError, ValueError, TypeError):
            return None
        if v.nvmlReturn != nv.NVML_SUCCESS:
            return None
        return int(v.value.uiVal)

    def _power_mw(self, t: _Target) -> float:
        """The GPU's power in mW: the instant field where it answers, else nvmlDeviceGetPowerUsage
        (raises ``NVMLError`` like it)."""
        if t.instant:
            mw = self._instant_mw(t.handle)
            if mw is not None:
                return mw
        return float(self.nv.nvmlDeviceGetPowerUsage(t.handle))

    def _util(self, t: _Target) -> float | None:
        for h in (t.own_handle, t.handle) if t.is_mig else (t.handle,):
            try:
                return float(self.nv.nvmlDeviceGetUtilizationRates(h).gpu) / 100.0
            except self.nv.NVMLError:
                continue
        return None

    def _mem(self, t: _Target) -> int | None:
        try:
            return int(self.nv.nvmlDeviceGetMemoryInfo(t.own_handle).used)
        except self.nv.NVMLError:
            return None

    def _proc_util(self, t: _Target) -> dict[int, float] | None:
        """``{pid: mean SM utilisation 0..1}`` since the previous read; {} if no process ran."""
        nv = self.nv
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(t.handle, t.last_ts)
        except nv.NVMLError_NotFound:
            return {}
        except nv.NVMLError:
            return None
        acc: dict[int, list[float]] = {}
        for s in samples:
            acc.setdefault(int(s.pid), []).append(s.smUtil / 100.0)
            t.last_ts = max(t.last_ts, int(s.timeStamp))
        return {pid: sum(v) / len(v) for pid, v in acc.items()}

    def close(self) -> None:
        """Shut NVML down (once)."""
        if self._init:
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass
            self._init = False


def open_gpu_readers(hw: HardwareConfig, gpus: list[Gpu], notes: list[str], light: bool = False) -> list[Reader]:
    """The ``nvml`` backend's reader factory (:class:`~slurm_energy.devices.gpu.GpuBackend`): one
    :class:`NvmlReader` for the job's NVIDIA GPUs, or an ``unavailable`` stand-in (flag
    ``nvml_error:<exception>``) when NVML cannot be loaded. ``light`` changes nothing (pynvml is
    cheap to import)."""
    try:
        return [NvmlReader(list[str | Gpu](gpus), fallback_w=hw.gpu_fallback_w)]
    except Exception as e:
        notes.append(f"nvml: {type(e).__name__}: {e}")
        return [UnavailableReader("gpu", [g.device_id for g in gpus], f"nvml_error:{type(e).__name__}")]
