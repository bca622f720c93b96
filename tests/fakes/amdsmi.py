"""A stand-in for AMD SMI's Python binding (``amdsmi``), LABELLED AS A FAKE.

Why a fake and not the real module with functions patched (as for ``pynvml``): ``pip install
amdsmi`` (7.0.2) installs, but ``import amdsmi`` fails on a machine without ROCm's native
``libamd_smi.so`` (it prints "Unable to find libamd_smi.so" and raises ``KeyError:
'libamd_smi.so'`` from ``amdsmi_wrapper``), so the real module cannot be imported here.

What is copied from amdsmi 7.0.2's ``amdsmi_interface.py`` / ``amdsmi_exception.py`` (names and
shapes only): the function names used by the reader, their return dicts' keys
(``energy_accumulator``/``counter_resolution``/``timestamp``; ``current_socket_power``/
``average_socket_power`` with "N/A" for an unsupported field; ``gfx_activity``; process list
entries ``{"pid", "engine_usage": {"gfx", "enc"}, ...}``), and the exception classes
(``AmdSmiException`` > ``AmdSmiLibraryException(err_code)``; 2 = NOT_SUPPORTED, 10 = NO_PERM).
"""

from __future__ import annotations

AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_INIT_ERROR = 34


class AmdSmiException(Exception):
    """Base smi exception class (as amdsmi_exception.AmdSmiException)."""


class AmdSmiLibraryException(AmdSmiException):
    """A library status code != success (as amdsmi_exception.AmdSmiLibraryException)."""

    def __init__(self, err_code: int):
        super().__init__(abs(err_code))
        self.err_code = abs(err_code)

    def __str__(self):
        return f"Error code:\n\t{self.err_code}"


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


class FakeAmdSmi:
    """Module-like object with the amdsmi functions the reader calls."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException

    def __init__(self, gpus: list[FakeGpu], init_error: bool = False):
        self.gpus = {g.bdf: g for g in gpus}
        self.init_error = init_error
        self.calls: list[str] = []

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
        return {"energy_accumulator": h.energy_accumulator, "counter_resolution": h.counter_resolution,
                "timestamp": 0}

    def amdsmi_get_power_info(self, h: FakeGpu) -> dict:
        return {"socket_power": "N/A", "current_socket_power": h.current_socket_power,
                "average_socket_power": h.average_socket_power, "gfx_voltage": "N/A", "soc_voltage": "N/A",
                "mem_voltage": "N/A", "power_limit": "N/A"}

    def amdsmi_get_gpu_activity(self, h: FakeGpu) -> dict:
        return {"gfx_activity": h.gfx_activity, "umc_activity": "N/A", "mm_activity": "N/A"}

    def amdsmi_get_gpu_process_list(self, h: FakeGpu) -> list[dict]:
        return [{"name": "python", "pid": p["pid"], "mem": 0, "engine_usage": {"gfx": p["gfx_ns"], "enc": 0},
                 "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": 0}, "cu_occupancy": "N/A"}
                for p in h.processes]
