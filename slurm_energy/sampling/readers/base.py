"""The one small reader interface every power/energy source implements.

A reader knows one kind of device (CPU package, GPU, RAM) and nothing of Slurm or of jobs: it
reports raw device quantities at the moment it is read. Attribution to a job (shares by CPU time,
memory or per-process GPU utilisation) and integration over time happen later, in
:mod:`slurm_energy.accounting`, as pure functions over the sample series.

A :class:`Reading` carries exactly one of three kinds of energy information, named by ``method``:

* ``counter`` -- ``energy_uj``: a cumulative hardware counter in microjoules (RAPL ``energy_uj``;
  NVML ``nvmlDeviceGetTotalEnergyConsumption`` in mJ x 1000), with ``max_energy_range_uj`` when the
  counter wraps (RAPL) or ``None`` when it does not (NVML, 64-bit).
* ``power_integration`` -- ``power_w``: an instantaneous power sample in W; energy is the
  trapezoidal integral over sample times.
* ``tdp_estimate`` -- ``mean_power_w``: a modelled mean power in W over the interval since this
  reader's previous ``read()`` (rated power x utilisation); energy = mean_power_w x dt.
* ``unavailable`` -- nothing could be read; the device's energy stays ``None``.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class Reading:
    """One device at one instant. See module docstring for the meaning of ``method``."""

    device_class: str  # "cpu" | "gpu" | "ram"
    device_id: str  # stable key: RAPL zone path ("intel-rapl:0"), GPU UUID, "cpu-tdp", "ram-model"
    method: str  # "counter" | "power_integration" | "tdp_estimate" | "unavailable"
    energy_uj: Optional[int] = None  # cumulative counter, uJ
    max_energy_range_uj: Optional[int] = None  # counter range (wraps to 0 past it), uJ; None = no wrap
    max_power_w: Optional[float] = None  # zone/device max power, W (for the multiple-wrap check)
    power_w: Optional[float] = None  # instantaneous power, W (beside a counter: for the cross-check)
    energy_resolution_uj: Optional[int] = None  # the counter's quantum, uJ (NVML: 1000, it counts mJ)
    power_accuracy_w: Optional[float] = None  # accuracy of power_w, W (NVML power.draw: +/- 5 W)
    mean_power_w: Optional[float] = None  # modelled mean power since the previous read, W
    util: Optional[float] = None  # device utilisation in [0, 1]
    mem_bytes: Optional[int] = None  # device memory in use, bytes
    # per-process GPU utilisation {pid: sm_util 0..1}, for sharing a GPU between jobs
    proc_util: Optional[dict] = None
    flags: list = field(default_factory=list)  # e.g. ["eacces", "range_unreadable"]

    def to_dict(self) -> dict:
        """Compact dict for the sample file (None fields and empty flags dropped)."""
        return {k: v for k, v in asdict(self).items() if v is not None and v != []}

    @classmethod
    def from_dict(cls, d: dict) -> "Reading":
        """Inverse of :meth:`to_dict`; unknown keys are ignored (newer sample files)."""
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass
class DeviceStatic:
    """Static facts about one device, for the device information collector and the report."""

    device_class: str
    device_id: str
    model: str = ""
    count: int = 1  # e.g. cores covered by a per-core TDP model
    rated_power_w: Optional[float] = None  # TDP / enforced power limit, W
    rated_power_source: str = ""  # "RAPL max_power_uw", "NVML enforced limit", "table: TDP_cpu.csv", ...
    extra: dict = field(default_factory=dict)  # vendor facts: memory size, MIG slice, minor number...


class Reader(abc.ABC):
    """A source of :class:`Reading` s for one device class on this node.

    Implementations must be cheap to ``read()`` (called every sampling interval, default 5 s),
    never raise from ``read()`` (return readings with ``method="unavailable"`` and a flag instead),
    and release handles in ``close()``.
    """

    device_class: str = ""
    name: str = ""  # "rapl", "nvml", "tdp-cpu", "ram-model"

    @abc.abstractmethod
    def devices(self) -> list[DeviceStatic]:
        """Static inventory of the devices this reader reports on."""

    @abc.abstractmethod
    def read(self) -> list[Reading]:
        """One reading per device, now. Must not raise."""

    def close(self) -> None:  # pragma: no cover - default no-op
        """Release handles (NVML shutdown, open files)."""
