"""Numeric ("natural") order for device ids and node names, as Slurm's hostlist orders nodes.

String order puts ``intel-rapl:10`` before ``intel-rapl:2``, ``gpu10`` before ``gpu2`` and ``n10``
before ``n2``; every record, report, CSV and ``jobenergy -l`` listing uses :func:`natural_key`
instead, so digits compare as numbers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurm_energy.model import JobRecord

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: Any) -> tuple:
    """Sort key for ``text`` (str or anything ``str()``-able) with runs of digits compared as numbers.

    ``intel-rapl:2`` < ``intel-rapl:10``; ``n2`` < ``n10``; ``gpu2`` < ``gpu10``; ``n01`` and
    ``n1`` compare equal on the numbers and are then ordered by the text itself (stable, total order).
    Letters compare case-insensitively first. Returns a tuple whose even positions are str and odd
    positions int, so any two keys compare without TypeError.
    """
    s = str(text)
    parts = _DIGITS.split(s)
    key = tuple(int(p) if i % 2 else p.lower() for i, p in enumerate(parts))
    return (key, s)


def device_sort_key(device_class: str, device_id: str, index: int | None = None) -> tuple:
    """Sort key for a device: class (cpu, gpu, ram, then others), then the device's index where
    the reader knows one (a GPU's minor number: ``GPU-<uuid>`` ids carry no number), then
    :func:`natural_key` of the id."""
    from slurm_energy.core import DEVICE_CLASSES

    cls = DEVICE_CLASSES.index(device_class) if device_class in DEVICE_CLASSES else len(DEVICE_CLASSES)
    return (cls, 0 if index is not None else 1, index if index is not None else 0, natural_key(device_id))


def sort_devices(devices: list) -> list:
    """``DeviceEnergy``-like objects (``device_class``, ``device_id``, optional ``index``) in
    :func:`device_sort_key` order (a new list)."""
    return sorted(devices, key=lambda d: device_sort_key(d.device_class, d.device_id, getattr(d, "index", None)))


def ordered_record(record: JobRecord) -> JobRecord:
    """A copy of a ``JobRecord`` with its nodes and each node's devices in numeric order (records
    stored before numeric ordering are shown in it too). The record itself is not changed."""
    nodes = [n.model_copy(update={"devices": sort_devices(n.devices)})
             for n in sorted(record.nodes, key=lambda n: natural_key(n.node))]
    return record.model_copy(update={"nodes": nodes})


def sort_static_devices(devices: list[Any]) -> list[dict[str, Any]]:
    """Device inventory dicts (``DeviceStatic`` as dicts) in numeric order: class, GPU minor, id."""
    def key(d: dict[str, Any]) -> tuple[Any, ...]:
        idx = (d.get("extra") or {}).get("minor") if isinstance(d, dict) else None
        return device_sort_key(str(d.get("device_class", "")), str(d.get("device_id", "")),
                               idx if isinstance(idx, int) else None)
    return sorted((d for d in devices if isinstance(d, dict)), key=key)
