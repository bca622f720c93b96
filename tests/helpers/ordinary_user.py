"""Run a test's script as an ordinary user, the way a researcher runs it: as ``alice`` (the test
cluster's user) where she exists, else ``nobody``, when the suite runs as root (``setpriv``: real
and effective uid/gid changed, no supplementary groups); as the suite's own user otherwise.

:func:`user_dir` makes a directory that user owns, under /var/tmp (its parents are world-readable,
unlike pytest's 0700 ``tmp_path`` of root); :func:`user_env` a clean environment (no Slurm, no
torchrun variables, HOME and TMPDIR in that directory, this checkout first on PYTHONPATH).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def ordinary_user() -> tuple[str, int, int] | None:
    """(name, uid, gid) to switch to, or None: the suite already runs as an ordinary user."""
    if os.geteuid() != 0:
        return None
    for name in ("alice", "nobody"):
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        return name, pw.pw_uid, pw.pw_gid
    raise RuntimeError("no ordinary user (alice, nobody) to run as")


def user_name() -> str:
    u = ordinary_user()
    return u[0] if u else pwd.getpwuid(os.geteuid()).pw_name


def user_dir(prefix: str) -> Path:
    """A fresh directory owned by that user (0755), under /var/tmp. Remove it with :func:`remove`."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    u = ordinary_user()
    if u is not None:
        os.chown(d, u[1], u[2])
    os.chmod(d, 0o755)
    return d


def remove(d: Path) -> None:
    for root, dirs, _files in os.walk(d):
        for x in dirs:
            try:
                os.chmod(os.path.join(root, x), 0o755)
            except OSError:
                pass
    shutil.rmtree(d, ignore_errors=True)


def user_env(d: Path, **extra: str) -> dict[str, str]:
    """Environment for a script in ``d``: no SLURM_*/torchrun variables, a site.yaml without
    RAPL (this machine has none anyway), HOME and TMPDIR in ``d`` (so a left-over sample directory
    is seen), nothing downloaded (HF offline), one thread per process."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM", "TORCHELASTIC", "PYTHON")) and k not in
           ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SUDO_UID", "SUDO_USER")}
    site = d / "site.yaml"
    if not site.exists():
        site.write_text(f"cluster_name: t\nhardware:\n  rapl_root: {d}/no-powercap\n")
        u = ordinary_user()
        if u is not None:
            os.chown(site, u[1], u[2])
    tmp = d / "tmp"
    if not tmp.exists():
        tmp.mkdir()
        u = ordinary_user()
        if u is not None:
            os.chown(tmp, u[1], u[2])
    env.update(SLURM_ENERGY_CONFIG=str(site), HOME=str(d), TMPDIR=str(tmp), PYTHONPATH=str(REPO),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1",
               TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


def as_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ordinary user (prefixed with setpriv when the suite is root)."""
    u = ordinary_user()
    if u is None:
        return argv
    return [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={u[1]}", f"--regid={u[2]}", "--clear-groups",
            "--"] + argv


def write(d: Path, name: str, text: str) -> Path:
    p = d / name
    p.write_text(text)
    u = ordinary_user()
    if u is not None:
        os.chown(p, u[1], u[2])
    return p


def popen(argv: list[str], d: Path, home: Path | None = None, **extra_env: str) -> subprocess.Popen:
    """``argv`` started as the user in ``d``; ``home``: where its site.yaml, HOME and TMPDIR are
    (default ``d``)."""
    return subprocess.Popen(as_user(argv), cwd=d, env=user_env(home or d, **extra_env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run(argv: list[str], d: Path, timeout: float = 180, home: Path | None = None,
        **extra_env: str) -> subprocess.CompletedProcess:
    """As :func:`popen`, waited for (at most ``timeout`` s)."""
    return subprocess.run(as_user(argv), cwd=d, env=user_env(home or d, **extra_env), capture_output=True, text=True,
                          timeout=timeout)


PY = sys.executable
