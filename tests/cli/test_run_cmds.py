"""cli/run_cmds.py, ``slurm-energy run`` and ``attach``: ``attach`` counts only
the CPU time of the measured window; ``run`` forwards SIGTERM/SIGINT to
its child and still writes the (partial) report. Real processes throughout."""

import csv
import io
import os
import signal
import subprocess
import sys
import time

from slurm_energy.sampling.probes import ProcessTreeProbe
from tests.helpers import ordinary_user as ou

# burn CPU until this process has used 1.0 s, say so, wait for a line on stdin, burn until 1.6 s
BURNER = """
import sys, time
def burn(to):
    while time.process_time() < to: pass
burn(1.0); print("ready", flush=True)
sys.stdin.readline()
burn(1.6); print("done", flush=True)
time.sleep(60)
"""


def test_attach_probe_counts_cpu_time_from_the_first_poll_only():
    p = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"  # 1.0 s of CPU used before the attach
        probe = ProcessTreeProbe(p.pid, from_first_poll=True)
        first = probe.poll()
        assert first is not None and first.cpu_time_s == 0.0
        assert 0.95 <= probe.cpu_baseline_s <= 1.3  # the pre-attach CPU time, s, kept as the baseline
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"
        # by hand: 1.6 s - 1.0 s = 0.6 s of CPU in the window (interpreter startup is before the
        # baseline; printing/readline add a few ms); without the baseline it would be >= 1.6 s
        assert abs(probe.poll().cpu_time_s - 0.6) < 0.1
        # run's probe (child started by us) still counts from 0
        assert ProcessTreeProbe(p.pid).poll().cpu_time_s >= 1.55  # 1.6 s, to psutil's 0.01 s ticks
    finally:
        p.kill()
        p.wait()


ATTACHED = BURNER.replace("time.sleep(60)", "time.sleep(1.0)")  # ends 1 s after the 2nd burn


def test_attach_record_cpu_time_covers_only_the_measured_window(tmp_path, capsys):
    import argparse
    import threading

    from slurm_energy.cli.run_cmds import cmd_attach

    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    args = argparse.Namespace(pid=0, gpus="", config=str(site), interval=0.2, out=str(tmp_path), partition="",
                              no_report=True)
    p = subprocess.Popen([sys.executable, "-c", ATTACHED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"  # 1.0 s of CPU before the attach
        args.pid = p.pid

        def go():
            time.sleep(1.0)  # the sampler has its first sample by then
            p.stdin.write("go\n")
            p.stdin.flush()
        threading.Thread(target=go, daemon=True).start()
        assert cmd_attach(args) == 0
    finally:
        p.kill()
        p.wait()
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(f"job pid-{p.pid}:"))
    cpu_s = float(line.split("CPU time ")[1].split(" s")[0])
    assert abs(cpu_s - 0.6) < 0.1, line  # by hand: 1.6 s - 1.0 s before the attach = 0.6 s


def _default_signals() -> None:
    """A command started in the background by a non-interactive shell (nohup ... &, a CI runner)
    inherits SIGINT/SIGQUIT ignored, and so would `run`'s child: reset them as a terminal has them."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _start_run(tmp_path, *cmd):
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    return subprocess.Popen([sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", str(site),
                             "--interval", "0.2", "--out", str(tmp_path), "--", *cmd],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_default_signals)


def _wait_for_child(run: subprocess.Popen, name: str, timeout_s: float = 20.0) -> int:
    """PID of ``run``'s child named ``name`` once it and the sampler are up."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kids = [c for c in psutil.Process(run.pid).children() if c.name() == name]
        if kids and any(t.id != run.pid for t in psutil.Process(run.pid).threads()):  # sampler thread up
            time.sleep(0.5)
            return kids[0].pid
        time.sleep(0.05)
    raise AssertionError(f"run's child {name} did not start")


def _check_sig(tmp_path, sig):
    run = _start_run(tmp_path, "bash", "-c", "sleep 12")
    child = _wait_for_child(run, "sleep")
    t0 = time.monotonic()
    os.kill(run.pid, sig)  # to `run` alone, not its process group
    out, err = run.communicate(timeout=30)
    assert time.monotonic() - t0 < 10, "run waited for the full sleep: the signal did not reach the child"
    assert run.returncode == 128 + sig, err  # as a shell reports a child killed by the signal
    assert f"job run-{child}:" in out  # the summary was printed
    assert (tmp_path / f"energy-run-{child}.html").is_file()
    assert (tmp_path / f"energy-run-{child}.csv").is_file()


def test_run_sigterm_reaches_the_child_and_the_report_is_still_written(tmp_path):
    _check_sig(tmp_path, signal.SIGTERM)  # 128 + 15 = 143


def test_run_sigint_to_run_alone_reaches_the_child(tmp_path):
    _check_sig(tmp_path, signal.SIGINT)  # 128 + 2 = 130


OWN_CPU = """
import resource, time
t = time.process_time()
while time.process_time() - t < 0.5: pass
u = resource.getrusage(resource.RUSAGE_SELF)  # microseconds, as wait4 reports (os.times() is in 10 ms ticks)
print("own", u.ru_utime + u.ru_stime, flush=True)
"""


def test_run_cpu_time_of_a_job_shorter_than_the_interval_and_no_samples_left(tmp_path):
    """``run`` at 5 s samples a 0.5 s job: its record's CPU time is the child's wait4 rusage, i.e.
    the job's own CPU time (which it prints, from getrusage(RUSAGE_SELF), just before it exits); the private
    sample directory is removed unless --keep-samples."""
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path), TMPDIR=str(tmp))
    base = [sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", str(site), "--interval", "5",
            "--out", str(tmp_path), "--no-report"]
    r = subprocess.run(base + ["--", sys.executable, "-c", OWN_CPU], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    own = float(next(x for x in r.stdout.splitlines() if x.startswith("own ")).split()[1])
    rec = float(r.stdout.split("CPU time ")[1].split(" s")[0])
    assert own >= 0.5 and abs(rec - own) <= 0.03 * own + 0.01, r.stdout  # printed to 0.01 s
    assert os.listdir(tmp) == []  # /tmp/slurm-energy-* removed
    r = subprocess.run(base + ["--keep-samples", "--", "true"], capture_output=True, text=True, env=env, timeout=60)
    kept = r.stderr.split("samples kept in ")[1].split()[0]
    assert r.returncode == 0 and os.path.dirname(os.path.dirname(kept)) == str(tmp) and os.path.getsize(kept) > 0


WALL = """
import time
t = time.time()  # the command's first statement: it has been running only since just before this
time.sleep(1.5)
print("inner", time.time() - t, flush=True)
"""


def test_run_elapsed_covers_the_command_from_its_start(tmp_path):
    """``run`` opens its readers (imports, NVML, RAPL zones: about a second) before it spawns the
    command, and counts elapsed time from the spawn: the record's elapsed time is at least the
    command's own wall time from its first statement (1.5 s sleep). It was 1.1 s short when the
    command started before the set-up."""
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    r = subprocess.run([sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", str(site), "--interval", "5",
                        "--out", str(tmp_path), "--no-report", "--", sys.executable, "-c", WALL],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    inner = float(next(x for x in r.stdout.splitlines() if x.startswith("inner ")).split()[1])
    elapsed = float(r.stdout.split("elapsed ")[1].split(" s")[0])  # printed to 0.1 s: +0.05 s rounding
    assert inner >= 1.5 and elapsed + 0.05 >= inner, r.stdout


def test_run_of_a_missing_command_exits_127_and_leaves_no_sample_directory(tmp_path):
    """A command that cannot be spawned: exit status 127 (as a shell's), its reason on stderr, and
    the private sample directory the set-up made is removed."""
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path), TMPDIR=str(tmp))
    r = subprocess.run([sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", str(site), "--no-report",
                        "--", str(tmp_path / "no-such-command")], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 127
    assert "cannot start" in r.stderr and "No such file or directory" in r.stderr
    assert os.listdir(tmp) == []


COUNT_INT = """
import os, signal, sys, time
out, got = sys.argv[1], []
signal.signal(signal.SIGINT, lambda s, f: got.append(s))
open(out + ".ready", "w").close()
t = time.time()
while not got and time.time() - t < 20:
    time.sleep(0.01)
time.sleep(1.0)  # a second copy, forwarded by run, would arrive within this
open(out, "w").write(str(len(got)))
"""


def test_run_in_a_terminal_ctrl_c_reaches_the_command_once(tmp_path):
    """Ctrl-C typed at the terminal ``run`` runs in: the terminal sends SIGINT to the foreground
    process group, ``run`` and the command alike; ``run`` does not pass it on as well, so the
    command gets exactly 1 (it got 2 when run forwarded every SIGINT)."""
    import pty

    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    out = tmp_path / "count"
    script = tmp_path / "count_int.py"
    script.write_text(COUNT_INT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    argv = [sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", str(site), "--out", str(tmp_path),
            "--no-report", "--", sys.executable, str(script), str(out)]
    pid, master = pty.fork()  # the child: a new session whose controlling terminal is the pty
    if pid == 0:
        os.execve(argv[0], argv, env)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "count.ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.write(master, b"\x03")  # Ctrl-C: the line discipline signals the foreground group
        while not out.exists() and time.monotonic() < deadline:
            try:
                os.read(master, 4096)  # keep the pty drained
            except OSError:
                time.sleep(0.02)
        assert out.read_text() == "1"
    finally:
        os.close(master)
        if os.waitpid(pid, os.WNOHANG) == (0, 0):  # run still there: stop it (by PID)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_run_of_a_file_that_is_not_executable_exits_126(tmp_path):
    """As a shell: a command found but not executable exits 126 (127 is for one not found)."""
    site = tmp_path / "site.yaml"
    site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {tmp_path}/no-powercap\n")
    noexec = tmp_path / "noexec.sh"
    noexec.write_text("#!/bin/sh\ntrue\n")  # mode 0644
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd()] + sys.path))
    r = subprocess.run([sys.executable, "-m", "slurm_energy.cli.main", "run", "--config", str(site), "--no-report",
                        "--", str(noexec)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 126 and "Permission denied" in r.stderr, (r.returncode, r.stderr)


# --------------------------------------------------------------------------------------------------
# Issue 28 for ``slurm-energy run`` and ``attach``, as an ordinary user: a non-zero exit or a
# signal makes the record partial and says so; ``--label`` names the report and an existing one is
# never overwritten without ``--overwrite``; carbon facts as flags; a command using ``track()``
# inside ``run`` gives one report with its phases.

RUN = [ou.PY, "-m", "slurm_energy.cli.main", "run", "--interval", "0.1"]


def _rows(d, label):
    return list(csv.DictReader(io.StringIO((d / f"energy-{label}.csv").read_text())))


def test_non_zero_exit_is_on_the_record(home):
    r = ou.run(RUN + ["--label", "fails", "--", ou.PY, "-c", "import sys; sum(range(10**6)); sys.exit(3)"], home)
    assert r.returncode == 3, r.stderr
    assert {row["status"] for row in _rows(home, "fails")} == {"partial"}
    html = (home / "energy-fails.html").read_text()
    assert "run ended with exit code 3: the command exited with status 3; measured from its start to its end" in html
    assert "ended early" not in html and "exit code 3" in html
    assert "run ended with exit code 3: the command exited with status 3" in r.stdout
    assert "status partial" in r.stdout
    assert list((home / "tmp").glob("slurm-energy-*")) == []


def test_sigterm_to_run_is_on_the_record(home):
    p = ou.popen(RUN + ["--label", "term", "--", ou.PY, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                 home)
    try:
        assert p.stdout.readline().strip() == "up"
        p.send_signal(signal.SIGTERM)  # run passes it on to the command, then writes the record
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + 15, err
    html = (home / "energy-term.html").read_text()
    assert "the command was stopped by SIGTERM" in html and "exit code 0:15" in html
    assert "Slurm state</th><td>CANCELLED" in html


def test_sigterm_to_attach_is_on_the_record(home):
    target = subprocess.Popen(ou.as_user([ou.PY, "-c", "import time; time.sleep(60)"]), env=ou.user_env(home))
    try:
        p = ou.popen([ou.PY, "-m", "slurm_energy.cli.main", "attach", "--interval", "0.1", "--label", "att",
                      str(target.pid)], home)
        time.sleep(3)  # set-up (imports, readers), then sampling
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
    finally:
        target.kill()
        target.wait()
    assert p.returncode == 0, err
    html = (home / "energy-att.html").read_text()
    assert (f"run ended early: attach was stopped by SIGTERM while process {target.pid} still ran; measured from "
            "the attach to that moment (the totals cover only what ran)") in html  # one span, not two
    assert {row["status"] for row in _rows(home, "att")} == {"partial"}


def test_label_is_never_overwritten_without_asking(home):
    r = ou.run(RUN + ["--label", "mine", "--", "true"], home)
    assert r.returncode == 0 and (home / "energy-mine.html").exists()
    first = (home / "energy-mine.html").read_text()
    marker = home / "ran"
    r = ou.run(RUN + ["--label", "mine", "--", "touch", str(marker)], home)
    assert r.returncode == 2 and "energy-mine.html exists" in r.stderr and "--overwrite" in r.stderr
    assert not marker.exists()  # refused before the command ran
    assert (home / "energy-mine.html").read_text() == first
    r = ou.run(RUN + ["--label", "mine", "--overwrite", "--", "touch", str(marker)], home)
    assert r.returncode == 0 and marker.exists() and (home / "energy-mine.html").read_text() != first


def test_carbon_flags_override_and_the_defaults_are_said(home):
    r = ou.run(RUN + ["--label", "fr", "--pue", "1.0", "--country", "FR", "--", "true"], home)
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in _rows(home, "fr") if x["device_class"] == "total"]
    assert row["pue"] == "1" and row["pue_default"] == "false" and row["ci_default"] == "false"
    assert "DEFAULT" not in r.stderr
    r = ou.run(RUN + ["--label", "dflt", "--", "true"], home)
    assert "PUE 1.58 is the DEFAULT datacenter industry average" in r.stderr and "give --pue 1.0" in r.stderr
    r = ou.run(RUN + ["--label", "bad", "--pue", "0.5", "--", "true"], home)
    assert r.returncode == 2 and "slurm-energy run: pue=0.5:" in r.stderr  # the value given, named


def test_track_inside_run_defers_to_it(home):
    script = ou.write(home, "s.py", "from slurm_energy import track\nwith track(label='inner') as t:\n"
                                    "    with t.phase('work'):\n        sum(range(10**6))\n    print(t.result().source)\n")
    r = ou.run(RUN + ["--label", "outer", "--", ou.PY, str(script)], home)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in home.glob("energy-*.html")) == ["energy-outer.html"]
    assert "slurm-energy run" in r.stdout  # t.result().source: run measures it
    assert ",phase,work," in (home / "energy-outer.phases.csv").read_text()
