"""Devices summarised per node and class for a job of many nodes (pure): the report's provenance
table and ``jobenergy -l`` show one row per (node, device class) -- a 1,024-node job with 8 GPUs,
2 packages and 2 DRAM zones per node is 3,072 rows, not 12,288 -- with every device one option
away (``jobenergy -l --devices``). A job of at most :data:`DEVICE_ROWS_UP_TO_NODES` nodes is shown
device by device as before.

A summary row is a :class:`~slurm_energy.model.DeviceEnergy` (the model's "one device class on one
node"): energies summed over the node's devices of the class (unmeasured ones left out and counted
in a flag, never as 0), the worst method, the lowest coverage, anomalies summed.
"""

from __future__ import annotations

from slurm_energy.model import DeviceEnergy, JobRecord, NodeSummary, worst_method
from slurm_energy.units import sum_known

#: Jobs of up to this many nodes are shown device by device; above, per node and class.
DEVICE_ROWS_UP_TO_NODES = 8


def summarise_devices(record: JobRecord) -> bool:
    """True when ``record``'s devices are shown per node and class (more than
    :data:`DEVICE_ROWS_UP_TO_NODES` nodes)."""
    return len(record.nodes) > DEVICE_ROWS_UP_TO_NODES


def class_summary(devs: list[DeviceEnergy], node: str) -> DeviceEnergy:
    """One node's devices of one class as one entry: ``device_id`` ``"<n> devices"``; energies
    (job share, whole device), mean power, anomalies and GPU idle time summed (``None`` when no
    device has one); the worst method; the lowest coverage; the longest duration; the count-weighted
    mean utilisation when every device has one; the rated power when all agree; flags united, plus
    ``unmeasured_devices:<k>`` when k devices have no job share (their energy is not in the sum)."""
    cls = devs[0].device_class
    n = len(devs)
    unmeasured = sum(d.energy_j is None for d in devs)
    flags = sorted({f for d in devs for f in d.flags} | ({f"unmeasured_devices:{unmeasured}"} if 0 < unmeasured < n else set()))
    models = list(dict.fromkeys(d.model for d in devs if d.model))
    rated = {d.rated_power_w for d in devs}
    counts = sum(d.count for d in devs)
    utils = [(d.mean_util, d.count) for d in devs]
    util = (sum(u * c for u, c in utils if u is not None) / counts
            if counts and all(u is not None for u, _ in utils) else None)
    ids = [d.device_id for d in devs]
    return DeviceEnergy(
        device_class=cls, device_id=f"{n} devices" if n > 1 else ids[0], node=node,
        model=models[0] if len(models) == 1 else ", ".join(models), count=counts,
        method=worst_method([d.method for d in devs]),
        energy_j=sum_known([d.energy_j for d in devs]), device_energy_j=sum_known([d.device_energy_j for d in devs]),
        rated_power_w=rated.pop() if len(rated) == 1 else None,
        mean_power_w=sum_known([d.mean_power_w for d in devs]), mean_util=util,
        duration_s=max(d.duration_s for d in devs), coverage=min(d.coverage for d in devs),
        wraps=sum(d.wraps for d in devs), resets=sum(d.resets for d in devs),
        dropped_samples=sum(d.dropped_samples for d in devs),
        covers=f"{n} {cls.upper()} devices summed ({ids[0]} ... {ids[-1]})" if n > 1 else devs[0].covers,
        flags=flags,
        idle_s=sum_known([d.idle_s for d in devs]), idle_energy_j=sum_known([d.idle_energy_j for d in devs]),
    )


def node_classes(ns: NodeSummary) -> list[DeviceEnergy]:
    """A node's devices as one :func:`class_summary` per class, in the devices' order."""
    by_class: dict[str, list[DeviceEnergy]] = {}
    for d in ns.devices:
        by_class.setdefault(d.device_class, []).append(d)
    return [class_summary(devs, ns.node) for devs in by_class.values()]


def shown_devices(record: JobRecord, every_device: bool = False) -> list[tuple[NodeSummary, list[DeviceEnergy]]]:
    """(node, the rows to show for it): each device, or (more than :data:`DEVICE_ROWS_UP_TO_NODES`
    nodes and not ``every_device``) one per class (:func:`node_classes`)."""
    if every_device or not summarise_devices(record):
        return [(ns, list(ns.devices)) for ns in record.nodes]
    return [(ns, node_classes(ns)) for ns in record.nodes]
