"""`slurm-energy run -- CMD`, `slurm-energy attach PID`, `slurm-energy hook` (``install``:
:mod:`slurm_energy.cli.install_cmd`).

``run`` and ``attach`` use the same readers, sampler and accounting as the Slurm hooks, without
Slurm: the job is a process tree.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurm_energy.units import J_PER_KWH

if TYPE_CHECKING:
    from types import FrameType

    from slurm_energy.cli.main import Subparsers
    from slurm_energy.core import JobUsage
    from slurm_energy.model import JobRecord
    from slurm_energy.pipeline import LocalMeasurement
    from slurm_energy.sampling.local import RunEnd
    from slurm_energy.sampling.sampler import UsageProbe


def register(sub: Subparsers) -> None:
    """Add run, attach and hook sub-commands."""
    p = sub.add_parser("run", help="measure a command (no Slurm needed): slurm-energy run -- CMD ...")
    _common(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    p.set_defaults(func=cmd_run, func_name="run")

    p = sub.add_parser("attach", help="measure a running process tree until it exits (or Ctrl-C)")
    _common(p)
    p.add_argument("pid", type=int)
    p.add_argument("--gpus", default="", help="GPUs the process uses, as nvidia-smi indices (e.g. 0,1); "
                   "default: CUDA_VISIBLE_DEVICES, else every GPU")
    p.set_defaults(func=cmd_attach, func_name="attach")

    p = sub.add_parser("hook", help="run the Prolog/Epilog logic by hand (as slurmd would)")
    p.add_argument("which", choices=["prolog", "epilog"])
    p.set_defaults(func=lambda a: __import__("slurm_energy.slurm.hooks", fromlist=["x"]).main([a.which]))


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="site config YAML (default $SLURM_ENERGY_CONFIG or /etc/slurm-energy/site.yaml)")
    p.add_argument("--interval", type=float, help="sampling interval, s (default: site config, 5 s)")
    p.add_argument("--out", default=".", help="directory for energy-<id>.html/.csv (default .)")
    p.add_argument("--partition", default="", help="partition/datacenter whose carbon facts apply")
    p.add_argument("--no-report", action="store_true", help="print the summary only")
    p.add_argument("--keep-samples", action="store_true",
                   help="keep the sample file (/tmp/slurm-energy-*/samples.jsonl) and print its path; "
                        "by default it is removed, unless the report could not be written")
    p.add_argument("--label", help="the measurement's name: energy-<label>.html/.csv (default run-<pid> / pid-<pid>)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing energy-<label> report (default: refuse a given --label whose report "
                        "exists; a default label that exists gets -2, -3...)")
    g = p.add_argument_group("carbon facts (override site.yaml; without them and site.yaml: labelled defaults, "
                             "PUE 1.58 a datacenter average, CI 475 gCO2e/kWh the world average)")
    g.add_argument("--country", help="ISO 3166 country the power comes from (FR): its grid's carbon intensity")
    g.add_argument("--zone", help="grid zone or cloud region (US-CA, europe-west1 with --country BE)")
    g.add_argument("--pue", type=float, help="facility / IT energy (a workstation: 1.0)")
    g.add_argument("--ci", type=float, help="grid carbon intensity, gCO2e/kWh")
    g.add_argument("--alpha", type=float, help="fraction of emissions counted, 0..1 (1: no offset)")


def _measure(args: argparse.Namespace, launch: Callable[[LocalMeasurement], tuple[UsageProbe, str, float | None]],
             wait_for_end: Callable[[], JobUsage | None], gpus: str | None = None,
             ending: Callable[[], RunEnd] | None = None) -> JobRecord:
    """Open the readers, then ``launch(measurement)`` -> (probe, label, t0 or None) the job (after
    the second of set-up, so ``run`` measures its command from its spawn), sample it until
    ``wait_for_end()`` returns; then summarise and report. ``gpus``: NVML indices (``attach --gpus
    0,1``; default the visible GPUs); ``ending()``: how the run ended (:class:`~slurm_energy.sampling.local.RunEnd`)."""
    from slurm_energy.config import ConfigError
    from slurm_energy.outputs.report import report_path
    from slurm_energy.pipeline import LocalMeasurement, local_site_config
    from slurm_energy.sampling.local import LocalSampler, gpus_by_index
    from slurm_energy.sampling.sampler import freeze_gc

    try:
        cfg = local_site_config(args.config, f"slurm-energy {getattr(args, 'func_name', 'run')}", args.partition,
                                **{k: getattr(args, k, None) for k in ("country", "zone", "pue", "ci", "alpha")})
    except ConfigError as e:
        print(f"slurm-energy: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    # a given --label whose report exists is refused before anything runs, unless --overwrite
    if getattr(args, "label", None) and not args.no_report and not getattr(args, "overwrite", False):
        path = report_path(args.out, args.label)
        if os.path.lexists(path):
            print(f"slurm-energy: {path} exists (an earlier run's report); pass --overwrite to replace it, "
                  "or another --label", file=sys.stderr)
            raise SystemExit(2)
    uuids: list[str] | None = None
    unresolved: list[str] = []
    note = ""
    if gpus:
        try:
            uuids, unresolved, note = gpus_by_index(gpus)
        except ValueError as e:
            print(f"slurm-energy: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        if unresolved:
            print(f"slurm-energy: GPUs {gpus} not readable ({note}); reported as not measured", file=sys.stderr)
    m = LocalMeasurement(LocalSampler(cfg, None, "", uuids, unresolved, note, interval_s=args.interval,
                                      partition=args.partition, work_dir=args.out))
    try:
        probe, label, t0 = launch(m)
    except BaseException:
        m.sampler.cleanup()
        raise
    m.sampler.bind(probe, getattr(args, "label", None) or label).start(t0=t0)
    freeze_gc()  # this process only waits now: its start-up objects stay out of the sampler's collections
    keep = bool(getattr(args, "keep_samples", False))
    try:
        m.sampler.stop(wait_for_end())
        final = m.record(m.marks(), ended=ending() if ending is not None else None)
        # the report first: it relabels the record when its label's report exists (never overwritten)
        if not args.no_report and m.report(final, args.out, getattr(args, "overwrite", False), "--overwrite"):
            keep = True  # the report failed: the samples are the only copy of the measurement
        _print_summary(final)
        if m.report_paths:
            print("report: {}\n        {}".format(*m.report_paths))
    except BaseException:
        keep = True
        raise
    finally:
        m.close(keep)
    return final


def _print_summary(rec: JobRecord) -> None:
    """The record on stdout (energy per class and method, IT -> facility -> CO2e, status); a line on
    stderr when a carbon fact is the default."""
    from slurm_energy.config.overrides import default_facts_warning

    cpu = rec.nodes[0].cpu_time_s if rec.nodes and rec.nodes[0].cpu_time_s is not None else float("nan")
    print(f"job {rec.job_id}: elapsed {rec.elapsed_s:.1f} s, CPU time {cpu:.2f} s")
    for cls, j in rec.energy_it_j.items():
        kwh = "n/a (not measured)" if j is None else f"{j / J_PER_KWH:.4g} kWh"
        print(f"  {cls:4s} {kwh:>22s}  method={rec.methods[cls].value}")
    c = rec.carbon
    if rec.it_kwh is None:
        print("  IT energy: n/a (nothing measured)")
    else:
        print(f"  IT {rec.it_kwh:.4g} kWh x PUE {c.pue} = facility {rec.facility_kwh:.4g} kWh")
        print(f"  x CI {c.ci_g_per_kwh:g} gCO2e/kWh ({c.ci_source}) x alpha {c.alpha:g} = {rec.co2e_kg:.4g} kgCO2e")
    print(f"  status {rec.status_text}" + "".join(f"\n  {e}" for e in rec.errors if e.startswith("run ended ")))
    warn = default_facts_warning(rec.carbon, pue_arg="--pue 1.0", ci_arg="--country FR")
    if warn:
        print(warn, file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    """Run ``args.cmd`` as a child and measure it; exit with its exit status."""
    from slurm_energy.core import JobUsage
    from slurm_energy.sampling.local import RUN_LABEL_ENV, RUN_MARKS_ENV, RunEnd
    from slurm_energy.sampling.probes import ProcessTreeProbe

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        print("slurm-energy run: no command given; usage: slurm-energy run [options] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    label = getattr(args, "label", None)
    st = _Child()

    def launch(m: LocalMeasurement) -> tuple[UsageProbe, str, float | None]:
        # the command's track() calls write their marks into this run's (RUN_MARKS_ENV)
        env = dict(os.environ, **{RUN_MARKS_ENV: m.marks_path, RUN_LABEL_ENV: label or ""})
        t0 = time.time()
        try:
            st.proc = child = subprocess.Popen(cmd, env=env)
        except OSError as e:
            print(f"slurm-energy run: cannot start {cmd[0]!r}: {e.strerror}", file=sys.stderr)
            # as a shell: 126 found but not executable, 127 not found
            raise SystemExit(126 if isinstance(e, PermissionError) else 127) from None
        st.restore = _forward_signals(child)
        return ProcessTreeProbe(child.pid, exact_end=True), label or f"run-{child.pid}", t0

    def wait() -> JobUsage:
        child = st.proc
        if child is None:  # _measure waits only after launch() started it
            raise RuntimeError("slurm-energy run: waited for a command that was never started")
        _pid, status, ru = os.wait4(child.pid, 0)  # PEP 475: retried after a forwarded signal
        st.rc = child.returncode = os.waitstatus_to_exitcode(status)
        # the child's own rusage: exact CPU time of it and every descendant it waited for
        return JobUsage(ru.ru_utime + ru.ru_stime, None, ru.ru_maxrss * 1024, [child.pid], "rusage")

    try:
        _measure(args, launch, wait, ending=lambda: RunEnd.from_exit_status(1 if st.rc is None else st.rc))
    finally:
        if st.restore is not None:
            st.restore()
    rc = 1 if st.rc is None else st.rc
    return rc if rc >= 0 else 128 - rc


@dataclass
class _Child:
    """``run``'s command while it is measured: the process, the signal handlers to put back, its exit
    status as :func:`os.waitstatus_to_exitcode` gives it (negative: killed by that signal; None: not
    waited for: exit 1)."""

    proc: subprocess.Popen[bytes] | None = None
    restore: Callable[[], None] | None = None
    rc: int | None = None


def _forward_signals(child: subprocess.Popen[bytes]) -> Callable[[], None]:
    """Pass SIGTERM/SIGINT/SIGHUP sent to ``run`` on to ``child`` (``run`` keeps going: it waits for
    the child, then takes the final sample and writes the partial record). A terminal's Ctrl-C and
    hang-up already reach the child (our process group) and are not passed on while our group is the
    terminal's foreground group (:func:`_terminal_sends_to_child`); one sent to the whole group from
    elsewhere reaches it twice (docs/researchers/track.md). Returns a function restoring the previous handlers."""
    from slurm_energy.sampling.local import set_handlers

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum in (signal.SIGINT, signal.SIGHUP) and _terminal_sends_to_child():
            return
        if child.returncode is None:
            try:
                os.kill(child.pid, signum)
            except ProcessLookupError:
                pass

    return set_handlers(forward, (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))


def _terminal_sends_to_child() -> bool:
    """True when this process group is the foreground group of the controlling terminal: a
    keyboard SIGINT (or the terminal's SIGHUP) then went to every process of the group, the child
    included. False without a controlling terminal or in the background."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def cmd_attach(args: argparse.Namespace) -> int:
    """Measure an existing process tree until it exits (or Ctrl-C)."""
    import psutil

    from slurm_energy.sampling.local import RunEnd, SignalExit, raise_signal_exit, set_handlers
    from slurm_energy.sampling.probes import ProcessTreeProbe

    if not psutil.pid_exists(args.pid):
        print(f"slurm-energy attach: no process {args.pid}", file=sys.stderr)
        return 1
    if args.pid == 1:
        print("slurm-energy attach: warning: PID 1 is init; its tree is every process on this machine, "
              "so the record measures the whole node, not one job", file=sys.stderr)
    # CPU time from the attach on: the tree's CPU time before it is not this measurement's
    probe = ProcessTreeProbe(args.pid, from_first_poll=True)
    stopped: list[str] = []

    def wait() -> None:
        restore = set_handlers(raise_signal_exit)  # SIGTERM/SIGHUP end the wait, as Ctrl-C does
        try:
            probe.wait_gone()  # a pidfd: no polling while the tree runs
        except KeyboardInterrupt:
            stopped.append("SIGINT (Ctrl-C)")
        except SignalExit as e:
            stopped.append(signal.Signals(e.signum).name)
        finally:
            restore()

    def ending() -> RunEnd:
        if stopped:
            return RunEnd("interrupted", f"attach was stopped by {stopped[0]} while process {args.pid} still ran",
                          began="the attach")
        return RunEnd("completed", f"process {args.pid} ended")

    _measure(args, lambda _m: (probe, f"pid-{args.pid}", None), wait, gpus=args.gpus or None, ending=ending)
    return 0

