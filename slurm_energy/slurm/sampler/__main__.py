"""The per-job sampler's entry point (``python -I -m slurm_energy.slurm.sampler sampler DIR NODE``,
:data:`slurm_energy.slurm.detach.DETACHED_MODULE`), started by the Prolog by module name (own
process group, niced): :mod:`.main`. The node sampler, :mod:`.node`, is its own entry; the
finalizers run as :mod:`slurm_energy.slurm.jobend`. Before this package, the entry was
``slurm_energy.slurm.detached`` (:data:`slurm_energy.slurm.processes.DETACHED_MODULES` still finds
a sampler started under that name before an upgrade).

Every failure is logged and recorded on the job (``errors-<node>.jsonl`` in its spool).
"""

from __future__ import annotations

import signal
import sys

_EARLY_STOP: list[int] = []  # a TERM that arrives while the sampler is still starting up (very short jobs)
if __name__ == "__main__" and sys.argv[1:2] == ["sampler"]:
    # first thing, before the imports below: the Epilog sends TERM only once it is handled
    # (detach.stop_process handler_wait), and a short job's Epilog waits for this line
    signal.signal(signal.SIGTERM, lambda *_: _EARLY_STOP.append(1))

import logging  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m slurm_energy.slurm.sampler sampler DIR NODE``: the job's sampler (the
    finalizers run as :mod:`slurm_energy.slurm.jobend`)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        what = argv[0] if argv else ""
        if what == "sampler":
            from slurm_energy.slurm.sampler.main import sampler_main

            return sampler_main(argv[1], argv[2], _EARLY_STOP)
        print("usage: python -m slurm_energy.slurm.sampler sampler DIR NODE "
              "(the finalizers: python -m slurm_energy.slurm.jobend)", file=sys.stderr)
    except BaseException:
        logging.getLogger("slurm_energy").exception("hook %s failed", argv[:1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
