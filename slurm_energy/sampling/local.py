"""Measurement without Slurm: the hooks' sampler over a process tree, in a thread or a child.

One code path for ``slurm-energy run -- CMD``, ``slurm-energy attach PID`` and ``slurm_energy.track``
outside a sampled Slurm job: the same readers (:func:`slurm_energy.sampling.setup.build_readers`),
:class:`~slurm_energy.sampling.sampler.Sampler`, sample file, node summary and carbon facts as the
Prolog/Epilog path. :class:`LocalSampler` samples; :class:`slurm_energy.pipeline.LocalMeasurement`
adds ``record()`` (energy so far while sampling, final after ``stop()``).

``run``/``attach`` sample in a thread (their process only waits). ``track`` samples in a child
process (``python -m slurm_energy.sampling.local SPEC``): a thread inside a CPU-bound Python
training loop was starved of the GIL (seen here: one sample in 1.3 s instead of six). The child
leaves the measured tree (excluded by PID), runs in its own session (a terminal's Ctrl-C stops the
training, not the final sample), takes its final sample on SIGTERM, and ends by itself if the
process it measures dies.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Optional

from slurm_energy.sampling.sampler import Sampler, Usage, UsageProbe, freeze_gc

if TYPE_CHECKING:  # subprocess and tempfile are imported where used: the Prolog imports this module
    import subprocess


def visible_gpus() -> list[str]:
    """NVML UUIDs of CUDA_VISIBLE_DEVICES (or every GPU when it is unset) when NVML works; [] otherwise."""
    try:
        from slurm_energy.devices.gpus import resolve_job_gpus

        return [g.uuid for g in resolve_job_gpus("", os.environ.get("CUDA_VISIBLE_DEVICES", ""), all_if_unset=True)]
    except Exception:
        return []


def visible_drm_gpus(cfg, environ=None) -> list[dict]:
    """The AMD/Intel GPUs this process may use, as ResolvedDrmGpu dicts; [] when there are none.

    Inside a Slurm job ``SLURM_JOB_GPUS`` is the allocation (physical); outside Slurm every GPU of
    the node is visible and ``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK``
    ordinals count the node's own GPUs (see :func:`slurm_energy.devices.gpus_drm.resolve_drm_gpus`).
    Never raises (an unresolvable variable leaves AMD/Intel GPUs unmeasured; the CLI says so)."""
    env = os.environ if environ is None else environ
    try:
        from slurm_energy.devices.gpus_drm import resolve_drm_gpus

        res = resolve_drm_gpus(env.get("SLURM_JOB_GPUS"), env.get("ROCR_VISIBLE_DEVICES"),
                               env.get("HIP_VISIBLE_DEVICES"), env.get("ZE_AFFINITY_MASK"),
                               cfg.hardware.drm_root, cfg.hardware.kfd_root, all_if_unset=True,
                               ze_flat_device_hierarchy=env.get("ZE_FLAT_DEVICE_HIERARCHY"))
        return [g.to_dict() for g in res]
    except Exception:
        return []


def gpus_by_index(indices: str) -> tuple[list[str], list[str], str]:
    """``"0,1"`` (NVML indices, as ``nvidia-smi`` numbers them) -> (UUIDs, unresolved ids, reason).

    When NVML is absent or an index names no device, the GPUs are kept as ``gpu-index-<i>`` and
    reported ``unavailable`` (never 0 J), with the reason. Raises ValueError for a malformed list."""
    toks = [t.strip() for t in indices.split(",") if t.strip()]
    if not toks or not all(t.isdigit() for t in toks):
        raise ValueError(f"--gpus {indices!r}: give GPU indices as nvidia-smi numbers them, e.g. --gpus 0,1")
    try:
        from slurm_energy.devices.gpus import resolve_job_gpus

        res = resolve_job_gpus(",".join(toks), "")
        uuids = [g.uuid for g in res]
        if uuids:
            return uuids, [], ""
        reason = getattr(res, "reason", "") or "no NVML device"
    except Exception as e:
        reason = f"{type(e).__name__}: {e}"
    return [], [f"gpu-index-{t}" for t in toks], reason


class LocalSampler:
    """Sample ``probe`` in a background thread (or a child process) into a private sample file.

    :class:`slurm_energy.pipeline.LocalMeasurement` adds ``record()``: the one-node JobRecord.

    Args:
        cfg: :class:`slurm_energy.config.SiteConfig`.
        probe: the job (a :class:`~slurm_energy.sampling.probes.ProcessTreeProbe`), or None to
            :meth:`bind` it later (after the readers are open).
        label: the record's job id (and report name ``energy-<label>.html``).
        gpu_uuids: NVML UUIDs to read; unresolved: GPUs reported ``unavailable`` with ``gpu_note``.
            With neither, the visible AMD/Intel GPUs are read (:func:`visible_drm_gpus`).
        interval_s: sampling interval, s (default: the site's ``sampling.interval_s``).
        child_of: sample in a child process measuring the tree of this PID (``track``: our own
            PID); ``probe`` is then unused (None).
    """

    def __init__(self, cfg, probe: Optional[UsageProbe], label: str, gpu_uuids: Optional[list[str]] = None,
                 unresolved: Optional[list[str]] = None, gpu_note: str = "", interval_s: Optional[float] = None,
                 partition: str = "", work_dir: str = ".", child_of: Optional[int] = None):
        from slurm_energy.sampling.setup import build_readers

        self.cfg, self.label, self.partition = cfg, label, partition
        self.work_dir = os.path.abspath(work_dir)
        self.interval_s = float(interval_s or cfg.sampling.interval_s)
        drm = [] if gpu_uuids or unresolved else visible_drm_gpus(cfg)  # no NVIDIA GPU: AMD/Intel ones
        readers, self.notes = build_readers(cfg, gpu_uuids, unresolved, drm_gpus=drm)
        if gpu_note:
            self.notes.append(f"gpu: {gpu_note}")
        self.statics = [d for r in readers for d in r.devices()]
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="slurm-energy-")
        self.samples = os.path.join(self.dir, "samples.jsonl")
        self.t0 = self.t1 = 0.0
        self._proc: Optional[subprocess.Popen] = None
        self._child_spec = None
        if child_of is not None:
            for r in readers:  # the child opens its own; these only named the devices
                r.close()
            self._child_spec = {"pid": child_of, "config": getattr(cfg, "source_path", "") or None,
                                "gpus": list(gpu_uuids or []), "unresolved": list(unresolved or []),
                                "interval_s": self.interval_s, "samples": self.samples}
            return
        self._readers = readers
        if probe is not None:
            self.bind(probe)

    def bind(self, probe: UsageProbe, label: Optional[str] = None) -> "LocalSampler":
        """Give the sampler its job (thread mode), when it was made with ``probe=None`` so that the
        readers were opened before the job started (``run``: the command starts after the set-up,
        so its first second is measured). ``label``: the record's job id, if only known now."""
        from slurm_energy.sampling.samplefile import SampleWriter

        if label is not None:
            self.label = label
        # a probe with an exact end (run: the caller's wait4 rusage) keeps sampling until stop(), so
        # the final row carries that usage; others stop by themselves once the tree is gone
        gone_after = 0.0 if getattr(probe, "needs_tail_poll", True) else float("inf")
        self.sampler = Sampler(self._readers, probe, SampleWriter(self.samples, fsync=False),
                               interval_s=self.interval_s, gone_after_s=gone_after)
        self._thread = threading.Thread(target=self.sampler.run, name="slurm-energy-sampler", daemon=True)
        return self

    def start(self, wait_s: float = 10.0, t0: Optional[float] = None) -> "LocalSampler":
        """Start sampling; returns once the first sample is written (at most ``wait_s``), so what
        the caller does next is measured from its first second even on a loaded machine.

        ``t0``: the job's start, epoch s, when it started just before (``run``: the command's spawn),
        else now. Raises RuntimeError if the child sampler could not start, ValueError if a
        thread-mode sampler has no probe (:meth:`bind`)."""
        if self._child_spec is None and not hasattr(self, "sampler"):
            raise ValueError("LocalSampler.start: no probe; call bind(probe) first")
        self.t0 = time.time() if t0 is None else t0
        if self._child_spec is not None:
            self._start_child()
        else:
            self._thread.start()
        deadline = time.monotonic() + wait_s
        while not self._first_sample() and self.running and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"the sampler process exited with {self._proc.returncode}; see {self.dir}/sampler.log")
        return self

    def _first_sample(self) -> bool:
        if self._child_spec is None:
            return self.sampler.n_samples >= 1
        try:
            with open(self.samples, "rb") as f:
                return f.readline().endswith(b"\n")
        except OSError:
            return False

    def _start_child(self) -> None:
        import subprocess

        pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)  # the child imports this same slurm_energy, wherever it came from
        env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [p for p in [env.get("PYTHONPATH", "")] if p])
        log = open(os.path.join(self.dir, "sampler.log"), "wb")
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "slurm_energy.sampling.local",
                                           json.dumps(self._child_spec)], env=env, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=log, start_new_session=True, close_fds=True)
        finally:
            log.close()

    def stop(self, final_usage: Optional[Usage] = None) -> None:
        """Take the final sample and stop (``final_usage``: exact usage known to the caller, e.g. a
        child's rusage; thread mode only)."""
        if self._proc is not None:
            import subprocess

            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)  # the Sampler's handler: final sample, exit
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        else:
            if final_usage is not None:
                self.sampler.last_usage = final_usage
            self.sampler.stop()
            self._thread.join(10)
        self.t1 = time.time()

    @property
    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        if self._child_spec is not None:
            return False
        return self._thread.is_alive()

    def cleanup(self) -> None:
        """Remove the temporary sample directory."""
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def _child_main(spec_json: str) -> int:
    """The child sampler of :class:`LocalSampler` (``child_of``): samples the tree of
    ``spec["pid"]`` (itself excluded) until SIGTERM or until that process is gone."""
    from slurm_energy.config import load_site_config
    from slurm_energy.sampling.probes import ProcessTreeProbe
    from slurm_energy.sampling.samplefile import SampleWriter
    from slurm_energy.sampling.setup import build_readers

    spec = json.loads(spec_json)
    stop: list = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # before the slow part
    cfg = load_site_config(spec["config"])
    readers, _ = build_readers(cfg, spec["gpus"], spec["unresolved"])
    probe = ProcessTreeProbe(spec["pid"], exclude=frozenset({os.getpid()}))
    s = Sampler(readers, probe, SampleWriter(spec["samples"], fsync=False), interval_s=spec["interval_s"],
                gone_after_s=0.0)
    s.install_signal_handlers()
    if stop:
        s.stop()
    freeze_gc()
    s.run()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
