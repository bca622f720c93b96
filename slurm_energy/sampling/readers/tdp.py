"""Model readers: rated power x utilisation, labelled ``tdp_estimate``.

Used where no energy counter can be read (no RAPL, EACCES, no NVML), and for RAM without a DRAM
RAPL zone. Both are the method's own model, P_i x u_i per device class:

* CPU: mean power over the interval = TDP_total (W) x node CPU utilisation, utilisation =
  busy CPU time delta / all CPU time delta (/proc/stat). The job's share by CPU time then gives
  TDP_total / n_logical_cpus x job CPU seconds (Green Algorithms' per-core TDP model,
  Lannelongue et al. 2021).
* RAM: mean power = W/GB x GB (10^9 bytes) in use on the node (default 0.3725 W/GB, Green Algorithms, after
  Karyakin & Salem 2017); the job's share by its cgroup memory gives W/GB x job GB x t.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_energy.core import NodeUsage
from slurm_energy.sampling.nodestats import read_node_stats
from slurm_energy.sampling.readers.base import DeviceStatic, Reader, Reading
from slurm_energy.units import RAM_W_PER_GB, RAM_W_PER_GB_SOURCE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurm_energy.sampling.files import FileSource

GB = 1e9  # bytes; W/GB figures (Green Algorithms) are per decimal GB
GIB = 1024 ** 3


class CpuTdpReader(Reader):
    """Node CPU power modelled as TDP_total x utilisation (``tdp_estimate``)."""

    device_class = "cpu"
    name = "tdp-cpu"

    def __init__(self, tdp_total_w: float, model: str = "", cores: int = 1, source: str = "",
                 flags: Sequence[str] | None = None, files: FileSource | None = None):
        """Args: tdp_total_w: rated power of all sockets, W (> 0); cores: physical cores covered;
        source: where the TDP came from (table row, site config, per-core fallback); files:
        where /proc/stat is read (:func:`~slurm_energy.sampling.nodestats.read_node_stats`).
        Raises ValueError if tdp_total_w <= 0."""
        if not tdp_total_w or tdp_total_w <= 0:
            raise ValueError(f"CPU TDP must be > 0 W, got {tdp_total_w!r}: set hardware.cpu_tdp_w in the site config")
        self.tdp_total_w = float(tdp_total_w)
        self.model = model
        self.cores = cores
        self.source = source
        self.flags = list(flags or [])
        self.files = files
        self._last: tuple[float, float] | None = None
        self._util: float | None = None

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic("cpu", "cpu-tdp", self.model, self.cores, self.tdp_total_w, self.source)]

    def read(self) -> list[Reading]:
        try:
            s = read_node_stats(files=self.files)
        except OSError as e:  # pragma: no cover - /proc always exists on Linux
            return [Reading("cpu", "cpu-tdp", "unavailable", flags=[f"proc_stat:{e.errno}"])]
        util = self._utilisation(s)
        return [Reading("cpu", "cpu-tdp", "tdp_estimate",
                        mean_power_w=None if util is None else self.tdp_total_w * util,
                        util=util, flags=list(self.flags))]

    def _utilisation(self, s: NodeUsage) -> float | None:
        """Node CPU utilisation since the previous read (None at the first), and keep ``s``."""
        if s.cpu_busy_s is None or s.cpu_total_s is None:
            return None
        prev, self._last = self._last, (s.cpu_busy_s, s.cpu_total_s)
        if prev is None:
            util = None  # first read: no interval yet
        elif s.cpu_total_s <= prev[1]:
            util = self._util  # two reads within one /proc/stat tick: the last utilisation holds
            self._last = prev
        else:
            util = min(1.0, max(0.0, (s.cpu_busy_s - prev[0]) / (s.cpu_total_s - prev[1])))
        self._util = util
        return util


class RamModelReader(Reader):
    """Node RAM power modelled as W/GB x GB in use (``tdp_estimate``)."""

    device_class = "ram"
    name = "ram-model"

    def __init__(self, w_per_gb: float = RAM_W_PER_GB, source: str = RAM_W_PER_GB_SOURCE,
                 files: FileSource | None = None):
        """Args: w_per_gb: W per GB (10^9 bytes) of memory in use (> 0); files: where /proc/meminfo
        is read (as :class:`CpuTdpReader`'s). Raises ValueError otherwise."""
        if not w_per_gb or w_per_gb <= 0:
            raise ValueError(f"RAM W/GB must be > 0, got {w_per_gb!r}: set hardware.ram_w_per_gb in the site config")
        self.w_per_gb = float(w_per_gb)
        self.source = source
        self.files = files

    def devices(self) -> list[DeviceStatic]:
        total = read_node_stats(files=self.files).mem_total_bytes or 0
        return [DeviceStatic("ram", "ram-model", f"{total / GIB:.1f} GiB", 1, self.w_per_gb * total / GB, self.source)]

    def read(self) -> list[Reading]:
        s = read_node_stats(files=self.files)
        used, total = s.mem_used_bytes, s.mem_total_bytes
        return [Reading("ram", "ram-model", "tdp_estimate", mean_power_w=None if used is None else self.w_per_gb * used / GB,
                        util=used / total if used is not None and total else None, mem_bytes=used)]
