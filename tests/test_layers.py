"""The layering in pyproject.toml ([tool.importlinter]) holds: data flows one way."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_import_contracts_are_kept():
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    assert os.path.exists(exe), "import-linter missing: pip install .[dev] (scripts/setup.sh does)"
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def _main_guard_not_last(path: str) -> int | None:
    """The line of an ``if __name__ == "__main__":`` block that some top-level statement follows."""
    import ast

    body = ast.parse(open(path, encoding="utf-8").read(), path).body
    for i, node in enumerate(body):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
                and i != len(body) - 1):
            return node.lineno
    return None


def test_main_guard_is_each_modules_last_statement(tmp_path):
    # `python -m slurm_energy.cli.jobenergy` ran its main at line 448 of 534, before the functions
    # below it were defined (NameError: missing_ids; CI's three Slurm e2e stages): a module run with
    # -m must have defined everything before it runs
    bad = tmp_path / "bad.py"
    bad.write_text('def f():\n    return g()\n\n\nif __name__ == "__main__":\n    f()\n\n\ndef g():\n    return 1\n')
    assert _main_guard_not_last(str(bad)) == 5  # the check sees the pattern
    found = []
    for d, _, files in os.walk(os.path.join(REPO, "slurm_energy")):
        for f in files:
            if f.endswith(".py") and (line := _main_guard_not_last(os.path.join(d, f))) is not None:
                found.append(f"{os.path.relpath(os.path.join(d, f), REPO)}:{line}")
    assert found == []
