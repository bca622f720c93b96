"""AMD GPUs through AMD SMI's Python binding (``amdsmi``), where it is installed (sampler only).

``amdsmi`` needs ROCm's native ``libamd_smi.so``; without it the import fails (amdsmi 7.0.2 raises
``KeyError`` and prints to stdout), so it is imported here, inside the detached sampler, never in
the Prolog, and any failure falls back to the hwmon reader (:mod:`.drm_hwmon`).

Per card (located by PCI bus id, ``amdsmi_get_processor_handle_from_bdf``), the best source, chosen
once at start -- counter first, power integration second, across both sources:

1. ``amdsmi_get_energy_count`` -> accumulator x ``counter_resolution`` (µJ per count; AMD SMI
   "Power Queries": the accumulator is 64-bit) -> ``method="counter"``, no range. The accumulator's
   key changed between releases (ROCm/amdsmi ``py-interface/amdsmi_interface.py``): ``power`` in ROCm
   6.0-6.2, ``power`` and ``energy_accumulator`` in 6.3 ("deprecating in 6.4"), ``energy_accumulator``
   in 7.x; both are read (:func:`energy_uj`);
2. the hwmon reader's ``energyN_input`` counter, if the card has one;
3. ``amdsmi_get_power_info``: ``current_socket_power`` (MI300 and newer) else
   ``average_socket_power`` (MI200 and earlier), W -> ``method="power_integration"``;
4. the hwmon reader's choice (power file, labelled fallback, or ``unavailable``).

A card that fails to read through amdsmi (any library error, a missing key, a wrong type) is
handed over for the rest of the job to the hwmon reader's source for it (power integration of
``power1_average``/``power1_input``, or its labelled fallback): every later reading is the hwmon
one, flagged ``amdsmi_handed_over:<error>``; the card never turns ``unavailable`` while hwmon reads
(the interval between the two sources is dropped, ``method_changed``). A die of a multi-die package
(MI250X) is read through its package's primary die (the secondary's counter reads 0, rocm-smi
``checkIfSecondaryDie``), with the hwmon reader's package share.

Utilisation: ``amdsmi_get_gpu_activity``'s ``gfx_activity`` (%). Per-process use
(``amdsmi_get_gpu_process_list``: cumulative GFX engine time per PID, ns; in ROCm 6.0/6.1 a list of
process handles resolved by ``amdsmi_get_gpu_process_info``, from 6.2 a list of dicts) becomes
``proc_util = {pid: engine-time delta / wall-time delta}`` in [0, 1], which accounting uses to
split a card shared by several jobs, as for NVML. Partitions and tiles carry the share flags of the
hwmon reader (the card's energy x fraction).
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading
from slurm_energy.sampling.readers.drm_hwmon import DrmHwmonReader


def import_amdsmi() -> tuple[Any, str]:
    """``(module, "")`` or ``(None, why)``; never raises (the binding fails oddly without ROCm)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            import amdsmi
        return amdsmi, ""
    except Exception as e:  # ImportError, or KeyError/OSError when libamd_smi.so is missing
        return None, f"amdsmi not importable: {type(e).__name__}: {e}"


def energy_uj(e: dict[str, Any]) -> tuple[int, float]:
    """``amdsmi_get_energy_count``'s dict -> (energy in µJ, resolution in µJ per count), for every
    ROCm 6.x/7.x shape (module docstring).

    Raises:
        KeyError: neither ``energy_accumulator`` nor ``power`` is there; TypeError/ValueError: not numbers.
    """
    acc = e["energy_accumulator"] if "energy_accumulator" in e else e["power"]
    res = float(e["counter_resolution"])
    if isinstance(acc, bool) or not isinstance(acc, (int, float)) or res <= 0:
        raise TypeError(f"energy count {acc!r} x resolution {res!r}: not a count and a positive resolution")
    return int(acc * res), res


@dataclass
class _Target:
    index: int  # position in the hwmon reader's targets
    handle: object = None
    mode: str = "hwmon"  # counter | power_integration | hwmon (delegate)
    power_key: str = ""
    last_proc: dict[int, int] = field(default_factory=dict)  # pid -> cumulative gfx ns at last_t
    last_t: float | None = None
    handed_over: str = ""  # why amdsmi was given up for this card (its hwmon source reads instead)


class AmdSmiReader(Reader):
    """The job's AMD GPUs through ``amdsmi``, the hwmon reader filling what amdsmi cannot.

    Args:
        hwmon: the :class:`DrmHwmonReader` for the same GPUs (fallback and rated power).
        amdsmi_module: the ``amdsmi`` module (tests pass a stand-in; default: import it).
        clock: monotonic seconds, for per-process utilisation.

    Never raises: if amdsmi cannot initialise every GPU is read by ``hwmon`` (``reason`` says why).
    """

    name = "amdsmi"
    device_class = "gpu"

    def __init__(self, hwmon: DrmHwmonReader, amdsmi_module: Any = None,
                 clock: Callable[[], float] = time.monotonic):
        self.hwmon = hwmon
        self.clock = clock
        self.reason = ""
        self.smi = amdsmi_module
        if self.smi is None:
            self.smi, self.reason = import_amdsmi()
        self._init = False
        self.targets = [_Target(i) for i in range(len(hwmon.targets))]
        if self.smi is None:
            return
        try:
            self.smi.amdsmi_init()
            self._init = True
        except self.smi.AmdSmiException as e:
            self.reason = f"amdsmi cannot initialise: {e}"
            return
        for t in self.targets:
            self._choose(t)

    def _choose(self, t: _Target) -> None:
        smi, ht = self.smi, self.hwmon.targets[t.index]
        if ht.gpu.vendor != "amd" or ht.gpu.fraction_unknown:
            return
        bdf = ht.src.pci_bus_id if ht.src is not None else ht.gpu.bus_id  # a package's primary die
        try:
            t.handle = smi.amdsmi_get_processor_handle_from_bdf(bdf)
        except smi.AmdSmiException:
            return
        try:
            if energy_uj(smi.amdsmi_get_energy_count(t.handle))[0] > 0:  # 0: a secondary die (rocm-smi)
                t.mode = "counter"
                return
        except (smi.AmdSmiException, KeyError, TypeError, ValueError):
            pass
        if ht.mode == "counter":
            return  # the driver's energy file beats amdsmi's power
        try:
            info = smi.amdsmi_get_power_info(t.handle)
        except smi.AmdSmiException:
            return
        for k in ("current_socket_power", "average_socket_power"):
            if isinstance(info.get(k), (int, float)):
                t.mode, t.power_key = "power_integration", k
                return

    def devices(self) -> list[DeviceStatic]:
        """The hwmon reader's inventory, ``energy_source`` saying which source is read."""
        out = self.hwmon.devices()
        for d, t in zip(out, self.targets):
            if t.mode != "hwmon":
                d.extra["energy_source"] = f"amdsmi {t.mode}"
        return out

    def read(self) -> list[Reading]:
        """One :class:`Reading` per GPU, now. Never raises."""
        fallback = self.hwmon.read()
        if not self._init:
            return fallback
        out = []
        for t, fb in zip(self.targets, fallback):
            if t.handed_over:
                fb.flags = list(fb.flags) + [f"amdsmi_handed_over:{t.handed_over}"]
                out.append(fb)
            else:
                out.append(fb if t.mode == "hwmon" else self._read_one(t, fb))
        return out

    def _read_one(self, t: _Target, fb: Reading) -> Reading:
        smi = self.smi
        flags = [f for f in fb.flags if f.startswith(("share_", "partition_", "tile_", "package_"))]
        r = Reading("gpu", fb.device_id, t.mode, flags=flags + ["amdsmi"], mem_bytes=fb.mem_bytes)
        try:
            if t.mode == "counter":
                r.energy_uj, res = energy_uj(smi.amdsmi_get_energy_count(t.handle))
                r.energy_resolution_uj = max(1, round(res))
                r.power_w = self._power_beside_counter(t)  # accounting cross-checks the counter with it
            else:
                r.power_w = float(smi.amdsmi_get_power_info(t.handle)[t.power_key])
        except (smi.AmdSmiException, KeyError, TypeError, ValueError) as exc:
            # hand the card over to its hwmon source for the rest of the job (module docstring)
            t.handed_over = type(exc).__name__
            fb.flags = list(fb.flags) + [f"amdsmi_handed_over:{t.handed_over}"]
            return fb
        r.util = self._util(t)
        if r.util is None:
            r.util = fb.util
        r.proc_util = self._proc_util(t)
        return r

    def _power_beside_counter(self, t: _Target) -> float | None:
        """Socket power (W) read with the counter, or None (not supported / no power key)."""
        try:
            info = self.smi.amdsmi_get_power_info(t.handle)
        except (self.smi.AmdSmiException, AttributeError):
            return None
        for k in ("current_socket_power", "average_socket_power"):
            v = info.get(k) if isinstance(info, dict) else None
            if isinstance(v, (int, float)) and v >= 0:
                return float(v)
        return None

    def _util(self, t: _Target) -> float | None:
        try:
            v = self.smi.amdsmi_get_gpu_activity(t.handle).get("gfx_activity")
        except self.smi.AmdSmiException:
            return None
        return v / 100.0 if isinstance(v, (int, float)) else None

    def _proc_util(self, t: _Target) -> dict[int, float] | None:
        """``{pid: share of the interval the GFX engine ran the PID}``; {} on the first read."""
        try:
            procs = self.smi.amdsmi_get_gpu_process_list(t.handle)
        except self.smi.AmdSmiException:
            return None
        now = self.clock()
        cur = {}
        for p in procs:
            if not isinstance(p, dict):  # ROCm 6.0/6.1: a process handle, details by a second call
                try:
                    p = self.smi.amdsmi_get_gpu_process_info(t.handle, p)
                except (self.smi.AmdSmiException, AttributeError):
                    continue
            gfx = (p.get("engine_usage") or {}).get("gfx") if isinstance(p, dict) else None
            if isinstance(gfx, int) and isinstance(p.get("pid"), int):
                cur[p["pid"]] = gfx
        out = {}
        if t.last_t is not None and now > t.last_t:
            dt_ns = (now - t.last_t) * 1e9
            for pid, ns in cur.items():
                d = ns - t.last_proc.get(pid, ns)
                out[pid] = min(1.0, max(0.0, d / dt_ns))
        t.last_proc, t.last_t = cur, now
        return out

    def close(self) -> None:
        """Shut amdsmi down (once)."""
        if self._init:
            try:
                self.smi.amdsmi_shut_down()
            except self.smi.AmdSmiException:
                pass
            self._init = False
