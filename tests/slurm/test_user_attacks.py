"""Issue 22: an ordinary user cannot falsify, block or hide accounting. Each test does one kind of
attack as the test cluster's ordinary users (alice 2001, bob 2002) with real files and processes,
and checks the attacker's own record, the victim's record and ``collect`` afterwards. The finalizer
runs in-process from real spools (tests/attack_env.py): job 901 is bob's (the victim), 900 alice's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from slurm_energy.core import Status
from slurm_energy.slurm.jobend import finish
from slurm_energy.slurm.jobend import node_record as jobend_node
from tests.helpers.attack_env import END, JOB_J, NODE, T0, Node, user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the finalizer runs as root and drops to the job's user")


@pytest.fixture
def node(monkeypatch):
    import logging

    handlers = list(logging.getLogger("slurm_energy").handlers)
    n = Node(monkeypatch)
    yield n
    logging.getLogger("slurm_energy").handlers[:] = handlers  # the finalizer's setup_logging took them
    n.cleanup()


def _finalize(node, spool, exit_code="0:0", slurm=None):
    """The finalizer of ``spool``'s attempt, asking Slurm through ``slurm`` (a SlurmFacts) where given."""
    from contextlib import nullcontext

    from slurm_energy.slurm.clients.facts import use

    with use(slurm) if slurm is not None else nullcontext():
        assert finish.finalize_main(spool.dir, NODE, END, exit_code, "terminated") == 0


def _as(name):
    uid, gid = user(name)

    def drop():
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    return drop


def _victim(node):
    """bob's ordinary job 901: 320 J, COMPLETED, report in his directory."""
    wd = node.workdir("bob", "bob-work")
    _finalize(node, node.job("901", "bob", wd))
    return wd


def _check_victim(node, wd):
    (v,) = node.store().get_job("901")
    assert (v.user, v.status, v.job_state, v.energy_it_j["cpu"]) == ("bob", Status.COMPLETE, "COMPLETED", JOB_J)
    assert sorted(os.listdir(wd)) == ["energy-901.csv", "energy-901.html"]


# -- 1. bytes that are not UTF-8 in everything a user controls ------------------------------------
def test_non_utf8_job_name_work_dir_and_phase_name_give_a_record_a_report_and_collect_goes_on(node):
    wd = node.workdir("alice", b"caf\xe9-\xff")  # Latin-1 bytes in the directory name
    spool = node.job("900", "alice", wd, job_name=os.fsdecode(b"run\xfe\x80"))  # as os.environ gives it
    mdir = node.marks / "900"
    os.makedirs(mdir)
    uid, gid = user("alice")
    os.chown(mdir, uid, gid)
    (mdir / f"marks-{NODE}.jsonl").write_bytes(
        b'{"t": %.1f, "ev": "begin", "id": 1, "name": "ep\xffoch"}\n{"t": %.1f, "ev": "end", "id": 1}\n'
        % (T0, T0 + 2.0))
    _finalize(node, spool)
    (a,) = node.store().get_job("900")
    # stored, shown with \xNN, the original bytes kept (hex) and recovered exactly
    assert a.status == Status.COMPLETE and a.energy_it_j["cpu"] == JOB_J
    assert a.job_name == "run\\xfe\\x80" and a.raw_text["job_name"] == b"run\xfe\x80".hex()
    assert os.fsencode(a.raw("work_dir")) == os.fsencode(wd)
    assert [p.name for p in a.phases] == ["ep\\xffoch"] and a.raw_text["text:ep\\xffoch"] == b"ep\xffoch".hex()
    # 120 J in the phase (T0 .. T0 + 2 s)
    assert a.phases[0].it_j == pytest.approx(120.0)
    # the report went into the real (non-UTF-8) directory, as alice
    names = sorted(os.listdir(os.fsencode(wd)))
    assert names == [b"energy-900.csv", b"energy-900.html", b"energy-900.phases.csv"]
    assert os.stat(os.path.join(os.fsencode(wd), b"energy-900.html")).st_uid == uid
    assert "run\\xfe\\x80" in open(os.path.join(os.fsencode(wd), b"energy-900.html"), encoding="utf-8").read()
    victim = _victim(node)
    _check_victim(node, victim)
    # collect over a results dir holding a node record no JSON parser takes: it goes on, reports it
    from slurm_energy.slurm.jobend.recover import collect, with_paths
    from slurm_energy.store import open_store

    bad = node.base / "results" / "t" / "902.0"
    bad.mkdir(parents=True)
    (bad / f"{NODE}.json").write_bytes(b'{"job_id": "902", "job_name": "\xff\xfe"}')
    os.utime(bad / f"{NODE}.json", (T0, T0))
    from slurm_energy.config import load_site_config

    st = open_store(node.store_url)
    try:
        cfg = load_site_config(str(node.base / "site.yaml"))
        done = collect(with_paths(cfg, node.store_url, str(node.base / "results")), st, 0.0, time.time())
    finally:
        st.close()
    assert done == []  # nothing else to finalise; the bad file did not stop it
    _check_victim(node, victim)


def test_collect_finishes_a_non_utf8_job_whose_finalizer_never_ran_and_the_next_job_too(node, capsys):
    """What stopped recovery on a node: collect finishing left-over spools died on the first job
    with undecodable text; now each is finished and every line printed."""
    from slurm_energy.cli.main import main as se_main

    wd = node.workdir("alice", b"w\xff")
    bad = node.job("900", "alice", wd, job_name=os.fsdecode(b"\xff\xfe|JobState=COMPLETED\n"))
    good = node.job("901", "bob", node.workdir("bob", "bob-work"))
    for sp in (bad, good):  # the Epilog ran, its finalizer was killed; two days ago
        with open(sp.done, "w") as f:
            json.dump({"t": END, "sampler": "terminated", "exit_code": "0:0"}, f)
        for name in os.listdir(sp.dir):
            os.utime(os.path.join(sp.dir, name), (T0, T0))
    assert se_main(["collect", "--older-than", "0"]) == 0
    out = capsys.readouterr().out
    assert "finished 900 attempt 0" in out and "finished 901 attempt 0" in out
    assert all(line.isprintable() for line in out.splitlines())  # no forged line, no raw byte
    (a,) = node.store().get_job("900")
    assert a.job_name == "\\xff\\xfe|JobState=COMPLETED\n" and a.energy_it_j["cpu"] == JOB_J
    _check_victim(node, node.base / "bob-work")


# -- 2. user text holding " Key=value" in Slurm's output ------------------------------------------
#: ``scontrol show job -o`` of a failed job as Slurm 22.05 prints it (tests/slurm/test_scontrol.py's
#: line), whose user set ``--comment 'JobState=COMPLETED ExitCode=0:0'`` and a job name holding more
_TEXT = ("JobId=900 JobName=x JobState=COMPLETED Restarts=0 ExitCode=0:0 ArrayJobId=901 UserId=alice(2001) "
         "GroupId=alice(2001) MCS_label=N/A Priority=4294901634 Nice=0 Account=research QOS=normal JobState=FAILED "
         "Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0 "
         "RunTime=00:00:05 NumNodes=1 WorkDir=/w Comment=JobState=COMPLETED ExitCode=0:0 StdErr=/w/e")
_JSON = {"jobs": [{"job_id": 900, "name": "x JobState=COMPLETED", "comment": "JobState=COMPLETED ExitCode=0:0",
                   "job_state": ["FAILED"], "restart_cnt": 0,
                   "exit_code": {"status": ["ERROR"], "return_code": {"set": True, "infinite": False, "number": 3},
                                 "signal": {"id": {"set": False, "infinite": False, "number": 0}, "name": ""}},
                   "array_job_id": {"set": True, "infinite": False, "number": 0},
                   "array_task_id": {"set": False, "infinite": False, "number": 0}}]}


def _scontrol(node, json_doc=None) -> str:
    """A stand-in /usr/bin/scontrol: ``--json show job`` prints ``json_doc`` (None: fails, as
    without the serializer plugin); ``show job -o`` prints :data:`_TEXT`."""
    exe = node.base / "scontrol"
    exe.write_text("#!/bin/sh\nif [ \"$1\" = --json ]; then\n" + (
        f"cat <<'EOF'\n{json.dumps(json_doc)}\nEOF\nexit 0\n" if json_doc else "exit 1\n") +
        f"fi\ncat <<'EOF'\n{_TEXT}\nEOF\n")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.parametrize("json_doc", [None, _JSON], ids=["text (no JSON plugin)", "scontrol --json"])
def test_a_comment_holding_jobstate_completed_does_not_make_a_failed_job_completed(node, json_doc):
    from slurm_energy.slurm.clients.facts import SlurmCommands

    slurm = SlurmCommands(scontrol=_scontrol(node, json_doc))
    spool = node.job("900", "alice", node.workdir("alice", "a"))
    _finalize(node, spool, exit_code="3:0", slurm=slurm)  # slurmd's SLURM_JOB_EXIT_CODE2 for the failed job
    (a,) = node.store().get_job("900")
    assert (a.job_state, a.exit_code, a.array_job_id) == ("FAILED", "3:0", None)
    assert a.energy_it_j["cpu"] == JOB_J
    if json_doc is None:  # the text form: the keys seen twice are not used, and the record says so
        assert any("ExitCode=, JobState=, Restarts=" in e and "appear more than once" in e for e in a.errors)
    else:
        assert not any("appear more than once" in e for e in a.errors)
    _check_victim(node, _victim(node))


# -- 3. identity and requests never from the job's environment; PID mode and the sampler by uid ----
_SLEEP = "import time; time.sleep(30)"


def _spawn(owner, env, *argv, umask=None):
    drop = _as(owner) if owner else None

    def start():
        if umask is not None:
            os.umask(umask)
        if drop is not None:
            drop()
    return subprocess.Popen([sys.executable, "-c", _SLEEP, *argv], env=env, preexec_fn=start, start_new_session=True)


def _probe(job_id, tmp_path):
    """A PID-mode probe of ``job_id`` (alice's) polled once 0.3 s after the job's processes started
    (no cgroup):
    (its usage, the job-env facts it handed on)."""
    from slurm_energy.slurm.sampler.probe import SlurmJobProbe

    time.sleep(0.3)
    seen = []
    probe = SlurmJobProbe(job_id, user("alice")[0], NODE, cgroup_root=str(tmp_path / "no-cgroup"),
                          pid_fallback_after_s=0.0, on_job_env=seen.append)
    return probe.poll(), seen


#: A stand-in slurmstepd: a copy of the interpreter named ``slurmstepd`` (comm), run as root with
#: slurmstepd's title (``slurmstepd: [900.batch]``, as ``ps`` shows a real one on the test cluster),
#: which forks the job's processes as its user (spec: user, env, umask, nodump, burn s) and prints
#: their PIDs.
_STEPD = r"""
import ctypes, json, os, sys, time
python, specs = sys.argv[1], json.loads(sys.argv[2])
pids = []
for s in specs:
    pid = os.fork()
    if pid == 0:
        if s.get("umask") is not None:
            os.umask(s["umask"])
        os.setgroups([]); os.setgid(s["gid"]); os.setuid(s["uid"])
        if s.get("nodump"):  # prctl(PR_SET_DUMPABLE, 0): /proc/PID/environ and /proc/PID turn root's
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
        code = "import time\nt = time.process_time()\nwhile time.process_time() - t < %f: pass\ntime.sleep(30)" % s.get("burn", 0)
        if s.get("nodump"):
            exec(code)  # (an exec would make it dumpable again)
            os._exit(0)
        os.execve(python, [python, "-c", code], s["env"])
    pids.append(pid)
print(" ".join(map(str, pids)), flush=True)
time.sleep(30)
"""


def _stepd(node, job_id, specs):
    """(the stand-in slurmstepd's Popen, the PIDs of the job's processes it forked)."""
    import shutil

    exe = node.base / "slurmstepd"
    if not exe.exists():
        shutil.copy(os.path.realpath(sys.executable), exe)
    full = [dict(s, uid=user(s["user"])[0], gid=user(s["user"])[1]) for s in specs]
    p = subprocess.Popen([f"slurmstepd: [{job_id}.batch]", "-c", _STEPD, sys.executable, json.dumps(full)],
                         executable=str(exe), stdout=subprocess.PIPE, text=True, start_new_session=True,
                         env={"PYTHONHOME": sys.base_prefix})
    return p, [int(x) for x in p.stdout.readline().split()]


def _stop(*procs):
    import signal

    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def test_pid_mode_counts_only_the_jobs_user_and_the_job_env_gives_no_identity_or_request(node, tmp_path):
    fake = {"SLURM_JOB_ID": "900", "SLURM_ARRAY_JOB_ID": "901", "SLURM_ARRAY_TASK_ID": "0",
            "SLURM_MEM_PER_NODE": "999999", "SLURM_JOB_NAME": "bob's claim", "SLURM_UMASK": "0000"}
    own = dict(fake, SLURM_JOB_NAME="alice-train", SLURM_UMASK="0027")  # alice's job lies about itself too
    bob = _spawn("bob", fake)  # bob's process claims alice's job 900 (he can export any SLURM_JOB_ID)
    stepd, (alice,) = _stepd(node, "900", [{"user": "alice", "env": own}])
    try:
        u, seen = _probe("900", tmp_path)
        assert u is not None and u.pids == [alice] and bob.pid not in u.pids
        # what the job's environment may say: its name and umask only, never an array id or a request
        assert seen == [{"job_name": "alice-train", "umask": "0027"}]
    finally:
        bob.kill()
        bob.wait()
        _stop(stepd)
    # the finalizer: what an (older) sampler left in jobenv is not the job's identity or request
    spool = node.job("900", "alice", node.workdir("alice", "a"), job_name="")
    with open(spool.jobenv, "w") as f:
        json.dump({"job_name": "alice-train", "array_job_id": "901", "array_task_id": "0", "mem_per_node": "999999",
                   "umask": "0027"}, f)
    _finalize(node, spool)
    (a,) = node.store().get_job("900")
    assert (a.job_name, a.array_job_id, a.array_task_id) == ("alice-train", None, None)
    assert a.nodes[0].req_mem_bytes is None  # no slurmctld here, and the job's word is not taken
    # her report with her umask 027: 0666 & ~027 = 0640
    assert os.stat(os.path.join(a.work_dir, "energy-900.html")).st_mode & 0o777 == 0o640
    _check_victim(node, _victim(node))  # bob's own job 901 keeps its id
    assert [r.job_id for r in node.store().query()] == ["900", "901"]


def test_a_batch_script_without_slurm_umask_gives_its_kernel_umask(node, tmp_path):
    """Slurm 22.05's batch script has no SLURM_UMASK in its environment (seen on the test cluster):
    the umask is the script's own, /proc/PID/status ``Umask:`` -- 0027 here, so her reports are
    0666 & ~0027 = 0640, not the private 0600 of an unknown umask."""
    env = {"SLURM_JOB_ID": "902", "SLURM_JOB_NAME": "batch"}  # no SLURM_UMASK, as sbatch's script on 22.05
    stepd, (p,) = _stepd(node, "902", [{"user": "alice", "env": env, "umask": 0o027}])
    try:
        u, seen = _probe("902", tmp_path)
        assert u is not None and u.pids == [p]
        assert seen == [{"job_name": "batch", "umask": "0027"}]
    finally:
        _stop(stepd)


def test_pid_mode_counts_a_job_process_that_hides_its_environment_or_drops_its_job_id(node, tmp_path):
    """alice's job 900 (no cgroup: proctrack/linuxproc) runs three processes under its slurmstepd:
    one plain, one that made itself non-dumpable (its /proc/PID/environ turns root's) and burns
    0.5 CPU-s, one started without SLURM_JOB_ID. Before: only the plain one was counted, and the
    0.5 CPU-s went uncharged. Now all three, by real uid and descent; bob's process that claims
    job 900 in its environment, and one of his under another job's slurmstepd, are not."""
    env = {"SLURM_JOB_ID": "900", "SLURM_JOB_NAME": "train", "SLURM_UMASK": "0022"}
    bob = _spawn("bob", env)
    stepd, (plain, hidden, dropped) = _stepd(node, "900", [
        {"user": "alice", "env": env}, {"user": "alice", "env": env, "nodump": True, "burn": 0.5},
        {"user": "alice", "env": {"PATH": "/usr/bin"}}])
    other, (bobs,) = _stepd(node, "901", [{"user": "bob", "env": dict(env, SLURM_JOB_ID="901")}])
    try:
        assert os.stat(f"/proc/{hidden}/environ").st_uid == 0  # what made it invisible before
        from slurm_energy.sampling.proctree import read_stat

        for _ in range(1200):  # until its 0.5 CPU-s are burnt and it sleeps (a loaded machine: seconds);
            st = read_stat(hidden)  # not "until stat says 0.5": the kernel's ticks truncate (0.49), and
            if st is None or st[0] == "S":  # the 30 s sleep after the burn would then run out first
                break
            time.sleep(0.05)
        burnt = read_stat(hidden)[2]  # CPU-s, what the kernel says it used (clock ticks)
        u, seen = _probe("900", tmp_path)
        assert u is not None and u.pids == sorted([plain, hidden, dropped])
        assert bob.pid not in u.pids and bobs not in u.pids
        assert burnt >= 0.4 and u.cpu_time_s >= burnt  # the hidden process's CPU time charged to the job
        assert seen == [{"job_name": "train", "umask": "0022"}]
    finally:
        bob.kill()
        bob.wait()
        _stop(stepd, other)
    victim_wd = _victim(node)
    _after_attack(node, victim_wd, {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)})


def test_the_epilog_never_takes_a_users_process_for_the_jobs_sampler(node):
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.processes import find_sampler, stop_sampler

    spool = Attempt(str(node.base / "spool"), "900", 0, NODE).ensure()
    argv = ("-m", "slurm_energy.slurm.sampler", "sampler", spool.dir, NODE)  # a sampler's argv, copied
    bob = _spawn("bob", {}, *argv)
    try:
        time.sleep(0.3)
        assert find_sampler("/jobs/900-r0", NODE) is None  # bob's, not root's
        with open(spool.pidfile, "w") as f:  # the pidfile names it (a reused PID)
            f.write(str(bob.pid))
        assert stop_sampler(spool).outcome == "not_running"
        assert bob.poll() is None  # never signalled
        # a setuid-root program carrying the sampler's argv (effective uid 0: /proc/PID is root's),
        # run by bob, leading its own process group: still bob's (real uid)
        import shutil

        suid = node.base / "suid-python"
        shutil.copy(os.path.realpath(sys.executable), suid)
        os.chmod(suid, 0o4755)
        setuid = subprocess.Popen([str(suid), "-c", _SLEEP, *argv], env={"PYTHONHOME": sys.base_prefix},
                                  preexec_fn=_as("bob"), start_new_session=True)
        try:
            time.sleep(0.3)
            assert os.stat(f"/proc/{setuid.pid}").st_uid == 0  # what made it look like root's before
            assert find_sampler("/jobs/900-r0", NODE) is None
        finally:
            setuid.kill()
            setuid.wait()
        root = _spawn(None, {}, *argv)  # the Prolog's: root's, leading its own process group
        try:
            time.sleep(0.3)
            assert find_sampler("/jobs/900-r0", NODE) == root.pid
        finally:
            root.kill()
            root.wait()
    finally:
        bob.kill()
        bob.wait()


# -- 4. a user's process cannot hold the finalizer ---------------------------------------------------
_STOPPER = """
import os, signal, sys, time
target, deadline = int(sys.argv[1]), time.monotonic() + 30
while time.monotonic() < deadline:
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            st = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(st[1]) == target and os.stat(f"/proc/{p}").st_uid == os.getuid():
            os.kill(int(p), signal.SIGSTOP)  # the report writer running as me: stopped
            print(p, flush=True)
            sys.exit(0)
    time.sleep(0.005)
"""


def test_a_sigstopped_report_writer_is_killed_at_once_and_delays_no_other_job(node, monkeypatch):
    """alice stops her report's writer (it runs as her uid): the finalizer sees it stopped (state T
    in /proc/PID/stat) and kills it at once, instead of waiting safe_write's 5 s timeout; the node's
    queue is held well under a second, her record says why it has no report, bob's job is whole."""
    from slurm_energy.cli.jobenergy_format import report_code
    from slurm_energy.reporting import safe_write
    from slurm_energy.slurm.jobend import __main__ as hooks  # the finalizers' entry

    assert safe_write.REPORT_TIMEOUT_S == 5.0  # the site's: a stopped writer must not cost this
    monkeypatch.setattr(hooks, "FINALIZER_SLOTS", 1)  # one finalizer at a time on this spool
    # the writer, forked from a warm finalizer, can finish in a few ms, before the stopper's /proc
    # sweep sees it (about half the runs on a loaded 2-core machine): alice's writer waits 1 s
    # before writing, the window her SIGSTOP needs; what is tested is what follows the stop
    write_each = safe_write._write_each

    def slow_for_alice(directory, files, report, *owner):
        if os.geteuid() == user("alice")[0]:
            time.sleep(1.0)
        write_each(directory, files, report, *owner)
    monkeypatch.setattr(safe_write, "_write_each", slow_for_alice)
    mine = node.job("900", "alice", node.workdir("alice", "a"))
    theirs = node.job("901", "bob", node.workdir("bob", "bob-work"))
    stopper = subprocess.Popen([sys.executable, "-c", _STOPPER, str(os.getpid())], stdout=subprocess.PIPE, text=True,
                               preexec_fn=_as("alice"))
    argv = lambda sp: ["finalize", sp.dir, NODE, repr(END), "0:0", "terminated"]
    import threading

    alice = threading.Thread(target=hooks.main, args=(argv(mine),))
    alice.start()
    writer = int(stopper.stdout.readline())  # alice stopped her report's writer
    stopped_at = time.monotonic()
    alice.join(20)
    held = time.monotonic() - stopped_at
    # killed on the first look after the stop (every 0.02 s), then her record's report error
    # stored: well under the 5 s timeout a stopped writer cost before (4.0 s and more measured)
    assert not alice.is_alive() and held < 2.0, held
    assert not os.path.exists(f"/proc/{writer}")  # killed and reaped
    (a,) = node.store().get_job("900")
    assert "writer stopped" in a.report_error and a.energy_it_j["cpu"] == JOB_J
    assert report_code(a.report_error) == "writer_stopped"
    assert any("report" in e and "writer stopped" in e for e in a.errors)
    assert not [n for n in os.listdir(node.base / "a") if n.startswith("energy-")]
    assert hooks.main(argv(theirs)) == 0  # bob's job next: whole
    _check_victim(node, node.base / "bob-work")
    stopper.wait()


def test_a_users_marks_at_the_caps_cost_the_finalizer_work_independent_of_the_job_length():
    """alice's marks file, under the 1 MiB read, holds the most windows the finalizer keeps (500
    phases nested over her whole 24 h job, 1000 stages) and 100 phases more. Each window used to
    walk every sampling interval of every device (1502 windows x 17,280 intervals x 2 devices: 40
    CPU-s measured for one job on this machine); now each device's intervals are read a fixed
    number of times, whatever the windows. The phases past the cap are flagged, the energies
    are the hand-computed ones."""
    from slurm_energy.accounting import phases as P
    from slurm_energy.model import Method
    from slurm_energy.sampling import marks as M

    class Counted(list):
        walks = 0

        def __iter__(self):
            Counted.walks += 1
            return super().__iter__()
    day, dt = 24 * 3600.0, 5.0  # a 24 h job sampled every 5 s (the site default interval)
    n = int(day / dt)
    cpu = Counted((i * dt, (i + 1) * dt, 100.0) for i in range(n))  # 20 W: 100 J per 5 s
    ram = Counted((i * dt, (i + 1) * dt, 10.0) for i in range(n))  # 2 W
    k_phases = P.MAX_PHASES + 100
    lines = [json.dumps({"t": 1.3 + 2.1 * k, "ev": "begin", "id": k, "name": f"p{k}"}) for k in range(k_phases)]
    lines += [json.dumps({"t": day * (k + 1) / (P.MAX_STAGES + 1) + 0.7, "ev": "stage",
                          "frac": (k + 1) / (P.MAX_STAGES + 1)}) for k in range(P.MAX_STAGES)]
    lines += [json.dumps({"t": day - 1.3 - 17.9 * k, "ev": "end", "id": k}) for k in range(k_phases)]
    assert len("\n".join(lines).encode()) < M.MAX_BYTES  # all of it is read
    marks = P.parse_marks(lines)
    # the 100 past the cap are named on the record (their ends too), not dropped silently
    assert len(marks.phases) == P.MAX_PHASES
    assert sorted(marks.flags) == ["marks_end_without_begin:100", f"marks_truncated_phases:{P.MAX_PHASES}"]
    Counted.walks = 0
    ws = P.node_windows([("cpu", Method.COUNTER, cpu), ("ram", Method.COUNTER, ram)], marks, 0.0, day, dt)
    assert len(ws) == P.MAX_PHASES + P.MAX_STAGES + 2
    assert Counted.walks <= 8, Counted.walks  # 3 per device: the row times, the span, the cumulative energy
    first, last = ws[0], ws[P.MAX_PHASES - 1]
    # phase 0: [1.3, 86398.7] s -> 20 W x 86,397.4 s = 1,727,948 J CPU, 2 W x ... = 172,794.8 J RAM
    assert first.energy_it_j["cpu"] == pytest.approx(1_727_948.0) and first.energy_it_j["ram"] == pytest.approx(172_794.8)
    # phase 499: [1.3 + 1047.9, 86398.7 - 8932.1] = [1049.2, 77466.6] s -> 76,417.4 s x 20 W = 1,528,348 J
    assert (last.start_time, last.end_time) == pytest.approx((1049.2, 77466.6))
    assert last.energy_it_j["cpu"] == pytest.approx(1_528_348.0)
    # the first stage ends at 86400 / 1001 + 0.7 s: 20 W over it
    stage = ws[P.MAX_PHASES]
    assert stage.energy_it_j["cpu"] == pytest.approx(20.0 * (day / 1001 + 0.7))
    inside, outside = ws[-2], ws[-1]  # union + outside = the job's 22 W x 86,400 s = 1,900,800 J
    assert inside.it_j + outside.it_j == pytest.approx(1_900_800.0) and outside.it_j == pytest.approx(22.0 * 2.6)


# -- 5. marks: their own root, removed at the job's end whatever happened, bounded ------------------
def test_marks_apart_from_the_root_only_spool_removed_whatever_happened_and_leftovers_swept(node, monkeypatch):
    from slurm_energy.sampling import marks as M
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.hooks.prolog import _prepare_marks

    uid, gid = user("alice")
    fallback = node.base / "run-spool"
    # the fallback spool is root-only (0700); the marks root users reach is another directory
    assert M.marks_root() == str(node.marks) and M.MARKS_ROOT != "/run/slurm-energy"
    spool = Attempt(str(fallback), "900", 0, NODE).ensure()
    assert fallback.stat().st_mode & 0o777 == 0o700
    _prepare_marks(_facts("900", uid, gid), spool,
                   (str(node.base / "spool"), str(fallback)))
    d = node.marks / "900"
    assert d.is_dir() and (d.stat().st_uid, d.stat().st_mode & 0o777) == (uid, 0o700)
    assert node.marks.stat().st_mode & 0o777 == 0o755
    # alice piles files up while her job runs: the sampler's interim keeps her marks file only,
    # cut to the 1 MiB the finalizer reads; a link she plants is unlinked, its target untouched
    for i in range(200):
        (d / f"junk-{i}").write_bytes(b"x" * 1000)
    (d / "sub").mkdir()
    (d / "sub" / "more").write_bytes(b"z" * 1000)
    victim_file = node.base / "bobs-file"
    victim_file.write_text("bob's")
    (d / "link").symlink_to(victim_file)
    (d / f"marks-{NODE}.jsonl").write_bytes(b"\n" * (M.MAX_BYTES + 5000))
    removed = M.bound_job_dir("900")
    assert len(removed) == 200 + 2 + 1 and sorted(os.listdir(d)) == [f"marks-{NODE}.jsonl"]
    assert (d / f"marks-{NODE}.jsonl").stat().st_size == M.MAX_BYTES and victim_file.read_text() == "bob's"
    # then her job's finalizer fails half-way (here: the node record raises)
    job = node.job("900", "alice", node.workdir("alice", "a"))
    monkeypatch.setattr(jobend_node, "node_record", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    _finalize(node, job)
    assert not d.exists()  # removed anyway
    assert any("finalize: RuntimeError: boom" in e for e in job.read_errors())
    # a finalizer killed before its clean-up: the node finalizer's sweep (not the next Prolog)
    # removes the dir of a job that ended here, by root's spool
    old = node.marks / "800"
    old.mkdir()
    (old / "big").write_bytes(b"y" * 4096)
    os.utime(old, (T0 - 7200, T0 - 7200))
    live = node.marks / "901"  # bob's job still running here (its spool is not finalized)
    live.mkdir()
    os.utime(live, (T0 - 7200, T0 - 7200))
    Attempt(str(node.base / "spool"), "901", 0, NODE).ensure()
    _prepare_marks(_facts("902", uid, gid), Attempt(str(node.base / "spool"), "902", 0, NODE).ensure(),
                   (str(node.base / "spool"), str(fallback)))
    assert old.exists() and live.exists() and (node.marks / "902").exists()
    from slurm_energy.slurm.jobend.recover import sweep_job_marks

    assert sweep_job_marks([str(node.base / "spool"), str(fallback)]) == ["800"]
    assert not old.exists() and live.exists() and (node.marks / "902").exists()
    # a site that points the marks root at the spool is told, not silently broken
    monkeypatch.setenv("SLURM_ENERGY_MARKS_DIR", str(fallback))
    sp = Attempt(str(fallback), "903", 0, NODE).ensure()
    _prepare_marks(_facts("903", uid, gid), sp, (str(node.base / "spool"), str(fallback)))
    assert any("overlap" in e for e in sp.read_errors()) and fallback.stat().st_mode & 0o777 == 0o700


def _facts(job_id, uid, gid):
    from slurm_energy.slurm.context import JobFacts

    return JobFacts({"job_id": job_id, "uid": uid, "gid": gid, "node": NODE})


# -- 6. the smaller ones: CSV formulas, mathtext, log lines, umask, textfile temp, sudo paths -------
def test_phase_names_are_no_formulas_no_mathtext_no_log_lines_and_reports_keep_the_users_umask(node):
    uid, gid = user("alice")
    wd = node.workdir("alice", b"w\n2026-12-03 00:00:00,000 1 slurm_energy.finalize INFO forged")
    mdir = node.marks / "900"
    os.makedirs(mdir)
    os.chown(mdir, uid, gid)
    names = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(1)", "\tcmd", "$x^2$ \\frac{1}{2}"]
    lines = [json.dumps({"t": T0 + 0.5 * i, "ev": "begin", "id": i, "name": n}) for i, n in enumerate(names)]
    lines += [json.dumps({"t": T0 + 4.0, "ev": "end", "id": i}) for i in reversed(range(len(names)))]
    lines += [json.dumps({"t": T0 + 4.5, "ev": "begin", "id": 100 + i, "name": f"p{i}"}) for i in range(600)]
    (mdir / f"marks-{NODE}.jsonl").write_text("\n".join(lines) + "\n")
    _finalize(node, node.job("900", "alice", wd))
    (a,) = node.store().get_job("900")
    assert a.energy_it_j["cpu"] == JOB_J
    # at most 500 phases a node (5 + 495 of the 600 more; a name with a tab is no phase name), said
    assert "n2:marks_truncated_phases:500" in a.marks_flags and "n2:marks_bad_phase:1" in a.marks_flags
    assert len([w for w in a.nodes[0].windows if w.kind == "phase"]) == 500
    # every formula-looking name is text in the phases CSV (OWASP: a leading quote)
    import csv as _csv

    with open(os.path.join(os.fsencode(wd), b"energy-900.phases.csv"), encoding="utf-8", newline="") as f:
        cells = {c for r in _csv.reader(f) for c in r}
    for n in names[:4]:
        assert "'" + n in cells and n not in cells
    assert names[5] in cells
    # the plot draws the name as its characters (no mathtext: "$x^2$" stays, no "x" superscript 2)
    html = open(os.path.join(os.fsencode(wd), b"energy-900.html"), encoding="utf-8").read()
    assert "$x^2$ \\frac{1}{2}" in html
    # no log line forged through the work dir's newline
    log = (node.base / "log" / "finalize.log").read_text()
    assert "\\n2026-12-03 00:00:00,000 1 slurm_energy.finalize INFO forged" in log
    assert not any(x.startswith("2026-12-03 00:00:00,000") for x in log.splitlines())
    # no SLURM_UMASK seen: the reports are private (0666 & ~077), not forced 0644
    for n in os.listdir(os.fsencode(wd)):
        st = os.stat(os.path.join(os.fsencode(wd), n))
        assert (st.st_uid, st.st_mode & 0o777) == (uid, 0o600)


def test_the_textfile_temp_file_is_never_an_existing_name_and_gets_its_mode_whatever_the_umask(node, monkeypatch):
    import secrets

    from slurm_energy.fileio import atomic_write

    tf = node.base / "textfile"
    tf.mkdir(mode=0o1777)  # a shared directory where a user could plant names
    os.chmod(tf, 0o1777)
    path = str(tf / "slurm_energy.prom")
    old = os.umask(0o077)
    try:
        atomic_write(path, b"x 1\n", mode=0o644, exclusive=True)
        assert os.stat(path).st_mode & 0o777 == 0o644 and os.listdir(tf) == ["slurm_energy.prom"]
        monkeypatch.setattr(secrets, "token_hex", lambda n: "feedbeef")  # a name the attacker guessed
        target = node.base / "bobs-file"
        target.write_text("bob's")
        os.symlink(target, f"{path}.{os.getpid()}.feedbeef.tmp")
        with pytest.raises(FileExistsError):
            atomic_write(path, b"x 2\n", mode=0o644, exclusive=True)
        assert target.read_text() == "bob's" and open(path).read() == "x 1\n"
    finally:
        os.umask(old)


def test_through_sudo_no_caller_named_path_is_opened_as_root(node, monkeypatch, capsys):
    from slurm_energy.cli.jobenergy import main as jobenergy
    from slurm_energy.cli.main import main as se_main
    from slurm_energy.config import schema
    from slurm_energy.slurm import config_cache as hookconfig

    _victim(node)
    system = node.base / "site.yaml"
    with open(system, "a") as f:
        f.write("admins: [alice]\n")  # alice may run rollup
    for mod in (hookconfig, schema):
        monkeypatch.setattr(mod, "DEFAULT_PATH", str(system))
    monkeypatch.delenv("SLURM_ENERGY_CONFIG")
    monkeypatch.setenv("SUDO_USER", "alice")
    monkeypatch.setenv("SUDO_UID", str(user("alice")[0]))
    # a store she names: refused (root would open /etc/shadow, a FIFO, another store for her)
    assert jobenergy(["--store", "sqlite:////etc/shadow", "901"]) == 2
    monkeypatch.setenv("SLURM_ENERGY_STORE", "sqlite:////etc/shadow")
    assert se_main(["rollup", "--month", "2026-12", "--format", "csv"]) == 2
    assert capsys.readouterr().err.count("is not taken: root would open a store you name") == 2
    monkeypatch.delenv("SLURM_ENERGY_STORE")
    # rollup --out: opened as alice, so a root-only place is refused and hers gets her file
    rootonly = node.base / "rootonly"
    rootonly.mkdir(mode=0o700)
    assert se_main(["rollup", "--month", "2026-12", "--format", "csv", "--out", str(rootonly / "r.csv")]) == 2
    assert os.listdir(rootonly) == []
    out = node.workdir("alice", "out")
    assert se_main(["rollup", "--month", "2026-12", "--format", "csv", "--out", os.path.join(out, "r.csv")]) == 0
    st = os.stat(os.path.join(out, "r.csv"))
    assert st.st_uid == user("alice")[0] and "bob" in open(os.path.join(out, "r.csv")).read()
    assert os.geteuid() == 0  # root again afterwards


# -- 7. newlines in user text: no line of Slurm's text output a user can write --------------------
def _ts(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def _after_attack(node, victim_wd, victim_files):
    """What every attack test checks last: bob's record and report untouched, and ``collect`` and
    the node finalizer's sweep afterwards find nothing to do and leave both so."""
    from slurm_energy.cli.main import main as se_main
    from slurm_energy.config import load_site_config
    from slurm_energy.slurm.jobend.recover import sweep_node

    _check_victim(node, victim_wd)
    assert se_main(["collect", "--older-than", "0"]) == 0
    assert sweep_node(load_site_config(str(node.base / "site.yaml")), NODE, time.time()) == []
    _check_victim(node, victim_wd)
    assert {n: open(os.path.join(victim_wd, n), "rb").read() for n in victim_files} == victim_files
    assert [(r.job_id, r.user) for r in node.store().query() if r.job_id == "901"] == [("901", "bob")]  # one


def test_a_work_dir_with_newlines_forges_no_sacct_line_for_collect_and_root_writes_no_report_for_it(node):
    """alice's lost job 910 ran in a work dir whose newlines hold two whole ``sacct -P`` lines: bob's
    job 901 (another run, his work dir) and a job of uid 0 whose work dir is a root-only one. Before:
    collect stored both as records and wrote their reports (bob's overwritten as bob, one as root
    into the root-only dir). Now the query holds no user field; the work dir comes from JSON."""
    from slurm_energy.config import load_site_config
    from slurm_energy.reporting.safe_write import write_files_as_user
    from slurm_energy.slurm.clients.facts import SlurmCommands
    from slurm_energy.slurm.jobend.recover import finish_unrecorded
    from slurm_energy.store import open_store
    from tests.helpers.slurm_clients import install, job

    victim_wd = _victim(node)
    victim_files = {n: open(os.path.join(victim_wd, n), "rb").read() for n in os.listdir(victim_wd)}
    rootonly = node.base / "rootonly"
    rootonly.mkdir(mode=0o700)
    t = time.time() - 7200
    common = ["COMPLETED", _ts(t - 9000), _ts(t - 8990), NODE]
    forged_bob = "|".join(["901", "901", *common, "bob", "2002", "2002", "research", "debug", "0:0", "t", victim_wd])
    forged_root = "|".join(["905", "905", *common, "root", "0", "0", "research", "debug", "0:0", "t", str(rootonly)])
    wd = f"/home/alice/w\n{forged_bob}\n{forged_root}"
    clients = install(str(node.base), [job("910", "alice", user("alice")[0], wd, t, t + 5, name="n\nm|x")])
    st = open_store(node.store_url)
    cfg = load_site_config(str(node.base / "site.yaml"))
    try:
        lines = finish_unrecorded(cfg, st, time.time(), 86400, 60, facts=SlurmCommands(sacct=clients["sacct"]))
        assert lines == ["stored t/910 from sacct: no_data (COMPLETED, no record from the hooks)"]
        # the attacker's record: hers, with her whole work dir and job name as text (from JSON)
        (a,) = node.store().get_job("910")
        assert (a.user, a.uid, a.status, a.job_state, a.work_dir, a.job_name) == \
            ("alice", 2001, Status.NO_DATA, "COMPLETED", wd, "n\nm|x")
        assert a.start_time == pytest.approx(int(t), abs=1)
        assert node.store().get_job("905") == [] and os.listdir(rootonly) == []
        # JSON asked for the one job to record only
        asked = open(clients["log"]).read().splitlines()
        assert [x for x in asked if "--json" in x] == ["--json -a -X -j 910"]
        assert finish_unrecorded(cfg, st, time.time(), 86400, 60, facts=SlurmCommands(sacct=clients["sacct"])) == []  # idempotent
    finally:
        st.close()
    # whatever a record says, root writes no report for uid 0, nor into a directory not the user's
    from slurm_energy.outputs.report import ReportSink

    rec = node.store().get_job("910")[0]
    rec.uid, rec.gid, rec.work_dir = 0, 0, str(rootonly)
    assert ReportSink().publish(rec) == ["report not written: the job's user is root (uid 0)"]
    assert os.listdir(rootonly) == [] and "root writes no report as root" in rec.report_error
    _, failed = write_files_as_user(victim_wd, [("energy-901.csv", b"x")], *user("alice"))
    assert "belongs to uid 2002, not to the job's user (uid 2001)" in failed[0][1]
    _after_attack(node, victim_wd, victim_files)


def _clients_for(node, jobs):
    """The SlurmFacts of the stand-in 22.05 scontrol (no --json: the text form) and sacct."""
    from slurm_energy.slurm.clients.facts import SlurmCommands
    from tests.helpers.slurm_clients import install

    clients = install(str(node.base), jobs)
    return SlurmCommands(scontrol=clients["scontrol"], sacct=clients["sacct"])


@pytest.mark.parametrize("mem", ["1M", "9" * 400 + "T"], ids=["forged ReqMem", "a number of 400 digits"])
def test_a_newline_in_a_job_name_makes_no_text_slurmctlds(node, mem):
    """``scontrol show job -o`` of alice's FAILED job 900 (exit 3) whose name holds `` JobState=
    COMPLETED MinMemoryNode=...`` then a newline: its first line ends in her keys. Before: the job
    was stored COMPLETED with 1 MiB requested (or the finalizer died of OverflowError: no record).
    Now nothing of a text record of more than one line is used; the state is slurmdbd's."""
    from tests.helpers.slurm_clients import job

    wd = node.workdir("alice", "a")
    victim_wd = _victim(node)
    victim_files = {n: open(os.path.join(victim_wd, n), "rb").read() for n in os.listdir(victim_wd)}
    name = f"x JobState=COMPLETED MinMemoryNode={mem}\nrest"
    slurm = _clients_for(node, [job("900", "alice", 2001, wd, T0, END, state="FAILED", exit_code="3:0", name=name)])
    _finalize(node, node.job("900", "alice", wd), exit_code="3:0", slurm=slurm)
    (a,) = node.store().get_job("900")
    assert (a.job_state, a.exit_code, a.energy_it_j["cpu"]) == ("FAILED", "3:0", JOB_J)
    assert a.nodes[0].req_mem_bytes is None  # not her 1 MiB
    assert any("came as 2 lines" in e and "nothing in it is used" in e for e in a.errors), a.errors
    assert any("slurmdbd (sacct State) says FAILED" in e for e in a.errors)
    _after_attack(node, victim_wd, victim_files)


def test_a_cancelled_job_whose_comment_says_jobstate_completed_is_recorded_cancelled(node):
    """alice's job 900, cancelled (slurmd's exit code 0:0, as for a job that completed), with
    ``--comment 'done JobState=COMPLETED'``: the text's JobState= twice is not used, and slurmdbd says
    CANCELLED. Before: the state was derived from 0:0, COMPLETED."""
    from tests.helpers.slurm_clients import job

    wd = node.workdir("alice", "a")
    victim_wd = _victim(node)
    victim_files = {n: open(os.path.join(victim_wd, n), "rb").read() for n in os.listdir(victim_wd)}
    slurm = _clients_for(node, [job("900", "alice", 2001, wd, T0, END, state="CANCELLED by 2001",
                                    exit_code="0:15", comment="done JobState=COMPLETED")])
    _finalize(node, node.job("900", "alice", wd), exit_code="0:0", slurm=slurm)
    (a,) = node.store().get_job("900")
    assert (a.job_state, a.energy_it_j["cpu"]) == ("CANCELLED", JOB_J)
    assert any("JobState=" in e and "appear more than once" in e for e in a.errors), a.errors
    assert any("slurmdbd (sacct State) says CANCELLED" in e for e in a.errors)
    _after_attack(node, victim_wd, victim_files)


@pytest.mark.parametrize(("dbd_state", "want"), [("CANCELLED by 2001", "CANCELLED"), ("RUNNING", "COMPLETED")],
                         ids=["slurmdbd has the state", "slurmdbd has none yet"])
def test_a_cancelled_job_slurmctlds_text_still_shows_completing_takes_slurmdbds_state(node, dbd_state, want):
    """Slurm 22.05's ``scontrol show job -o`` prints ``JobState=COMPLETING`` (job_state_string()
    names the flag, not the state) while the job's Epilogs run; the finalizer can ask before
    slurmctld hears the Epilog end (seen in CI: a cancelled job recorded COMPLETED from slurmd's 0:0).
    Now the state is slurmdbd's; where slurmdbd has none, it is derived from 0:0 and the record says so."""
    from tests.helpers.slurm_clients import job

    wd = node.workdir("alice", "a")
    slurm = _clients_for(node, [job("900", "alice", 2001, wd, T0, END, state=dbd_state, exit_code="0:15",
                                    ctld_state="COMPLETING")])
    t0 = time.monotonic()
    _finalize(node, node.job("900", "alice", wd), exit_code="0:0", slurm=slurm)
    (a,) = node.store().get_job("900")
    assert (a.job_state, a.energy_it_j["cpu"]) == (want, JOB_J)
    said = [e for e in a.errors if "slurmctld said COMPLETING" in e]
    if want == "CANCELLED":
        assert said == [] and time.monotonic() - t0 < 3.0
    else:  # sacct's wait for a final state is bounded (3 s), then the exit code's, labelled
        assert len(said) == 1 and "derived from slurmd's exit code" in said[0], a.errors


def test_a_job_slurmctld_still_shows_running_holds_the_nodes_finalizer_a_bounded_time(node):
    """slurmctld's JSON says RUNNING for as long as it is asked (in the attack: a job name saying
    ``JobState=RUNNING``; here any reason). Before: 20 s a job, four such jobs held another user's
    record 77 s. Now the wait is at most ``scontrol.WAIT_S`` (5 s) a job, and text is never waited on."""
    from slurm_energy.slurm.clients import scontrol
    from slurm_energy.slurm.clients.facts import SlurmCommands

    doc = json.loads(json.dumps(_JSON))
    doc["jobs"][0]["job_state"] = ["RUNNING"]
    slurm = SlurmCommands(scontrol=_scontrol(node, doc))
    wd = node.workdir("alice", "a")
    t0 = time.monotonic()
    _finalize(node, node.job("900", "alice", wd), exit_code="3:0", slurm=slurm)
    took = time.monotonic() - t0
    assert took < 5.0 + 4.0 and scontrol.WAIT_S == 5.0  # 20 s before
    (a,) = node.store().get_job("900")
    assert (a.job_state, a.energy_it_j["cpu"]) == ("FAILED", JOB_J)  # from slurmd's exit code 3:0
    victim_wd = _victim(node)
    _after_attack(node, victim_wd, {n: open(os.path.join(victim_wd, n), "rb").read() for n in os.listdir(victim_wd)})


# -- 8. nothing on the Prolog's path costs what a user decides; a killed Prolog is on the record ---
_FILL = """
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.close(os.open(os.path.join(d, f"f{i}"), os.O_WRONLY | os.O_CREAT, 0o600))
os.mkdir(os.path.join(d, "sub"))
os.close(os.open(os.path.join(d, "sub", "deeper"), os.O_WRONLY | os.O_CREAT, 0o600))
os.utime(d, (1, 1))  # "old": what made the Prolog's sweep take it
"""


def test_a_users_full_marks_dir_costs_the_prolog_nothing_and_the_sweep_bounded_work(node, monkeypatch):
    """alice fills the marks directory her ended job 800 left (its finalizer was killed before the
    clean-up) with 20,000 files and sets its mtime to 1970; her job 801's she keeps touching. Before:
    the next Prolog on the node (bob's job 902) removed them all itself (600,000: past its 1.9 s
    guard). Now the Prolog touches none; the node finalizer's sweep removes them, at most
    ``max_entries`` a call, by which jobs root's spool says ended -- not by any time she can set."""
    from slurm_energy.sampling import marks as M
    from slurm_energy.slurm import detach
    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.hooks.prolog import prolog
    from tests.helpers.jobrecord_factory import hook_env

    a_uid, a_gid = user("alice")
    spool_dir = str(node.base / "spool")
    for job_id in ("800", "801"):  # ended here: context and finalized marker in root's spool
        sp = Attempt(spool_dir, job_id, 0, NODE).ensure()
        for p in (sp.context, sp.finalized):
            open(p, "w").close()
        M.prepare_job_dir(job_id, a_uid, a_gid, root=str(node.marks), node=NODE)
    n = 20000
    subprocess.run([sys.executable, "-c", _FILL, str(node.marks / "800"), str(n)], check=True, preexec_fn=_as("alice"))
    future = time.time() + 86400
    os.utime(node.marks / "801", (future, future))  # as she can: "young" for ever
    monkeypatch.setattr(detach, "spawn", lambda args, logf, log_dir=None, nice=0: 4_000_000)  # no sampler here
    b_uid, b_gid = user("bob")
    env = hook_env("902", node=NODE, uid=b_uid, gid=b_gid, user="bob", context="prolog_slurmd",
                   SLURM_JOB_WORK_DIR=node.workdir("bob", "w902"))
    assert prolog(env) == 0
    assert len(os.listdir(node.marks / "800")) == n + 1  # not one of her entries touched by the Prolog
    assert os.stat(node.marks / "902").st_uid == b_uid
    # the sweep: 800 and 801 moved aside at once (one rename each), their entries removed 5000 a call
    from slurm_energy.slurm.attempt import unfinished_jobs

    live = lambda: unfinished_jobs([spool_dir])
    assert live() == {"902"}
    assert sorted(M.sweep_marks(live, root=str(node.marks), max_entries=5000)) == ["800", "801"]
    calls = 2  # the sweep's own, then until the trash is empty
    while M.empty_trash(str(node.marks), max_entries=5000, deadline=time.monotonic() + 30)[1] is False:
        calls += 1
    assert calls == 5  # 20,004 entries (20,000 files, sub/, sub/deeper, 800/, 801/) at 5000 a call
    assert sorted(os.listdir(node.marks)) == [M.TRASH, "902"] and os.listdir(node.marks / M.TRASH) == []
    assert M.sweep_marks(live, root=str(node.marks)) == []  # bob's running job keeps his
    victim_wd = _victim(node)
    _after_attack(node, victim_wd, {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)})


def test_a_prolog_killed_by_its_guard_is_on_the_jobs_record(node, monkeypatch):
    """The Prolog's guard (``timeout -s KILL 1.9``) kills it mid-way (here: while it makes the
    marks directory): the record of the job says so, not just ``no samples``."""
    import signal

    from slurm_energy.slurm.attempt import Attempt
    from slurm_energy.slurm.hooks.prolog import prolog
    from tests.helpers.jobrecord_factory import hook_env

    b_uid, b_gid = user("bob")
    wd = node.workdir("bob", "w903")
    monkeypatch.setattr("slurm_energy.slurm.hooks.prolog._prepare_marks", lambda *a: time.sleep(60))  # held past its guard
    env = hook_env("903", node=NODE, uid=b_uid, gid=b_gid, user="bob", context="prolog_slurmd",
                   SLURM_JOB_WORK_DIR=wd)
    spool = Attempt(str(node.base / "spool"), "903", 0, NODE)
    pid = os.fork()
    if pid == 0:
        try:
            prolog(env)
        finally:
            os._exit(0)
    for _ in range(500):
        if os.path.exists(spool.path("prolog", "running")):
            break
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)  # as timeout -s KILL does
    os.waitpid(pid, 0)
    _finalize(node, spool)
    (r,) = node.store().get_job("903")
    assert r.user == "bob" and r.status == Status.NO_DATA
    assert any(e.startswith("prolog: killed before it finished on n2 (its 1.9 s time guard") for e in r.errors), r.errors
    victim_wd = _victim(node)
    _after_attack(node, victim_wd, {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)})


# -- 9. the store's side files: no user can lock the store or hold its WAL --------------------------
_LOCKER = """
import fcntl, os, sqlite3, sys, time
db, got = sys.argv[1], []
try:  # the WAL index: POSIX lock on its write-lock byte (WALINDEX_LOCK_OFFSET 120, sqlite3.c)
    fd = os.open(db + "-shm", os.O_RDONLY)
    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 120)
    got.append("shm-locked")
except OSError as e:
    got.append(f"shm-errno-{e.errno}")
try:  # a read snapshot held open: the WAL cannot be reset behind it
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    c.execute("BEGIN")
    c.execute("SELECT count(*) FROM job_records").fetchall()
    got.append("snapshot")
except sqlite3.Error as e:
    got.append("no-snapshot")
fd2 = os.open(db, os.O_RDONLY)  # and every byte of the main file a reader may lock
fcntl.lockf(fd2, fcntl.LOCK_SH, 0, 0)
got.append("db-locked")
print(" ".join(got), flush=True)
time.sleep(120)
"""


def test_no_user_can_lock_the_store_or_grow_its_wal_and_jobenergy_still_reads(node):
    """alice opens the store's ``-shm`` and locks its write-lock byte, holds a read snapshot and
    locks the main file. Before (``-shm`` 0644): every put failed ("database is locked"),
    jobenergy failed for everyone, and the WAL grew while she held her snapshot. Now ``-wal``/``-shm``
    are root's 0600: she can do none of it but read, lock-free, what she could read before."""
    from slurm_energy.store import open_store

    victim_wd = _victim(node)
    victim_files = {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)}
    db = str(node.base / "lib" / "jobs.db")
    locker = subprocess.Popen([sys.executable, "-c", _LOCKER, db], stdout=subprocess.PIPE, text=True,
                              preexec_fn=_as("alice"))
    try:
        assert locker.stdout.readline().split() == ["shm-errno-13", "no-snapshot", "db-locked"]  # EACCES
        for suffix in ("-wal", "-shm"):
            st = os.stat(db + suffix)
            assert (st.st_uid, st.st_mode & 0o777) == (0, 0o600)
        t0 = time.monotonic()
        _finalize(node, node.job("900", "alice", node.workdir("alice", "a")))  # her own job: stored at once
        assert time.monotonic() - t0 < 10.0
        st = open_store(node.store_url, busy_timeout_s=1.0)
        try:
            st.put_attempts = 1
            from tests.helpers.jobrecord_factory import finished, node_record

            for i in range(200):  # 200 records while she holds on: the WAL is reset behind each commit
                st.put(finished(node_record(job_id=str(5000 + i))))
        finally:
            st.close()
        assert os.path.getsize(db + "-wal") < 1 << 20  # < 1 MiB (a few pages a commit, reused)
        # bob's jobenergy (as bob, the SQLite file read lock-free) sees his job, and alice's hers
        code = "import sys; from slurm_energy.cli.jobenergy import main; sys.exit(main(sys.argv[1:]))"
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for who, job_id in (("bob", "901"), ("alice", "900")):
            r = subprocess.run([sys.executable, "-c", code, "-n", "-P", "-o", "JobID,User", job_id], cwd=repo,
                               capture_output=True, text=True, preexec_fn=_as(who), timeout=60)
            assert (r.returncode, r.stdout.strip()) == (0, f"{job_id}|{who}"), r.stderr
    finally:
        locker.kill()
        locker.wait()
    (a,) = node.store().get_job("900")
    assert a.energy_it_j["cpu"] == JOB_J
    _after_attack(node, victim_wd, victim_files)


# -- 10. the smaller ones: a label is its user's; user text escaped on every error line ------------
def _marked_job(node, job_id, owner, names):
    uid, gid = user(owner)
    mdir = node.marks / job_id
    os.makedirs(mdir)
    os.chown(mdir, uid, gid)
    lines = [json.dumps({"t": T0 + 0.5 * i, "ev": "begin", "id": i, "name": n}) for i, n in enumerate(names)]
    lines += [json.dumps({"t": T0 + 4.0, "ev": "end", "id": i}) for i in reversed(range(len(names)))]
    (mdir / f"marks-{NODE}.jsonl").write_text("\n".join(lines) + "\n")
    _finalize(node, node.job(job_id, owner, node.workdir(owner, f"w{job_id}")))


def test_an_admins_label_is_their_own_and_phase_names_reach_no_terminal_raw(node, capsys):
    """alice (job 900) and bob (903) both mark a phase ``train``; alice's job also one named with a C1 CSI and a
    right-to-left override. Before: ``jobenergy --cite --label train`` as an admin cited both
    users' jobs, and the error line listing phase names printed hers raw to the terminal."""
    from slurm_energy.cli.jobenergy import main as jobenergy

    hostile = "x\x9b2J\u202eevil"
    _marked_job(node, "900", "alice", ["train", hostile])
    _marked_job(node, "903", "bob", ["train"])
    victim_wd = _victim(node)
    capsys.readouterr()
    assert jobenergy(["--cite", "--label", "train"]) == 1  # root's own jobs: none labelled so
    capsys.readouterr()
    assert jobenergy(["--cite", "--label", "train", "-u", "alice", "--cite-format", "line"]) == 0
    one = capsys.readouterr().out
    assert jobenergy(["--cite", "--label", "train", "-a", "--cite-format", "line"]) == 0  # asked for: everyone's
    both = capsys.readouterr().out
    assert "(jobs 900)." in one and "(jobs 900, 901, 903)." in both, (one, both)  # 901: bob's, named train
    assert jobenergy(["--cite", "--phase", "nope", "900"]) == 1
    err = capsys.readouterr().err
    assert "\x9b" not in err and "\u202e" not in err and "x\\x9b2J\\u202eevil" in err
    _after_attack(node, victim_wd, {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)})


def test_the_spool_less_finalizers_argv_shows_no_jobs_context(node, monkeypatch):
    """bob's job 904 ends on a node whose spools are unusable: its finalizer starts from the
    Epilog's environment. Before: the job's context (name, work dir, user, account) was in its argv,
    which ``ps`` shows alice. Now argv names the job and node only; the rest is in its environment
    (root's to read: /proc/PID/environ is 0400)."""
    from slurm_energy.slurm import detach
    from slurm_energy.slurm.hooks.epilog import epilog
    from slurm_energy.slurm.jobend import __main__ as finalizer
    from tests.helpers.jobrecord_factory import hook_env

    for p in ("spool", "run-spool"):  # both spools unusable: files where the directories go
        (node.base / p).write_text("")
    started = []
    monkeypatch.setattr(detach, "spawn_detached", lambda argv, log, env=None, nice=0: started.append((argv, env)) or 4_000_000)
    wd = node.workdir("bob", "secret-project")
    b_uid, b_gid = user("bob")
    env = hook_env("904", node=NODE, uid=b_uid, gid=b_gid, user="bob", context="epilog_slurmd",
                   SLURM_JOB_WORK_DIR=wd, SLURM_JOB_ACCOUNT="research", SLURM_JOB_EXIT_CODE2="0:0")
    assert epilog(env) == 0
    ((argv, child_env),) = started
    assert argv[-2:] == ["finalize-env", f"904@{NODE}"] and "secret-project" not in " ".join(argv)
    assert "secret-project" in child_env[detach.FINALIZE_ENV_VAR]
    # the finalizer reads them there: bob's record, no_data, with his work dir
    monkeypatch.setenv(detach.FINALIZE_ENV_VAR, child_env[detach.FINALIZE_ENV_VAR])
    assert finalizer.main(["finalize-env", f"904@{NODE}"]) == 0
    (r,) = node.store().get_job("904")
    assert (r.user, r.status, r.work_dir) == ("bob", Status.NO_DATA, wd)
    for p in ("spool", "run-spool"):
        (node.base / p).unlink()
    victim_wd = _victim(node)
    _after_attack(node, victim_wd, {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)})


def test_install_mounts_the_marks_root_as_a_limited_tmpfs_which_a_user_cannot_fill_past(node, capsys):
    """``slurm-energy install`` (as root) makes the marks root a tmpfs with size and inode limits
    and writes its systemd .mount unit; alice, filling her job's marks directory, runs into the
    inode limit (ENOSPC) there instead of filling /run. Before: the limits were a line in the docs."""
    from slurm_energy.cli.main import main as se_main
    from slurm_energy.sampling import marks as M

    root, units = node.base / "marks-tmpfs", node.base / "units"
    units.mkdir()
    assert se_main(["install", "--hooks-dir", str(node.base / "hooks"), "--config", str(node.base / "site.yaml"),
                    "--marks-dir", str(root), "--systemd-dir", str(units), "--marks-tmpfs",
                    "size=1m,nr_inodes=64"]) == 0
    try:
        mounts = {ln.split()[1]: ln.split() for ln in open("/proc/self/mounts")}
        fs, opts = mounts[str(root)][2], mounts[str(root)][3].split(",")
        assert fs == "tmpfs" and {"nosuid", "nodev", "noexec", "size=1024k", "nr_inodes=64", "mode=755"} <= set(opts)
        (name,) = os.listdir(units)
        assert name.endswith(".mount") and f"Where={root}\n" in (units / name).read_text()
        uid, gid = user("alice")
        M.prepare_job_dir("905", uid, gid, root=str(root))
        fill = subprocess.run([sys.executable, "-c", _FILL, str(root / "905"), "200"], capture_output=True, text=True,
                              preexec_fn=_as("alice"))
        assert fill.returncode != 0 and "No space left on device" in fill.stderr  # 64 inodes, not 200
        assert len(os.listdir(root / "905")) < 64
    finally:
        subprocess.run(["/usr/bin/umount", str(root)], check=True)
    victim_wd = _victim(node)
    _after_attack(node, victim_wd, {x: open(os.path.join(victim_wd, x), "rb").read() for x in os.listdir(victim_wd)})
