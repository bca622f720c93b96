"""Choose this node's readers from the site config: measured where possible, labelled models else.

* CPU: RAPL package zones (``counter``) when readable; otherwise hwmon power meters that measure the
  CPU sockets (``power_integration``: NVIDIA Grace ACPI power meters, X-Gene/Altra SoC rails;
  :mod:`slurm_energy.sampling.readers.hwmon_power`); otherwise the TDP model (``tdp_estimate``),
  flagged ``eacces_fallback`` when RAPL exists but ``energy_uj`` is root-only. Per-CPU-family
  sources: docs/CPU_SOURCES.md.
* RAM: RAPL dram zones when present and readable; none where the CPU meter holds the memory (Grace
  socket meters include LPDDR5X) or memory rails are metered (SMpro DIMM rails); otherwise W/GB x
  memory (``tdp_estimate``).
* GPU: the job's GPUs (resolved once in the Prolog, :mod:`slurm_energy.devices.gpu`), each read by
  its backend's reader: NVML for NVIDIA (by UUID), the drivers' hwmon files (and amdsmi) for
  AMD/Intel (by PCI bus id).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slurm_energy.devices.hardware import HardwareConfig
from slurm_energy.devices.info import cpu_model, cpu_topology
from slurm_energy.sampling.readers.base import Reader, UnavailableReader
from slurm_energy.sampling.readers.tdp import CpuTdpReader, RamModelReader

TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurm_energy.devices.gpu import Gpu
    from slurm_energy.sampling.files import FileSource


def build_readers(hw: HardwareConfig, gpus: Sequence[Gpu | Mapping[str, Any]] = (),
                  unresolved_gpus: Sequence[str] | None = None, light: bool = False,
                  files: FileSource | None = None) -> tuple[list[Reader], list[str]]:
    """Readers for this node and notes on the choices made.

    Args:
        hw: the site config's ``hardware`` (:meth:`HardwareConfig.of` makes it from any form).
        gpus: the job's GPUs, any vendor (:class:`~slurm_energy.devices.gpu.Gpu` s or their dicts
            from the Prolog context): each backend's reader factory opens the readers for its own
            (``GpuBackend.reader``: NVML; hwmon, and amdsmi for AMD GPUs where it is installed).
        unresolved_gpus: GPUs Slurm allocated that could not be resolved to devices (e.g.
            "gpu-index-0" when NVML is absent): reported as ``unavailable``, never as 0 J.
        light: the Prolog's own reading row: no vendor library slow to import (amdsmi); a backend
            may then leave its GPUs to the sampler's first sample (one source per series).
        files: where the RAPL counters and /proc/stat and /proc/meminfo are read at each read
            (:mod:`slurm_energy.sampling.files`; default: descriptors kept open).
    Returns:
        (readers, notes) -- notes are short strings for the node summary ("rapl: eacces -> tdp").
    """
    from slurm_energy.sampling.readers.rapl import RaplReader

    readers: list[Reader] = []
    notes: list[str] = []
    have_cpu = have_ram = False
    try:
        rapl = RaplReader(hw.rapl_root, files)
        if rapl.unbounded_zones():  # a range but no power limit (AMD): bound wraps by rated power
            from slurm_energy.devices.rated import cpu_tdp

            w_socket, _w, src, _fb = cpu_tdp(hw, cpu_model(), cpu_topology()[1])
            rapl.bound_wraps(w_socket, src)
        if rapl.available:
            first = rapl.read()
            readable = [r for r in first if r.method == "counter"]
            if readable:
                readers.append(rapl)
                have_cpu = any(r.device_class == "cpu" for r in readable)
                have_ram = any(r.device_class == "ram" for r in readable)
            elif any("eacces" in r.flags for r in first):
                notes.append("eacces_fallback: RAPL energy_uj not readable; CPU/RAM use the TDP model")
        else:
            notes.append(f"rapl: {rapl.reason}")
    except Exception as e:  # never let a reader break the sampler
        notes.append(f"rapl: {type(e).__name__}: {e}")
    if not have_cpu:
        have_cpu, meter_has_ram = _hwmon_cpu(hw, readers, notes, files)
        if meter_has_ram and not have_ram:
            have_ram = True
            notes.append("ram: measured by the hwmon power meters (Grace socket meters hold LPDDR5X; SMpro DIMM "
                         "rails); no RAM model")
    if not have_cpu:
        from slurm_energy.devices.rated import cpu_tdp  # the CPU tables: only for the TDP model

        model = cpu_model()
        sockets, cores, _logical = cpu_topology()
        w_socket, _w_core, src, fallback = cpu_tdp(hw, model, cores)
        flags = ["tdp_fallback_per_core"] if fallback else []
        if any(n.startswith("eacces_fallback") for n in notes):
            flags.append("eacces_fallback")
        readers.append(CpuTdpReader(w_socket * sockets, model, cores * sockets, src, flags, files))
    if not have_ram:
        from slurm_energy import units

        ram_src = (units.RAM_W_PER_GB_SOURCE if hw.ram_w_per_gb == units.RAM_W_PER_GB
                   else "site config hardware.ram_w_per_gb")  # the default is no site's setting
        readers.append(RamModelReader(hw.ram_w_per_gb, f"{hw.ram_w_per_gb:g} W/GB ({ram_src})", files))
    readers.extend(gpu_readers(hw, gpus, notes, light))
    if unresolved_gpus:
        readers.append(UnavailableReader("gpu", unresolved_gpus, "gpu_not_resolved"))
    return readers, notes


def _hwmon_cpu(hw: HardwareConfig, readers: list[Reader], notes: list[str],
               files: FileSource | None) -> tuple[bool, bool]:
    """Append a :class:`~slurm_energy.sampling.readers.hwmon_power.HwmonPowerReader` for the hwmon
    meters that measure the CPU sockets, if any answers. Returns (CPU measured, memory inside)."""
    try:
        from slurm_energy.sampling.readers.hwmon_power import (
            HwmonPowerReader,
            covers_memory,
            cpu_meters,
            find_power_meters,
            memory_meters,
        )

        meters = find_power_meters(hw.hwmon_root)
        devs = cpu_meters(meters)
        if not devs:
            return False, False
        devs += memory_meters(meters)
        r = HwmonPowerReader(devs, files)
        if not any(x.method == "power_integration" for x in r.read()):
            notes.append("hwmon-power: CPU meters found but none answers; CPU uses the TDP model")
            r.close()
            return False, False
        readers.append(r)
        notes.append("cpu: measured by hwmon power meters: " + "; ".join(f"{d.device_id} = {d.covers}" for d in devs))
        return True, covers_memory(devs)
    except Exception as e:  # never let a reader break the sampler
        notes.append(f"hwmon-power: {type(e).__name__}: {e}")
        return False, False


def gpu_readers(hw: HardwareConfig, gpus: Sequence[Gpu | Mapping[str, Any]], notes: list[str],
                light: bool = False) -> list[Reader]:
    """The readers of the job's GPUs: each backend's reader factory (``GpuBackend.reader``, from
    :data:`slurm_energy.devices.gpu.GPU_BACKENDS`) for the GPUs it resolved. A backend that is not
    registered or whose factory fails leaves its GPUs ``unavailable`` (``reader_error:<class>``)."""
    if not gpus:  # a job without GPUs imports nothing of the registry (the Prolog's import count)
        return []
    from slurm_energy.devices.gpu import backend, by_backend, load

    out: list[Reader] = []
    for name, mine in by_backend(gpus).items():
        try:
            factory = load(backend(name).reader)
            out.extend(factory(hw, mine, notes, light))
        except Exception as e:  # never let a reader break the sampler
            notes.append(f"gpu backend {name}: {type(e).__name__}: {e}")
            out.append(UnavailableReader("gpu", [g.device_id for g in mine], f"reader_error:{type(e).__name__}"))
    return out
