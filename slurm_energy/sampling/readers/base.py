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
from collections.abc import Sequence

from slurm_energy.core import DeviceStatic, Method, Reading

__all__ = ["DeviceStatic", "Method", "Reader", "Reading", "UnavailableReader"]


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

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default  # pragma: no cover
        """Release handles (NVML shutdown, open files)."""


class UnavailableReader(Reader):
    """Stands in for devices the job has but nothing can read (e.g. NVML missing): every reading is
    ``unavailable`` with the reason, so the report says "not measured" instead of "no device"."""

    def __init__(self, device_class: str, device_ids: Sequence[str], reason: str):
        self.device_class = device_class
        self.name = f"unavailable-{device_class}"
        self.ids = list(device_ids)
        self.reason = reason

    def devices(self) -> list[DeviceStatic]:
        return [DeviceStatic(self.device_class, i, extra={"unavailable": self.reason}) for i in self.ids]

    def read(self) -> list[Reading]:
        return [Reading(self.device_class, i, "unavailable", flags=[self.reason]) for i in self.ids]


def close_readers(readers: Sequence[Reader]) -> None:
    """Close each reader; one that fails to close is logged and the others are still closed."""
    import logging

    for r in readers:
        try:
            r.close()
        except Exception:
            logging.getLogger("slurm_energy.sampling.readers").exception("closing reader %s", r.name)


def read_all(readers: Sequence[Reader]) -> list[Reading]:
    """Every reader's readings, in order. A reader must not raise; one that does is logged and
    stands as one ``unavailable`` reading flagged ``reader_error:<exception>``, never as 0."""
    import logging

    out: list[Reading] = []
    for r in readers:
        try:
            out += r.read()
        except Exception as e:
            logging.getLogger("slurm_energy.sampling.readers").exception("reader %s failed", r.name)
            out.append(Reading(r.device_class, r.name, "unavailable", flags=[f"reader_error:{type(e).__name__}"]))
    return out
