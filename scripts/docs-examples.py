"""Run the documentation's runnable examples (scripts/packaging-check.sh, in CI), so the docs cannot rot.

A runnable example is a ```console block right after the line ``<!-- runnable -->`` in a docs/ page.
Each ``$ `` line (with ``\\`` continuation lines) is run with bash in a fresh temporary directory, the
CI venv's bin first on PATH and $SLURM_ENERGY_CONFIG pointing at a site config in that directory;
it must exit 0. The lines after a command are its expected output: each must appear in the command's
output, in order, where ``...`` matches anything and a trailing ``  # comment`` is the docs' remark,
not output.

    python scripts/docs-examples.py [PAGE.md...]     (default: every page under docs/)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- runnable -->"


def examples(page: Path) -> list[tuple[int, list[str]]]:
    """(line number, the block's lines) of each runnable console block in ``page``."""
    lines = page.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() == MARK:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j >= len(lines) or lines[j].strip() != "```console":
                raise SystemExit(f"{page}:{i + 1}: {MARK} must be followed by a ```console block")
            end = next(k for k in range(j + 1, len(lines)) if lines[k].strip() == "```")
            out.append((j + 1, lines[j + 1:end]))
    return out


def commands(block: list[str]) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each ``$ `` command of a block."""
    out: list[tuple[str, list[str]]] = []
    it = iter(block)
    for line in it:
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\"):
                cmd = cmd[:-1] + " " + next(it).strip()
            out.append((cmd, []))
        elif out:
            out[-1][1].append(re.sub(r"\s+#\s.*$", "", line).rstrip())
    return out


def matches(expected: list[str], output: str) -> str | None:
    """None when every expected line appears in ``output`` in order; else the first line that does not."""
    pos = 0
    for want in expected:
        if not want.strip():
            continue
        parts = [re.escape(p.strip()) for p in want.split("...")]
        m = re.compile(r".*?".join(parts)).search(output, pos)
        if m is None:
            return want
        pos = m.end()
    return None


def run(page: Path) -> int:
    failed = 0
    venv_bin = os.path.dirname(sys.executable)
    for lineno, block in examples(page):
        for cmd, expected in commands(block):
            with tempfile.TemporaryDirectory(prefix="docs-example-") as tmp:
                site = Path(tmp) / "site.yaml"
                site.write_text(f"cluster_name: docs\npaths:\n  spool_dir: {tmp}/spool\n  spool_fallback_dir: ''\n"
                                f"  log_dir: {tmp}/log\n  store_url: sqlite:///{tmp}/jobs.db\n"
                                "outputs:\n  prometheus: {enabled: false}\n")
                env = {"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": tmp, "LC_ALL": "C.UTF-8", "COLUMNS": "120",
                       "SLURM_ENERGY_CONFIG": str(site), "PYTHONPATH": str(ROOT)}
                r = subprocess.run(["bash", "-c", cmd], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
            where = f"{page.relative_to(ROOT)}:{lineno}: $ {cmd}"
            missing = matches(expected, r.stdout + r.stderr)
            if r.returncode != 0 or missing is not None:
                failed += 1
                why = f"exit {r.returncode}" if r.returncode != 0 else f"output lacks {missing!r}"
                print(f"FAIL {where}: {why}\n{(r.stdout + r.stderr)[-3000:]}", file=sys.stderr)
            else:
                print(f"ok   {where}")
    return failed


def main(argv: list[str]) -> int:
    pages = [Path(p).resolve() for p in argv[1:]] or sorted((ROOT / "docs").rglob("*.md"))
    n = sum(len(examples(p)) for p in pages)
    failed = sum(run(p) for p in pages)
    print(f"{n} runnable example(s), {failed} command(s) failed")
    return 1 if failed or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
