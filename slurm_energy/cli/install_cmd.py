"""`slurm-energy install`: write the Slurm hooks (Prolog, Epilog, MailProg wrapper) and print the
slurm.conf lines and the collect/prune timer lines; ``--print`` only prints, and only for hooks that
are this installation's own (else it says what differs: interpreter, hook entry, the site config
they read and which of its settings differ, or the script itself).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from slurm_energy.fileio import atomic_write, shipped_file

if TYPE_CHECKING:
    import subprocess

    from slurm_energy.cli.main import Subparsers


def register(sub: Subparsers) -> None:
    """Add the ``install`` sub-command."""
    p = sub.add_parser("install", help="install the Slurm hooks and print the slurm.conf lines")
    p.add_argument("--hooks-dir", default="/etc/slurm-energy/hooks", help="where to write prolog/epilog")
    p.add_argument("--config", default="", help="site config the hooks use (default /etc/slurm-energy/site.yaml)")
    p.add_argument("--print", dest="print_only", action="store_true", help="only print the slurm.conf lines")
    p.add_argument("--marks-tmpfs", default=MARKS_TMPFS,
                   help=f"size and inode limits of the tmpfs for jobs' marks directories (default {MARKS_TMPFS}; "
                        "'none': leave the marks root as it is)")
    p.add_argument("--marks-dir", default="", help="the marks root (default $SLURM_ENERGY_MARKS_DIR or "
                                                    "/run/slurm-energy-marks)")
    p.add_argument("--systemd-dir", default="/etc/systemd/system",
                   help="where the marks tmpfs's .mount unit is written (skipped where the directory does not exist)")
    p.add_argument("--units", default="", metavar="DIR",
                   help="also write the collect and prune services and timers (the .deb's hardened units, run by "
                        "this Python) into DIR, e.g. /etc/systemd/system (a pip install; the .deb ships them)")
    p.set_defaults(func=cmd_install)


#: The marks root's tmpfs limits: what all jobs running on a node can write there together (each
#: keeps one marks file of at most 1 MiB; the sampler removes anything else at each interim).
MARKS_TMPFS = "size=64m,nr_inodes=4096"
_MOUNT = "/usr/bin/mount"


def unit_name(path: str) -> str:
    """systemd's unit name of a mount point (``systemd-escape --path --suffix=mount``)."""
    out = []
    for i, c in enumerate(path.strip("/")):
        if c == "/":
            out.append("-")
        elif c.isascii() and (c.isalnum() or c in "_:" or (c == "." and i > 0)):
            out.append(c)
        else:
            out.extend(f"\\x{b:02x}" for b in c.encode())
    return "".join(out) + ".mount"


def marks_tmpfs(root: str, limits: str, systemd_dir: str,
                run: Callable[..., subprocess.CompletedProcess[str]] | None = None) -> list[str]:
    """The marks root as a tmpfs of its own with ``limits`` (``size=..,nr_inodes=..``), mode 0755,
    nosuid, nodev, noexec: users write there while their jobs run, and without limits could fill the
    node's /run. Mounted now (as root) where it is not a mount point yet, remounted with the limits
    where it is a tmpfs already; a ``.mount`` unit written into ``systemd_dir`` (if it exists) for
    the next boot. Returns what was done, one line each. Raises OSError/ValueError (bad limits)."""
    import subprocess

    if not re.fullmatch(r"size=\d+[kmg%]?,nr_inodes=\d+[kmg]?", limits):
        raise ValueError(f"--marks-tmpfs {limits!r}: give size=N[k|m|g|%],nr_inodes=N, e.g. {MARKS_TMPFS}, or none")
    run = run or subprocess.run
    opts = f"mode=0755,nosuid,nodev,noexec,{limits}"
    done = []
    if os.path.isdir(systemd_dir):
        unit = os.path.join(systemd_dir, unit_name(root))
        atomic_write(unit, "# written by slurm-energy install: jobs' marks directories, limited\n[Unit]\n"
                           "Description=slurm-energy marks root (tmpfs)\n[Mount]\nWhat=slurm-energy-marks\n"
                           f"Where={root}\nType=tmpfs\nOptions={opts}\n[Install]\nWantedBy=local-fs.target\n",
                     mode=0o644)
        done.append(f"wrote {unit} (enable it: systemctl daemon-reload && systemctl enable {unit_name(root)})")
    os.makedirs(root, mode=0o755, exist_ok=True)
    fstype = ""
    with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[1] == root:
                fstype = parts[2]
    if fstype and fstype != "tmpfs":
        done.append(f"{root} is a {fstype} mount, not a tmpfs: left as it is (mount a tmpfs there with {opts})")
        return done
    argv = [_MOUNT, "-o", f"remount,{limits}", root] if fstype else [_MOUNT, "-t", "tmpfs", "-o", opts,
                                                                    "slurm-energy-marks", root]
    r = run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise OSError(f"{' '.join(argv)}: {(r.stderr or '').strip() or f'exit {r.returncode}'}")
    done.append(f"{'remounted' if fstype else 'mounted'} {root}: tmpfs {opts}")
    return done


#: the collect (every 5 min) and prune (weekly) units: packaging/systemd/, installed as package data
UNITS = ("slurm-energy-collect.service", "slurm-energy-collect.timer", "slurm-energy-prune.service",
         "slurm-energy-prune.timer")


def _unit_template(name: str) -> str:
    """A shipped unit file: package data when installed, ``packaging/systemd/`` of the checkout otherwise."""
    return Path(shipped_file("slurm_energy.systemd", "packaging/systemd", name)).read_text()


def unit_text(name: str, python: str, config: str) -> str:
    """The shipped unit ``name`` for this installation: its ``ExecStart=/usr/bin/slurm-energy ...``
    (the .deb's command) run by ``python`` (isolated, as the hooks), and ``config`` in its
    environment where one is given. Raises ValueError if the shipped service has no such line."""
    text = _unit_template(name)
    if not name.endswith(".service"):
        return text
    exec_line = re.compile(r"^ExecStart=/usr/bin/slurm-energy (.*)$", re.M)
    if not exec_line.search(text):
        raise ValueError(f"{name}: no ExecStart=/usr/bin/slurm-energy line to adapt")
    env = f"Environment=SLURM_ENERGY_CONFIG={config}\n" if config else ""
    return exec_line.sub(lambda m: f"{env}ExecStart={python} -I -m slurm_energy.cli.main {m.group(1)}", text, count=1)


def write_units(directory: str, python: str, config: str) -> list[str]:
    """Write :data:`UNITS` (0644) into ``directory``; returns their paths. Raises OSError/ValueError."""
    out = []
    for name in UNITS:
        path = os.path.join(directory, name)
        atomic_write(path, "# written by slurm-energy install --units (from packaging/systemd)\n"
                     + unit_text(name, python, config), mode=0o644)
        out.append(path)
    return out


def _hook_template(which: str) -> str:
    """The shipped hook script: package data when installed, ``hooks/`` of the checkout otherwise."""
    return Path(shipped_file("slurm_energy.hooks", "hooks", which)).read_text()


#: What the hook scripts run (``python -I -S ENTRY prolog|epilog``): this package's own file.
HOOK_ENTRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "slurm", "hooks", "__main__.py")


def hook_text(which: str, python: str, config: str) -> str:
    """The shipped hook script ``which`` with this installation's interpreter, hook entry file
    (:data:`HOOK_ENTRY`) and config."""
    text = _hook_template(which)
    text = re.sub(r"^PY=.*$", f"PY={python}", text, count=1, flags=re.M)
    text = re.sub(r"^ENTRY=.*$", f"ENTRY={HOOK_ENTRY}", text, count=1, flags=re.M)
    return re.sub(r"^SLURM_ENERGY_CONFIG=[^;]*;", f"SLURM_ENERGY_CONFIG={config};", text, count=1, flags=re.M)


#: The settings `install` writes into a hook script (the first line of each): name -> what it is.
_SETTINGS = {"PY": "python", "ENTRY": "hook entry", "SLURM_ENERGY_CONFIG": "site config"}


def _setting(text: str, name: str) -> str | None:
    """The value of ``NAME=value`` (up to ``;`` or a comment) in a hook script, or None."""
    m = re.search(rf"^{name}=([^;#\n]*)", text, flags=re.M)
    return m.group(1).strip() if m else None


def _shown_config(path: str) -> str:
    return repr(path) if path else "'' (the default: /etc/slurm-energy/site.yaml, else documented defaults)"


def _hook_differences(text: str, ours: str) -> list[str]:
    """What differs between an installed hook's ``text`` and what this installation writes
    (``ours``): each setting (interpreter, hook entry, site config), else the first differing line
    of the script (another version's, or edited)."""
    out = []
    for name, what in _SETTINGS.items():
        theirs, mine = _setting(text, name), _setting(ours, name)
        if theirs != mine:
            if name == "SLURM_ENERGY_CONFIG":
                out.append(f"it reads the site config {_shown_config(theirs or '')}, not {_shown_config(mine or '')}")
            else:
                out.append(f"its {name}={theirs if theirs is not None else '?'}, this package's {what} is {mine}")
    if out:
        return out
    a, b = text.splitlines(), ours.splitlines()
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    def line(lines: list[str]) -> str:
        return repr(lines[n]) if n < len(lines) else "(end of file)"

    return [f"its script differs from this version's from line {n + 1} (another slurm-energy version's, or "
            f"edited): {line(a)}, this version writes {line(b)}"]


def installed_hook_problems(hooks_dir: str, config: str | None) -> list[str]:
    """Why the hooks in ``hooks_dir`` are not this installation's (empty list: they are).

    A hook must exist, be executable and be exactly what ``slurm-energy install`` of this package
    writes: the shipped script with this interpreter (``sys.executable``) and, when ``config`` is
    given, that site config. ``config=None`` accepts whatever config the file names. A hook that
    differs says what differs (:func:`_hook_differences`); when the hooks read another site config
    than ``config``, one more line says which of its settings differ (:func:`config_differences`).
    """
    problems = []
    read_by_hooks: list[str] = []
    for which in ("prolog", "epilog"):
        path = os.path.join(hooks_dir, which)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            problems.append(f"{path}: {e.strerror or e}")
            continue
        if not os.access(path, os.X_OK):
            problems.append(f"{path}: not executable")
        theirs = _setting(text, "SLURM_ENERGY_CONFIG") or ""
        cfg = config if config is not None else theirs
        ours = hook_text(which, sys.executable, cfg)
        if text != ours:
            problems.append(f"{path}: not written by this installation: " + "; ".join(_hook_differences(text, ours)))
            if config is not None and theirs != config and theirs not in read_by_hooks:
                read_by_hooks.append(theirs)
    for theirs in read_by_hooks:
        problems.append(f"site config the hooks read vs --config {config}: " + config_differences(theirs, config or ""))
    return problems


def _flat(d: object, prefix: str = "") -> dict[str, object]:
    """``{"paths.spool_dir": "/x", ...}`` of nested dicts (lists and scalars are leaves)."""
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, object] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _settings_of(path: str) -> tuple[dict[str, object] | None, str]:
    """``(flat settings, "")`` of the site config at ``path`` ("" = what a hook with an empty
    SLURM_ENERGY_CONFIG reads: /etc/slurm-energy/site.yaml, else the documented defaults), or
    ``(None, why it cannot be read)``."""
    from slurm_energy.config import ConfigError, SiteConfig, load_site_config, schema

    if not path and not os.path.exists(schema.DEFAULT_PATH):
        cfg = SiteConfig()
    else:
        try:
            cfg = load_site_config(path or schema.DEFAULT_PATH)
        except ConfigError as e:
            return None, str(e).splitlines()[0]
    data = cfg.model_dump(mode="json", exclude={"source_path", "defaults_used"})
    return _flat(data), ""


def config_differences(theirs: str, ours: str, most: int = 8) -> str:
    """Which settings differ between the site configs at ``theirs`` (the hooks') and ``ours``
    (--config), as ``paths.store_url: 'A' (hooks) vs 'B' (--config); ...`` (at most ``most``, then
    a count; store URL passwords hidden), "the two files set the same values", or why they cannot be
    compared (a file missing or invalid)."""
    from slurm_energy.store.urls import shown_url

    a, why_a = _settings_of(theirs)
    b, why_b = _settings_of(ours)
    if a is None or b is None:
        return "cannot compare their settings: " + "; ".join(w for w in (why_a, why_b) if w)
    keys = sorted(k for k in set(a) | set(b) if a.get(k, "(not set)") != b.get(k, "(not set)"))
    if not keys:
        return "the two files set the same values (only the path differs)"

    def shown(k: str, v: object) -> str:
        return repr(shown_url(v)) if k.endswith("store_url") and isinstance(v, str) else repr(v)

    parts = [f"{k}: {shown(k, a.get(k, '(not set)'))} (hooks) vs {shown(k, b.get(k, '(not set)'))} (--config)"
             for k in keys[:most]]
    more = f"; and {len(keys) - most} more" if len(keys) > most else ""
    return f"{len(keys)} setting(s) differ: " + "; ".join(parts) + more


def cmd_install(args: argparse.Namespace) -> int:
    """Write the hooks and the MailProg wrapper (root-owned, 0755) and print the slurm.conf lines.

    With ``--print`` nothing is written: the lines are printed only if the hooks in ``--hooks-dir``
    are this installation's own (see :func:`installed_hook_problems`); otherwise a warning goes to
    stderr, nothing to stdout, and the exit status is 1 (pasting Prolog=/Epilog= lines that point at
    missing or foreign hook files drains every node)."""
    hooks_dir = os.path.abspath(args.hooks_dir)
    config = os.path.abspath(args.config) if args.config else ""
    if args.print_only:
        problems = installed_hook_problems(hooks_dir, config if args.config else None)
        if problems:
            print("slurm-energy install --print: the hooks are not installed for this package:", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            print(f"Install them first (as root): {sys.executable} -m slurm_energy.cli.main install "
                  f"--hooks-dir {hooks_dir}" + (f" --config {config}" if config else ""), file=sys.stderr)
            return 1
        if not args.config:  # print the lines for the config the hooks actually read
            config = hooks_config(hooks_dir)
            print(f"# the hooks in {hooks_dir} read the site config {_shown_config(config)}; "
                  "the collect/prune lines below use it", file=sys.stderr)
    bad = config_problem(config) if config else None
    if bad:
        print(bad, file=sys.stderr)
        return 1
    if not args.print_only:
        os.makedirs(hooks_dir, mode=0o755, exist_ok=True)
        for which in ("prolog", "epilog", "mail"):
            atomic_write(os.path.join(hooks_dir, which), hook_text(which, sys.executable, config), mode=0o755)
        print(f"# hooks written to {hooks_dir} (python {sys.executable})", file=sys.stderr)
        if args.marks_tmpfs != "none":
            from slurm_energy.sampling.marks import marks_root

            try:
                for line in marks_tmpfs(os.path.abspath(args.marks_dir or marks_root()), args.marks_tmpfs,
                                        args.systemd_dir):
                    print(f"# marks: {line}", file=sys.stderr)
            except ValueError as e:
                print(f"slurm-energy install: the marks tmpfs is not set up: {e}", file=sys.stderr)
                return 1
            except OSError as e:  # e.g. installing into an image (a chroot without /proc): the hooks
                # work without it, and its .mount unit (written first, where the directory exists)
                # mounts it at boot; the slurm.conf lines still follow
                print(f"slurm-energy install: warning: the marks tmpfs is not mounted now: {e}; until it is, "
                      "the marks root has no size or inode limit (mount it, or enable its .mount unit)",
                      file=sys.stderr)
    if args.units and not args.print_only:
        try:
            written = write_units(os.path.abspath(args.units), sys.executable, config)
        except (OSError, ValueError) as e:
            print(f"slurm-energy install: --units {args.units}: the timers are not written: {e}", file=sys.stderr)
            return 1
        print(f"# units: wrote {', '.join(written)}; enable them: systemctl daemon-reload && "
              "systemctl enable --now slurm-energy-collect.timer slurm-energy-prune.timer", file=sys.stderr)
    print("# slurm-energy: add to slurm.conf on every node and the controller, then `scontrol reconfigure`")
    print(f"Prolog={os.path.join(hooks_dir, 'prolog')}")
    print(f"Epilog={os.path.join(hooks_dir, 'epilog')}")
    print("PrologFlags=Alloc,Contain")
    print("# end-of-job mail with the job's energy (then the real mail program, outputs.mail.program):")
    print(f"MailProg={os.path.join(hooks_dir, 'mail')}")
    for line in collect_timer_lines(sys.executable, config, hooks_log_dir(config)):
        print(line)
    return 0


def hooks_config(hooks_dir: str) -> str:
    """The site config path the prolog in ``hooks_dir`` reads (its ``SLURM_ENERGY_CONFIG=``), ""
    when it names none (the default /etc/slurm-energy/site.yaml) or cannot be read."""
    try:
        with open(os.path.join(hooks_dir, "prolog"), encoding="utf-8") as f:
            return _setting(f.read(), "SLURM_ENERGY_CONFIG") or ""
    except OSError:
        return ""


def hooks_log_dir(config: str) -> str:
    """``paths.log_dir`` of the site config the hooks read: ``config``, or for "" (the hooks' empty
    SLURM_ENERGY_CONFIG) /etc/slurm-energy/site.yaml if it exists, else the documented default.
    Loaded leniently: a bad key elsewhere keeps the configured log_dir, as in the hooks."""
    from slurm_energy.config import load_site_config_lenient, schema

    path = config or (schema.DEFAULT_PATH if os.path.exists(schema.DEFAULT_PATH) else None)
    if path is None:
        return schema.Paths().log_dir
    return load_site_config_lenient(path)[0].paths.log_dir


def config_problem(path: str) -> str | None:
    """Why ``install --config PATH`` must not write hooks that read ``path``: the file is missing,
    unreadable or invalid (every job would run with the documented defaults, or a last good copy,
    instead of the site's settings). None when it loads strictly
    (:func:`slurm_energy.config.load_site_config`). The message names each bad field and its fix."""
    from slurm_energy.config import ConfigError, load_site_config
    from slurm_energy.config.load import documented_example

    try:
        load_site_config(path)
    except ConfigError as e:
        return (f"slurm-energy install: --config {path} cannot be used; nothing was written:\n{e}\n"
                f"Fix: create or correct {path} ({documented_example()} documents every key; `slurm-energy "
                f"check-config {path}` checks it), then run install again")
    return None


def collect_timer_lines(python: str, config: str, log_dir: str = "/var/log/slurm-energy") -> list[str]:
    """Comment lines (slurm.conf ignores them) saying how ``slurm-energy collect`` (every 5 minutes:
    it finishes jobs a fault left unfinished and drains the queued records, docs/STORE.md) and
    ``prune`` (weekly retention) run as root on each node (the spool is node-local): the .deb's
    timers, or ``install --units`` writing the same hardened units for this Python, or root's cron
    lines. The cron lines append their output to ``<log_dir>/collect.log`` and ``<log_dir>/prune.log``
    (``log_dir``: the site's ``paths.log_dir``, :func:`hooks_log_dir`), creating ``log_dir`` (0700,
    as the hooks do) on a host where no hook ran yet (the controller)."""
    import shlex

    env = f"SLURM_ENERGY_CONFIG={shlex.quote(config)} " if config else ""
    d = shlex.quote(log_dir)
    cfg = f" --config {shlex.quote(config)}" if config else ""

    def cron(when: str, command: str, log: str) -> str:
        return (f"# {when} mkdir -p -m 0700 {d} && {env}{python} -I -m slurm_energy.cli.main {command} "
                f">>{shlex.quote(os.path.join(log_dir, log))} 2>&1")

    return [
        "# slurm-energy collect (every 5 min) and prune (weekly) run as root on every node and the controller:",
        "# the .deb ships their timers; with pip, write the same hardened units for this Python:",
        f"#   {python} -m slurm_energy.cli.main install{cfg} --units /etc/systemd/system",
        "#   systemctl daemon-reload && systemctl enable --now slurm-energy-collect.timer slurm-energy-prune.timer",
        "# or root's crontab (crontab -e):",
        cron("*/5 * * * *", "collect --older-than 5", "collect.log"),
        cron("17 3 * * 0", "prune --older-than 14", "prune.log"),
    ]
