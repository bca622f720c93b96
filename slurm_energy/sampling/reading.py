"""A node's readers and one row of their values, without the sampler: what the Prolog's own reading
needs (:func:`slurm_energy.pipeline` re-exports these three; the Prolog imports this module, not
the pipeline, whose import brings the sampler and the local measurement).
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (on the Prolog's path)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from slurm_energy.core import DeviceStatic
    from slurm_energy.devices.gpu import Gpu
    from slurm_energy.model import NodeStatic
    from slurm_energy.sampling.files import FileSource
    from slurm_energy.sampling.readers.base import Reader


def open_readers(site: Any, gpus: Sequence[Gpu | Mapping[str, Any]] = (), unresolved_gpus: Sequence[str] = (), *,
                 light: bool = False, files: FileSource | None = None) -> tuple[list[Reader], list[str]]:
    """This node's readers (RAPL or TDP model for CPU/RAM, each GPU backend's reader for ``gpus``,
    :mod:`slurm_energy.devices.gpu`) and notes on the choices made; ``site``: the site config, in any of its forms
    (its ``hardware`` section is read through :meth:`~slurm_energy.devices.hardware.HardwareConfig.of`);
    ``light``: no vendor library that is slow to load (the Prolog); ``files``: where the readers
    read their per-sample files (:mod:`slurm_energy.sampling.files`). See
    :func:`slurm_energy.sampling.setup.build_readers`. Never raises for a missing device: it
    becomes an ``unavailable`` reader."""
    from slurm_energy.devices.hardware import HardwareConfig
    from slurm_energy.sampling.setup import build_readers

    return build_readers(HardwareConfig.of(site.hardware), gpus, unresolved_gpus, light=light, files=files)


def device_inventory(readers: Sequence[Reader], notes: Sequence[str]) -> NodeStatic:
    """The node's static facts (:func:`slurm_energy.devices.info.collect_static`) with every
    reader's devices and the reader notes (``reader_notes``). A reader whose inventory fails is
    left out of ``devices``."""
    from slurm_energy.devices.info import collect_static

    static = collect_static([d for r in readers for d in _safe_devices(r)])
    static["reader_notes"] = list(notes)
    return static  # type: ignore[return-value]  # collect_static's dict has NodeStatic's keys


def _safe_devices(r: Reader) -> list[DeviceStatic]:
    try:
        return r.devices()
    except Exception:
        return []


def take_reading(readers: Sequence[Reader], samples_path: str, kind: str, t: float | None = None,
                 files: FileSource | None = None) -> None:
    """Append one row of every reader's current values (and the node's counters) to the sample
    file, then close the readers. Used by a hook itself (Prolog start, or after the Epilog when
    the sampler is gone) so a job shorter than one interval is measured between two rows.
    ``t``: the row's time, epoch s (default now; the Prolog's, for its reading replayed from the
    files it read); ``files``: where the node's counters are read (the readers' own source).

    Raises: OSError (sample file not writable, /proc unreadable); what a reader's ``read`` raises.
    """
    from slurm_energy.sampling.nodestats import hold_snapshot, read_node_stats
    from slurm_energy.sampling.samplefile import SampleWriter

    node = read_node_stats(files=files)
    hold_snapshot(node)  # the row and the CPU/RAM models: one instant
    try:
        readings = [x for r in readers for x in r.read()]
    finally:
        hold_snapshot(None)
        for r in readers:
            r.close()
    w = SampleWriter(samples_path)
    try:
        w.write_sample(time.time() if t is None else t, kind, None, node, readings)
    finally:
        w.close()


#: Readers whose ``read`` reads files only, through the file source they were given: their row
#: can be taken from file contents read earlier (:class:`~slurm_energy.sampling.files.ReplayFiles`).
REPLAYABLE = ("RaplReader", "HwmonPowerReader", "CpuTdpReader", "RamModelReader")


def replayable(readers: Sequence[Reader]) -> bool:
    """True when every reader is one of :data:`REPLAYABLE` (no GPU, no vendor library)."""
    return bool(readers) and all(type(r).__name__ in REPLAYABLE for r in readers)
