"""A node's readers and one row of their values, without the sampler: what the Prolog's own reading
needs (:func:`slurm_energy.pipeline` re-exports these three; the Prolog imports this module, not
the pipeline, whose import brings the sampler and the local measurement).
"""

from __future__ import annotations

import contextlib
import os
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (on the Prolog's path)
if TYPE_CHECKING:
    from typing import Any, Iterator, Optional, Sequence

    from slurm_energy.config import SiteConfig
    from slurm_energy.core import DeviceStatic
    from slurm_energy.model import NodeStatic
    from slurm_energy.sampling.readers.base import Reader


def open_readers(site: SiteConfig, gpu_uuids: Sequence[str] = (), unresolved_gpus: Sequence[str] = (), *,
                 drm_gpus: Sequence[Any] = (), light: bool = False) -> tuple[list[Reader], list[str]]:
    """This node's readers (RAPL or TDP model for CPU/RAM, NVML for ``gpu_uuids``, the AMD/Intel
    ``drm_gpus``) and notes on the choices made; ``light``: no vendor library that is slow to load
    (the Prolog). See :func:`slurm_energy.sampling.setup.build_readers`. Never raises for a missing
    device: it becomes an ``unavailable`` reader."""
    from slurm_energy.sampling.setup import build_readers

    return build_readers(site, list(gpu_uuids), list(unresolved_gpus), drm_gpus=list(drm_gpus), light=light)


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


def take_reading(readers: Sequence[Reader], samples_path: str, kind: str, t: Optional[float] = None) -> None:
    """Append one row of every reader's current values (and the node's counters) to the sample
    file, then close the readers. Used by a hook itself (Prolog start, or after the Epilog when
    the sampler is gone) so a job shorter than one interval is measured between two rows.
    ``t``: the row's time, epoch s (default now; the Prolog's, for its reading replayed from the
    files it read: :func:`replaying`).

    Raises: OSError (sample file not writable); what a reader's ``read`` raises.
    """
    from slurm_energy.sampling.nodestats import read_node_stats
    from slurm_energy.sampling.samplefile import SampleWriter

    rows: list[dict[str, Any]] = []
    for r in readers:
        rows.extend(x.to_dict() for x in r.read())
        r.close()
    w = SampleWriter(samples_path)
    try:
        w.write({"t": time.time() if t is None else t, "kind": kind, "job": None, "node": read_node_stats().to_dict(),
                 "readings": rows})
    finally:
        w.close()


#: Readers whose ``read`` reads files only, through ``RaplReader._energy_uj``, ``rapl._read_int``
#: and ``nodestats._read``:
#: their row can be taken from file contents read earlier (:func:`replaying`).
REPLAYABLE = ("RaplReader", "CpuTdpReader", "RamModelReader")


def replayable(readers: Sequence[Reader]) -> bool:
    """True when every reader is one of :data:`REPLAYABLE` (no GPU, no vendor library)."""
    return bool(readers) and all(type(r).__name__ in REPLAYABLE for r in readers)


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """Inside the block, the paths the :data:`REPLAYABLE` readers read are appended to the list
    yielded (the files a Prolog must read for its row: :mod:`slurm_energy.slurm.prolograw`)."""
    from slurm_energy.sampling import nodestats
    from slurm_energy.sampling.readers import rapl

    paths: list[str] = []
    real_int, real_read, real_uj = rapl._read_int, nodestats._read, rapl.RaplReader._energy_uj

    def rec_int(path: str) -> int:
        paths.append(path)
        return real_int(path)

    def rec_read(path: str, keep: bool) -> bytes:
        paths.append(path)
        return real_read(path, False)

    def rec_uj(reader: rapl.RaplReader, z: rapl.RaplZone) -> int:
        paths.append(os.path.join(z.path, "energy_uj"))
        return real_uj(reader, z)

    rapl._read_int, nodestats._read = rec_int, rec_read  # type: ignore[assignment]
    rapl.RaplReader._energy_uj = rec_uj  # type: ignore[method-assign]
    try:
        yield paths
    finally:
        rapl._read_int, nodestats._read = real_int, real_read  # type: ignore[assignment]
        rapl.RaplReader._energy_uj = real_uj  # type: ignore[method-assign]


@contextlib.contextmanager
def replaying(files: dict[str, str]) -> Iterator[None]:
    """Inside the block, the :data:`REPLAYABLE` readers read ``files`` ({path: contents as latin-1
    text}) instead of the files themselves. A path not in ``files`` raises KeyError (a zone the
    Prolog did not read): the caller drops the row rather than mix two instants."""
    from slurm_energy.sampling import nodestats
    from slurm_energy.sampling.readers import rapl

    real_int, real_read, real_uj = rapl._read_int, nodestats._read, rapl.RaplReader._energy_uj
    rapl._read_int = lambda path: int(files[path].strip())  # type: ignore[assignment]
    nodestats._read = lambda path, keep: files[path].encode("latin-1")  # type: ignore[assignment]
    rapl.RaplReader._energy_uj = (  # type: ignore[method-assign]
        lambda self, z: int(files[os.path.join(z.path, "energy_uj")].strip()))
    try:
        yield
    finally:
        rapl._read_int, nodestats._read = real_int, real_read  # type: ignore[assignment]
        rapl.RaplReader._energy_uj = real_uj  # type: ignore[method-assign]
