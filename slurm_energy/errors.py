"""One exception tree: every error slurm-energy raises on purpose is a :class:`SlurmEnergyError`.

Callers that only need "did slurm-energy refuse this?" catch :class:`SlurmEnergyError`. Each
subclass keeps the built-in base it had before (``ValueError`` for bad input, ``OSError`` for files
not written), so existing ``except ValueError`` / ``except OSError`` handlers still catch them.
Messages name the field (or file), the bad value and the fix. Stdlib only: safe on the hook path.
"""

from __future__ import annotations

__all__ = [
    "CiteError",
    "ConfigError",
    "GpuResolveError",
    "HourlyDataError",
    "ImplausibleIntensityError",
    "MergeError",
    "PredictionError",
    "SafeWriteError",
    "SlurmEnergyError",
    "SlurmEnvError",
    "SlurmFormatError",
    "StoreDbError",
    "StoreError",
    "StoreUrlError",
]


class SlurmEnergyError(Exception):
    """Base of every error slurm-energy raises on purpose."""


class ConfigError(SlurmEnergyError, ValueError):
    """Invalid site configuration; ``str()`` names field, value and fix, one problem per line."""


class SlurmEnvError(SlurmEnergyError, ValueError):
    """The Prolog/Epilog environment lacks a field the hook needs, or holds an unparsable one."""


class GpuResolveError(SlurmEnergyError, ValueError):
    """A GPU name that cannot be resolved to exactly one device (message says which and why)."""


class HourlyDataError(SlurmEnergyError, ValueError):
    """Bad hourly carbon-intensity data; the message names the file, line, value and fix."""


class ImplausibleIntensityError(SlurmEnergyError, ValueError):
    """A carbon intensity below what any grid emits (:mod:`slurm_energy.carbon.units`). ``fix``:
    what to write instead (``note`` included); ``guess``: the value (same unit) it probably meant,
    None when there is no single guess; ``note``: when 0 may be written after all ("" when it does
    not apply)."""

    def __init__(self, message: str, fix: str, guess: float | None = None, note: str = "") -> None:
        super().__init__(message)
        self.fix = f"{fix}; {note}" if note else fix
        self.guess = guess
        self.note = note


class CiteError(SlurmEnergyError, ValueError):
    """Nothing to cite: no record, or no record with the asked phase / stage (the message names it)."""


class PredictionError(SlurmEnergyError, ValueError):
    """A prediction input is invalid; the message names the field, the value and the fix."""


class MergeError(SlurmEnergyError, ValueError):
    """Node records that cannot be merged into one job record (wrong shape, unparsable file)."""


class StoreError(SlurmEnergyError, RuntimeError):
    """The job store cannot be used (missing, no schema yet, newer schema); the message says why."""


class StoreUrlError(StoreError, ValueError):
    """An unsupported store URL (backend, driver, relative SQLite path); password hidden, fix given."""


class StoreDbError(StoreError):
    """The store's database refused a statement or a connection (locked, unreachable, not a
    database, a constraint); the message names the store, the driver's error is ``__cause__``."""


class SlurmFormatError(SlurmEnergyError, ValueError):
    """Text in a Slurm field (sacct, scontrol, the job environment) that is in none of Slurm's
    formats for it; the message names the field, the text and an example of what Slurm writes."""


class SafeWriteError(SlurmEnergyError, OSError):
    """A report file could not be written; ``path`` and ``reason`` say where and why."""

    def __init__(self, path: str, reason: str, partial: bytes = b""):
        super().__init__(f"could not write {path!r}: {reason}")
        self.path = path
        self.reason = reason
        self.partial = partial  # what a killed writer had reported before (one JSON line per file)
