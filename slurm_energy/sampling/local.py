"""Measurement without Slurm: the hooks' sampler over a process tree, in a thread or a child.

One path for ``slurm-energy run``/``attach`` and ``track()`` outside a sampled Slurm job: the same
readers (one spec, :attr:`LocalSampler.reader_spec`, for this process and the child sampler),
:class:`~slurm_energy.sampling.sampler.Sampler` and sample file as the Prolog/Epilog;
:class:`slurm_energy.pipeline.LocalMeasurement` holds one and makes its record. ``run``/``attach`` sample in a
thread; ``track`` in a child process (``python -m slurm_energy.sampling.local SPEC``), because a
thread in a CPU-bound training loop was starved of the GIL (one sample in 1.3 s instead of six).
The child leaves the measured tree, runs in its own session (Ctrl-C stops the training, not the
final sample), takes its final sample on SIGTERM and ends by itself when the measured process dies.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slurm_energy.core import JobUsage
from slurm_energy.sampling.sampler import Sampler, UsageProbe, freeze_gc

if TYPE_CHECKING:  # subprocess and tempfile are imported where used: the Prolog imports this module
    import subprocess
    from collections.abc import Callable, Iterable, Mapping
    from types import FrameType

    from slurm_energy.config import SiteConfig


#: Set by ``slurm-energy run`` for its command: the run's marks file, where the command's ``track()``
#: appends its phases, stages and tags instead of starting a second sampler.
RUN_MARKS_ENV = "SLURM_ENERGY_RUN_MARKS"
#: Set by ``slurm-energy run`` for its command: the run's label (its report's ``energy-<label>``).
RUN_LABEL_ENV = "SLURM_ENERGY_RUN_LABEL"

@dataclass
class RunEnd:
    """How a measured run ended, as the record says it: ``how`` (``completed`` | ``exception`` |
    ``signal`` | ``exit_status`` | ``interrupted``), ``detail`` (one line for people), ``exit_code``
    (Slurm's form: ``3`` for an exit status, ``0:15`` for a signal) and ``job_state`` (Slurm's words:
    COMPLETED, FAILED, CANCELLED; empty for a clean end)."""

    how: str
    detail: str
    exit_code: str = ""
    job_state: str = ""
    #: where the measurement began, in the record's error line ("its start"; attach: "the attach")
    began: str = "its start"

    @property
    def clean(self) -> bool:
        return self.how == "completed"

    @classmethod
    def completed(cls) -> RunEnd:
        return cls("completed", "completed", "0")

    @classmethod
    def from_signal(cls, signum: int, what: str = "the run") -> RunEnd:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        state = "CANCELLED" if name in ("SIGINT", "SIGTERM", "SIGHUP") else "FAILED"
        return cls("signal", f"{what} was stopped by {name}", f"0:{signum}", state)

    @classmethod
    def from_exception(cls, exc: BaseException | None, where: str = "") -> RunEnd:
        """An exception that left the measured block (``where``: e.g. ``in Trainer.train()``).
        KeyboardInterrupt is Ctrl-C (SIGINT); a :class:`SignalExit` the signal it stands for;
        ``SystemExit(0)``/``SystemExit(None)`` a clean end, another code an exit status."""
        at = f" {where}" if where else ""
        if exc is None:
            return cls.completed()
        if isinstance(exc, SignalExit):
            return cls.from_signal(exc.signum)
        if isinstance(exc, KeyboardInterrupt):
            return cls("signal", f"the run was interrupted{at} (KeyboardInterrupt: Ctrl-C or SIGINT)",
                       f"0:{int(signal.SIGINT)}", "CANCELLED")
        if isinstance(exc, SystemExit):
            code = exc.code
            if code is None or code == 0:
                return cls.completed()
            rc = code if isinstance(code, int) else 1
            return cls("exit_status", f"the run called sys.exit({code!r}){at}", str(rc), "FAILED")
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
        return cls("exception", f"the run raised {type(exc).__name__}{': ' + text if text else ''}{at}", "1", "FAILED")

    @classmethod
    def from_exit_status(cls, rc: int, what: str = "the command") -> RunEnd:
        """``rc`` as :func:`os.waitstatus_to_exitcode` gives it: >= 0 an exit status, < 0 a signal."""
        if rc == 0:
            return cls.completed()
        if rc < 0:
            return cls.from_signal(-rc, what)
        return cls("exit_status", f"{what} exited with status {rc}", str(rc), "FAILED")

    def error_text(self) -> str:
        """The record's error line for a run that did not end cleanly."""
        if self.how == "exit_status":  # it ran to its own end: no "early", its exit code
            return f"run ended with exit code {self.exit_code}: {self.detail}; measured from {self.began} to its end"
        return (f"run ended early: {self.detail}; measured from {self.began} to that moment (the "
                "totals cover only what ran)")


class SignalExit(SystemExit):
    """Raised by :func:`raise_signal_exit` (``track()``'s and ``attach``'s SIGTERM/SIGHUP handler)
    so the measured block ends, and its partial record is written, as for Ctrl-C; exits with 128 +
    the signal's number."""

    def __init__(self, signum: int):
        super().__init__(128 + int(signum))
        self.signum = int(signum)


#: the signals :func:`raise_signal_exit` has seen in this process (``track()``'s at-exit record says
#: which one stopped the run: a SystemExit is not in ``sys.last_value``)
SIGNALS_SEEN: list[int] = []


def raise_signal_exit(signum: int, _frame: FrameType | None) -> None:
    SIGNALS_SEEN.append(signum)
    raise SignalExit(signum)


def set_handlers(handler: Callable[[int, FrameType | None], Any], sigs: Iterable[int] = (signal.SIGTERM, signal.SIGHUP),
                 only_default: bool = False) -> Callable[[], None]:
    """Install ``handler`` for ``sigs`` (``only_default``: only where the process has no handler of
    its own); returns a function putting back the previous handlers where ``handler`` is still set.
    Outside the main thread nothing is installed."""
    old: dict[int, Any] = {}
    for s in sigs:
        try:
            if not only_default or signal.getsignal(s) is signal.SIG_DFL:
                old[s] = signal.signal(s, handler)
        except (ValueError, OSError):
            pass

    def restore() -> None:
        for s, h in old.items():
            try:
                if signal.getsignal(s) is handler:
                    signal.signal(s, h)
            except (ValueError, OSError):
                pass
    return restore


def measured_root(pid: int | None = None, environ: Mapping[str, str] | None = None) -> tuple[int, str, str | None]:
    """(the PID whose tree a ``track()`` in process ``pid`` measures, what it covers, the Slurm job id
    whose processes on this node it measures too, or None): under torchrun (``TORCHELASTIC_RUN_ID``,
    also ``accelerate launch``) the launcher's tree if it is this user's (every local rank once; the
    other ranks' ``track`` are no-ops); in a Slurm step without the hooks (``SLURM_JOB_ID``,
    ``SLURM_STEP_ID``, ``SLURM_LOCALID``: ``srun -n``) its own tree and every process of this user
    with ``SLURM_JOB_ID=<id>`` in its environment; else its own tree."""
    env = os.environ if environ is None else environ
    pid = os.getpid() if pid is None else pid
    if env.get("TORCHELASTIC_RUN_ID"):
        from slurm_energy.sampling.proctree import read_stat

        st = read_stat(pid)
        ppid = st[1] if st is not None else 0
        try:
            mine = ppid > 1 and os.stat(f"/proc/{ppid}").st_uid == os.getuid()
        except OSError:
            mine = False
        if mine:
            try:
                with open(f"/proc/{ppid}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                comm = "?"
            n = env.get("LOCAL_WORLD_SIZE", "?")
            return ppid, f"torchrun launcher {ppid} ({comm}) and its {n} local ranks", None
    job = env.get("SLURM_JOB_ID", "")
    if job and env.get("SLURM_STEP_ID", "") and env.get("SLURM_LOCALID", ""):
        return pid, f"Slurm job {job}'s processes on this node (SLURM_JOB_ID={job} in their environment)", job
    return pid, f"process {pid} and its children", None


def visible_gpus(cfg: SiteConfig, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The GPUs this process may use, any vendor, as :class:`~slurm_energy.devices.gpu.Gpu` dicts;
    [] when there are none.

    Each backend of :data:`~slurm_energy.devices.gpu.GPU_BACKENDS` in turn reads the process's
    environment as a job's own (``in_prolog=False``): inside a Slurm job ``SLURM_JOB_GPUS`` is the
    allocation (physical); outside Slurm every GPU of the node is visible and the runtimes'
    variables (``CUDA_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``...) count
    the node's own GPUs. Never raises (an unresolvable variable leaves the GPUs unmeasured; the
    CLI says so)."""
    from slurm_energy.devices.gpu import resolve_job_gpus
    from slurm_energy.devices.hardware import HardwareConfig

    env = os.environ if environ is None else environ
    return [g.to_dict() for g in resolve_job_gpus(env, HardwareConfig.of(cfg.hardware), in_prolog=False)]


def gpus_by_index(indices: str | None = None) -> tuple[list[str], list[str], str]:
    """NVML UUIDs of the GPUs ``indices`` names (``"0,1"``, as ``nvidia-smi`` numbers them; None: those of
    CUDA_VISIBLE_DEVICES, or every GPU when it is unset) -> (UUIDs, unresolved ids, reason).

    When NVML is absent or an index names no device, the GPUs named are kept as ``gpu-index-<i>``,
    reported ``unavailable`` (never 0 J), with the reason. Raises ValueError for a malformed list."""
    toks = [t.strip() for t in (indices or "").split(",") if t.strip()]
    if indices is not None and (not toks or not all(t.isdigit() for t in toks)):
        raise ValueError(f"--gpus {indices!r}: give GPU indices as nvidia-smi numbers them, e.g. --gpus 0,1")
    try:
        from slurm_energy.devices.gpu.nvidia import resolve_job_gpus

        res = (resolve_job_gpus(",".join(toks), "") if indices is not None else
               resolve_job_gpus("", os.environ.get("CUDA_VISIBLE_DEVICES", ""), all_if_unset=True))
        uuids = [g.device_id for g in res]
        if uuids:
            return uuids, [], ""
        reason = getattr(res, "reason", "") or "no NVML device"
    except Exception as e:
        reason = f"{type(e).__name__}: {e}"
    return [], [f"gpu-index-{t}" for t in toks], reason

class LocalSampler:
    """Sample ``probe`` in a background thread (or a child process) into a private sample file.

    Args:
        probe: the job (a :class:`~slurm_energy.sampling.probes.ProcessTreeProbe`), or None to
            :meth:`bind` it later (after the readers are open).
        label: the record's job id (and report name ``energy-<label>.html``).
        gpu_uuids: NVML UUIDs to read (``--gpus``, :func:`gpus_by_index`); unresolved: GPUs reported
            ``unavailable`` with ``gpu_note``. With neither, the visible GPUs of any vendor are read
            (:func:`visible_gpus`).
        interval_s: sampling interval, s (default: the site's ``sampling.interval_s``).
        child_of: sample in a child process measuring the tree of this PID (``track``: our own
            PID) until it ends; ``probe`` is then unused (None).
        tree_root: with ``child_of``, the root of the tree measured (default ``child_of``; under
            torchrun the launcher's PID, :func:`measured_root`); job_marker: with ``child_of``, a
            Slurm job id whose processes (by environment) are measured too.
    """

    #: the sampler's state beside its sample file (:meth:`save_state`), for :meth:`from_state`
    STATE_FILE = "measurement.json"

    def __init__(self, cfg: SiteConfig, probe: UsageProbe | None, label: str, gpu_uuids: list[str] | None = None,
                 unresolved: list[str] | None = None, gpu_note: str = "", interval_s: float | None = None,
                 partition: str = "", work_dir: str = ".", child_of: int | None = None,
                 tree_root: int | None = None, job_marker: str | None = None):
        import tempfile

        from slurm_energy.sampling.reading import device_inventory, open_readers

        self.cfg, self.label, self.partition = cfg, label, partition
        self.work_dir = os.path.abspath(work_dir)
        self.interval_s = float(interval_s or cfg.sampling.interval_s)
        from slurm_energy.devices.gpu import Gpu

        named = [Gpu("nvml", "nvidia", u, source="--gpus").to_dict() for u in gpu_uuids or []]
        #: what the readers are opened from, here and in the child sampler (:func:`open_readers`' arguments)
        self.reader_spec: dict[str, Any] = {
            "gpus": named if named or unresolved else visible_gpus(cfg),
            "unresolved_gpus": list(unresolved or [])}
        readers, self.notes = open_readers(cfg, **self.reader_spec)
        if gpu_note:
            self.notes.append(f"gpu: {gpu_note}")
        self.static = device_inventory(readers, self.notes)
        self.dir = tempfile.mkdtemp(prefix="slurm-energy-")
        self.samples = os.path.join(self.dir, "samples.jsonl")
        self.t0 = self.t1 = 0.0
        self.overhead_s = 0.0  # the measuring process's own CPU-s in the tree (overhead_begin/end)
        self._proc: subprocess.Popen[bytes] | None = None
        self._child_spec: dict[str, Any] | None = None
        self.sampler: Sampler | None = None
        if child_of is not None:
            for r in readers:  # the child opens its own; these only named the devices
                r.close()
            self._child_spec = {"pid": child_of if tree_root is None else tree_root, "end_pid": child_of,
                                "job": job_marker, "config": getattr(cfg, "source_path", "") or None,
                                "readers": self.reader_spec, "interval_s": self.interval_s, "samples": self.samples}
            return
        self._readers = readers
        if probe is not None:
            self.bind(probe)

    def bind(self, probe: UsageProbe, label: str | None = None) -> LocalSampler:
        """Give a thread-mode sampler made with ``probe=None`` its job, so the readers were open
        before the job started (``run`` measures its command from the spawn). ``label``: the
        record's job id, if only known now."""
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

    def start(self, wait_s: float = 10.0, t0: float | None = None) -> LocalSampler:
        """Start sampling; returns once the first sample is written (at most ``wait_s``), so what
        the caller does next is measured from its first second even on a loaded machine.

        ``t0``: the job's start, epoch s, when it started just before (``run``: the command's spawn),
        else now. Raises RuntimeError if the child sampler could not start, ValueError if a
        thread-mode sampler has no probe (:meth:`bind`)."""
        if self._child_spec is None and self.sampler is None:
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
        if self._child_spec is not None and t0 is None:
            # the caller's block runs from here (it waited for the child's start-up, ~0.5 s of imports):
            # the measurement starts at its first row, not before the child existed
            self.t0 = self._first_row_time() or self.t0
        return self

    def _first_row_time(self) -> float | None:
        try:
            from slurm_energy.sampling.samplefile import read_sample_table

            t = read_sample_table(self.samples).t
            return float(t[0]) if len(t) else None
        except Exception:
            return None

    def save_state(self, **extra: Any) -> None:
        """Write what :meth:`from_state` needs (label, times, devices, ``extra``: the caller's
        settings) beside the sample file, so a measurement whose process died without ``stop()``
        (SIGKILL, the OOM killer) can still be finished by the child sampler."""
        state = {"label": self.label, "partition": self.partition, "work_dir": self.work_dir,
                 "interval_s": self.interval_s, "t0": self.t0, "static": self.static, "extra": extra}
        tmp = os.path.join(self.dir, self.STATE_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, os.path.join(self.dir, self.STATE_FILE))

    @classmethod
    def from_state(cls, cfg: SiteConfig, d: str) -> tuple[LocalSampler, dict[str, Any]]:
        """(the stopped sampler of directory ``d``, its saved ``extra``): :meth:`save_state`'s
        facts, ended at its sample file's last row. Raises OSError/ValueError for a bad state."""
        from slurm_energy.sampling.samplefile import read_sample_table

        with open(os.path.join(d, cls.STATE_FILE)) as f:
            st = json.load(f)
        self = cls.__new__(cls)
        self.cfg, self.label, self.partition = cfg, st["label"], st["partition"]
        self.work_dir, self.interval_s, self.static = st["work_dir"], float(st["interval_s"]), st["static"]
        self.notes = list(self.static.get("reader_notes", []))
        self.dir, self.samples = d, os.path.join(d, "samples.jsonl")
        t = read_sample_table(self.samples).t
        self.t0, self.t1 = float(st["t0"]), (float(t[-1]) if len(t) else float(st["t0"]))
        self._proc, self._child_spec, self.sampler = None, {}, None  # not running
        self.overhead_s = 0.0
        return self, st["extra"]

    def sample_now(self, wait_s: float = 2.0) -> bool:
        """Have the sampler write one row now and wait for it (at most ``wait_s``), so a record made
        next covers the run up to this call (``track().result()`` within its first interval).
        Returns whether the row came. Child mode only (a thread's caller has its own); else False."""
        if self._proc is None or self._proc.poll() is not None:
            return False
        try:
            before = os.path.getsize(self.samples)
        except OSError:
            before = 0
        self._proc.send_signal(signal.SIGUSR1)  # the child's Sampler.request_sample
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._row_after(before):
                return True
            time.sleep(0.01)
        return False

    def overhead_begin(self) -> float | None:
        """The measuring process starts work of its own inside the measured tree (``track().result()``):
        until :meth:`overhead_end`, the child sampler's probe subtracts this process's CPU time since
        now (:data:`~slurm_energy.sampling.probes.OVERHEAD_FILE`). Returns the mark to pass on; None
        outside child mode."""
        from slurm_energy.sampling.proctree import read_stat

        st = read_stat(os.getpid()) if self._child_spec else None
        if st is None:
            return None
        self._write_overhead(f"{self.overhead_s!r} {os.getpid()} {st[2]!r}")
        return st[2]

    def overhead_end(self, mark: float | None) -> None:
        """That work is done: its CPU time (since :meth:`overhead_begin`'s ``mark``) is added to the
        measuring process's own CPU-s, which the probe keeps subtracting."""
        from slurm_energy.sampling.proctree import read_stat

        if mark is None:
            return
        st = read_stat(os.getpid())
        if st is not None:
            self.overhead_s += max(0.0, st[2] - mark)
        self._write_overhead(repr(self.overhead_s))

    def _write_overhead(self, text: str) -> None:
        from slurm_energy.sampling.probes import OVERHEAD_FILE

        path = os.path.join(self.dir, OVERHEAD_FILE)
        try:
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.replace(path + ".tmp", path)  # the probe reads a whole text, old or new
        except OSError:
            pass

    def _row_after(self, offset: int) -> bool:
        """Whether the sample file holds whole rows past ``offset`` (its end is a row's newline)."""
        try:
            with open(self.samples, "rb") as f:
                f.seek(offset)
                return f.read().endswith(b"\n")
        except OSError:
            return False

    def _first_sample(self) -> bool:
        return self.sampler.n_samples >= 1 if self.sampler is not None else self._row_after(0)

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

    def stop(self, final_usage: JobUsage | None = None) -> None:
        """Take the final sample and stop (``final_usage``: exact usage known to the caller, e.g. a
        child's rusage; thread mode only). Nothing on a sampler that was never started (:meth:`from_state`)."""
        if self._proc is None and self.sampler is None:
            return
        if self._proc is not None:
            import subprocess

            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)  # the Sampler's handler: final sample, exit
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        elif self.sampler is not None:
            if final_usage is not None:
                self.sampler.last_usage = final_usage
            self.sampler.stop()
            self._thread.join(10)
        self.t1 = time.time()

    @property
    def pid(self) -> int | None:
        """The child sampler's PID (child mode, once started); None for a thread-mode sampler."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.sampler is not None and self._thread.is_alive()

    def cleanup(self) -> None:
        """Remove the temporary sample directory."""
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def _child_main(spec_json: str) -> int:
    """The child sampler of :class:`LocalSampler` (``child_of``): samples the tree of
    ``spec["pid"]`` (itself excluded) until SIGTERM or until that process is gone."""
    from slurm_energy.config import load_site_config
    from slurm_energy.sampling.probes import OVERHEAD_FILE, ProcessTreeProbe
    from slurm_energy.sampling.reading import open_readers
    from slurm_energy.sampling.samplefile import SampleWriter

    spec = json.loads(spec_json)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # before the slow part
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # a sample asked for before the loop runs: its first
    cfg = load_site_config(spec["config"])
    readers, _ = open_readers(cfg, **spec["readers"])  # as the parent opened them (LocalSampler.reader_spec)
    # CPU time from the first poll: the tree's CPU time before the block (imports, other ranks' set-up)
    # is not this measurement's
    probe = ProcessTreeProbe(spec["pid"], exclude=frozenset({os.getpid()}), end_pid=spec.get("end_pid"),
                             from_first_poll=True, job_marker=spec.get("job"),
                             overhead_path=os.path.join(os.path.dirname(spec["samples"]), OVERHEAD_FILE))
    s = Sampler(readers, probe, SampleWriter(spec["samples"], fsync=False), interval_s=spec["interval_s"],
                gone_after_s=0.0)
    s.install_signal_handlers()
    signal.signal(signal.SIGUSR1, s.request_sample)  # LocalSampler.sample_now
    if stop:
        s.stop()
    freeze_gc()
    s.run()
    d = os.path.dirname(spec["samples"])
    if s.stop_signal is None and s.gone_at is not None and os.path.exists(os.path.join(d, LocalSampler.STATE_FILE)):
        # the measured process ended without stopping us (SIGKILL, the OOM killer, os._exit): finish its
        # measurement here, as track() would have (the API layer's module, run, not imported: layers)
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "slurm_energy.api", d])
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
