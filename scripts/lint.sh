#!/bin/bash
# Code checks CI runs before the tests (.ci/run): ruff (style, bugbear, complexity <= 15), mypy
# (strict on the data model, the pipeline, outputs and attribution; see [tool.mypy] in
# pyproject.toml) and import-linter (the layering, [tool.importlinter]). Any violation fails.
# Needs the dev extra: scripts/setup.sh installs it into $VENV.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-/opt/slurm-energy/venv}
cd "$REPO"
rc=0
echo "[lint] ruff check" >&2
"$VENV/bin/ruff" check slurm_energy tests benchmarks || rc=1
echo "[lint] mypy" >&2
"$VENV/bin/mypy" || rc=1
echo "[lint] lint-imports" >&2
PYTHONPATH="$REPO" "$VENV/bin/lint-imports" --no-cache || rc=1
exit $rc
