"""A stand-in for AMD SMI's Python binding (``amdsmi``), LABELLED AS A FAKE, one shape per ROCm release.

Why a fake and not the real module with functions patched (as for ``pynvml``): ``pip install
amdsmi`` (7.0.2) installs, but ``import amdsmi`` fails on a machine without ROCm's native
``libamd_smi.so`` (it prints "Unable to find libamd_smi.so" and raises ``KeyError:
'libamd_smi.so'`` from ``amdsmi_wrapper``), so the real module cannot be imported here.

What is copied, per release, from ROCm/amdsmi ``py-interface/amdsmi_interface.py`` at the tags
``rocm-6.0.0``, ``rocm-6.1.0``, ``rocm-6.2.0`` and the 6.3 development head (commit 0ceca28, Oct 2024),
and amdsmi 7.0.2 (names, keys and types only):

* ``amdsmi_get_energy_count(handle)`` returns
  - 6.0 / 6.1 / 6.2: ``{'power': <c_uint64 accumulator>, 'counter_resolution': <c_float, uJ per
    count>, 'timestamp': <c_uint64 ns>}`` -- the accumulator under the key ``power``;
  - 6.3: ``{'power': ..., 'energy_accumulator': ..., 'counter_resolution': ..., 'timestamp': ...}``
    (``'power'`` "deprecating in 6.4");
  - 7.x: ``{'energy_accumulator', 'counter_resolution', 'timestamp'}``.
  15.3 uJ per count: the resolution the library reports for the SMU's accumulator, which the kernel
  documents as "Energy (15.259uJ (2^-16) units)" (``kgd_pp_interface.h``, ``gpu_metrics_v1_3``
  ``energy_accumulator``). Types as ctypes gives them: the accumulator ``int``, the resolution ``float``.
* ``amdsmi_get_gpu_process_list(handle)``
  - 6.0 / 6.1: a list of opaque ``amdsmi_process_handle_t``; the details come from
    ``amdsmi_get_gpu_process_info(handle, process)``;
  - 6.2 and later: a list of dicts ``{"name", "pid", "mem", "engine_usage": {"gfx", "enc"} (ns),
    "memory_usage": {"gtt_mem", "cpu_mem", "vram_mem"}, ...}`` (``amdsmi_get_gpu_process_info`` gone).
* ``amdsmi_get_power_info``: ``current_socket_power`` / ``average_socket_power`` (W) and the voltages,
  a field that reads 0xFFFF returned as "N/A" (6.3); ``amdsmi_get_gpu_activity``: ``gfx_activity`` (%).
* exceptions (``amdsmi_exception.py``): ``AmdSmiException`` > ``AmdSmiLibraryException(err_code)``;
  2 = NOT_SUPPORTED, 10 = NO_PERM, 34 = INIT_ERROR.
* an MI200 secondary die: its energy counter reads 0 (rocm-smi ``checkIfSecondaryDie`` in ROCm 6:
  "secondary die can be determined by checking if energy counter == 0") and its power 0.
"""

from __future__ import annotations

AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_INIT_ERROR = 34

RELEASES = ("6.0", "6.1", "6.2", "6.3", "7.0")


class AmdSmiException(Exception):
    """Base smi exception class (as amdsmi_exception.AmdSmiException)."""


class AmdSmiLibraryException(AmdSmiException):
    """A library status code != success (as amdsmi_exception.AmdSmiLibraryException)."""

    def __init__(self, err_code: int):
        super().__init__(abs(err_code))
        self.err_code = abs(err_code)

    def __str__(self):
        return f"Error code:\n\t{self.err_code}"


class ProcessHandle:
    """ROCm 6.0/6.1's opaque ``amdsmi_process_handle_t`` (the list holds these, not dicts)."""

    def __init__(self, pid: int):
        self.value = pid


class FakeGpu:
    """One card: set the attributes to what the next calls should return (None = not supported)."""

    def __init__(self, bdf: str):
        self.bdf = bdf
        self.energy_accumulator = None  # counts; None = NOT_SUPPORTED
        self.counter_resolution = 15.3  # µJ per count
        self.current_socket_power = "N/A"  # W
        self.average_socket_power = "N/A"  # W
        self.gfx_activity = "N/A"  # %
        self.processes: list[dict] = []  # [{"pid": int, "gfx_ns": int}]
        self.fail_energy = False  # every amdsmi_get_energy_count raises (a library that breaks mid-job)


class FakeAmdSmi:
    """Module-like object with the amdsmi functions the reader calls, shaped like ``rocm``'s release."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException

    def __init__(self, gpus: list[FakeGpu], init_error: bool = False, rocm: str = "6.3"):
        if rocm not in RELEASES:
            raise ValueError(f"rocm: one of {RELEASES}, got {rocm!r}")
        self.rocm = rocm
        self.gpus = {g.bdf: g for g in gpus}
        self.init_error = init_error
        self.calls: list[str] = []
        if rocm in ("6.0", "6.1"):
            self.amdsmi_get_gpu_process_info = self._process_info

    def amdsmi_init(self, *flags):
        self.calls.append("amdsmi_init")
        if self.init_error:
            raise AmdSmiLibraryException(AMDSMI_STATUS_INIT_ERROR)

    def amdsmi_shut_down(self):
        self.calls.append("amdsmi_shut_down")

    def amdsmi_get_processor_handle_from_bdf(self, bdf: str):
        if bdf not in self.gpus:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        return self.gpus[bdf]

    def amdsmi_get_energy_count(self, h: FakeGpu) -> dict:
        if h.energy_accumulator is None:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        if h.fail_energy:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)
        acc, res = int(h.energy_accumulator), float(h.counter_resolution)
        if self.rocm in ("6.0", "6.1", "6.2"):
            return {"power": acc, "counter_resolution": res, "timestamp": 0}
        if self.rocm == "6.3":
            return {"power": acc, "energy_accumulator": acc, "counter_resolution": res, "timestamp": 0}
        return {"energy_accumulator": acc, "counter_resolution": res, "timestamp": 0}

    def amdsmi_get_power_info(self, h: FakeGpu) -> dict:
        return {"current_socket_power": h.current_socket_power, "average_socket_power": h.average_socket_power,
                "gfx_voltage": "N/A", "soc_voltage": "N/A", "mem_voltage": "N/A", "power_limit": "N/A"}

    def amdsmi_get_gpu_activity(self, h: FakeGpu) -> dict:
        return {"gfx_activity": h.gfx_activity, "umc_activity": "N/A", "mm_activity": "N/A"}

    def _info(self, p: dict) -> dict:
        return {"name": "python", "pid": p["pid"], "mem": 0, "engine_usage": {"gfx": p["gfx_ns"], "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": 0}}

    def amdsmi_get_gpu_process_list(self, h: FakeGpu) -> list:
        if self.rocm in ("6.0", "6.1"):
            return [ProcessHandle(p["pid"]) for p in h.processes]
        return [self._info(p) for p in h.processes]

    def _process_info(self, h: FakeGpu, proc: ProcessHandle) -> dict:
        for p in h.processes:
            if p["pid"] == proc.value:
                return self._info(p)
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
