"""jobenergy(1) and slurm-energy(1), generated from the argparse parsers with argparse-manpage.

    python scripts/man.py write    regenerate man/*.1 (commit them: pip and the packages install them)
    python scripts/man.py check    fail if man/*.1 differ from what the parsers give (CI,
                                   scripts/packaging-check.sh), ignoring the .TH line's date

Run from the repository root, so the checkout's parsers are the ones read. The extra sections
(FILES, ENVIRONMENT, SEE ALSO) come from man/<prog>.include.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

from argparse_manpage.manpage import Manpage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slurm_energy import __version__  # noqa: E402
from slurm_energy.cli import jobenergy, main  # noqa: E402

PAGES = {
    "jobenergy": (jobenergy.build_parser, "energy (kWh) and carbon (kgCO2e) of Slurm jobs, sacct-style"),
    "slurm-energy": (main.build_parser, "energy and carbon accounting for Slurm jobs: hooks, collect, rollup, run, predict"),
}


def render(prog: str) -> str:
    build, description = PAGES[prog]
    parser = build()
    parser.prog = prog
    page = Manpage(parser, _data={
        "project_name": "slurm-energy", "version": __version__, "manual_title": "slurm-energy manual",
        "description": description, "include": str(ROOT / "man" / f"{prog}.include"),
    })
    # argparse-manpage copies help text verbatim: a text line that starts with ' or . would be read
    # by troff as a control line ("'|'-separated output" vanished); \& before it makes it text
    return re.sub(r"^(['.])(?![A-Z]{1,2}\b|\\\")", r"\\&\1", str(page), flags=re.M) + "\n"


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(".TH ")]


def main_(argv: list[str]) -> int:
    if argv[1:] not in (["write"], ["check"]):
        print(__doc__, file=sys.stderr)
        return 2
    stale = 0
    for prog in PAGES:
        path = ROOT / "man" / f"{prog}.1"
        text = render(prog)
        if argv[1] == "write":
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
            continue
        old = path.read_text() if path.exists() else ""
        if _body(old) != _body(text):
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(
                [s + "\n" for s in _body(old)], [s + "\n" for s in _body(text)], str(path), "from the parsers", n=1))
    if stale:
        print(f"{stale} man page(s) out of date with the parsers: run python scripts/man.py write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main_(sys.argv))
