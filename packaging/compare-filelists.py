"""The RPM ships what the .deb ships: the two packages' file lists, compared.

    python3 packaging/compare-filelists.py dist/slurm-energy_*.deb dist/slurm-energy-*.rpm

Compared: every path outside the venv (commands, site config, units, man pages, rules, dashboard,
state directory) and, inside /opt/venvs/slurm-energy, the product's own files (site-packages/
slurm_energy and its console scripts). The venv's third-party packages come from PyPI in both and
are counted, not listed. Mapped across the distributions' conventions: the units' /lib/systemd
(Debian) and /usr/lib/systemd (RHEL); documentation (/usr/share/doc) and bytecode differ by design.
"""

from __future__ import annotations

import re
import subprocess
import sys

VENV = "/opt/venvs/slurm-energy"


def deb_files(path: str) -> set[str]:
    """Files and symlinks (not directories) of a .deb."""
    out = subprocess.run(["dpkg-deb", "-c", path], check=True, capture_output=True, text=True).stdout
    return {re.sub(r" -> .*$", "", line.split(None, 5)[5])[1:] for line in out.splitlines() if not line.startswith("d")}


def rpm_files(path: str) -> set[str]:
    """Files and symlinks (not directories) of an .rpm."""
    out = subprocess.run(["rpm", "-qp", "--qf", "[%{FILEMODES:perms} %{FILENAMES}\\n]", path],
                         check=True, capture_output=True, text=True).stdout
    return {line.split(" ", 1)[1] for line in out.splitlines() if line.strip() and not line.startswith("d")}


def normalise(paths: set[str]) -> tuple[set[str], int]:
    keep, third_party = set(), 0
    for p in paths:
        p = re.sub(r"^/lib/systemd/", "/usr/lib/systemd/", p)
        if not p or p.startswith("/usr/share/doc") or "__pycache__" in p or p.endswith(".pyc"):
            continue
        if p.startswith(VENV):
            rest = p[len(VENV):]
            if re.match(r"^/lib/python3\.\d+/site-packages/slurm_energy(/|$)", rest) or rest in (
                    "/bin/jobenergy", "/bin/slurm-energy"):
                keep.add(p)
            else:
                third_party += 1
            continue
        keep.add(p)
    return keep, third_party


def main(argv: list[str]) -> int:
    deb, n_deb = normalise(deb_files(argv[1]))
    rpm, n_rpm = normalise(rpm_files(argv[2]))
    only_deb, only_rpm = sorted(deb - rpm), sorted(rpm - deb)
    print(f"product files: .deb {len(deb)}, .rpm {len(rpm)}; venv third-party files: .deb {n_deb}, .rpm {n_rpm}")
    for p in only_deb:
        print(f"  only in the .deb: {p}")
    for p in only_rpm:
        print(f"  only in the .rpm: {p}")
    missing = [p for p in ("/usr/bin/jobenergy", "/etc/slurm-energy/site.yaml", "/usr/share/man/man1/jobenergy.1.gz",
                           "/usr/lib/systemd/system/slurm-energy-collect.timer") if p not in deb]
    if missing:
        print(f"  the .deb lacks {missing}: the comparison itself is wrong")
    return 1 if only_deb or only_rpm or missing or not deb else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
