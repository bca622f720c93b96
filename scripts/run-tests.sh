#!/bin/bash
# The test command (README's second command; .ci/run calls it). On a fresh Debian 12 machine as
# root it installs everything the tests need (scripts/setup.sh), starts a private PostgreSQL
# (scripts/postgres.sh) and the real Slurm test cluster (scripts/testcluster.sh), then runs the
# whole suite, the end-to-end Slurm tests included, with the project's venv.
# Extra arguments go to pytest (e.g. `scripts/run-tests.sh -k summary`).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-/opt/slurm-energy/venv}
export L=${L:-/var/tmp/slurm-energy-cluster}
bash "$REPO/scripts/setup.sh"
SLURM_ENERGY_TEST_PG_URL=$(bash "$REPO/scripts/postgres.sh" start | tail -1)
export SLURM_ENERGY_TEST_PG_URL
bash "$REPO/scripts/testcluster.sh" start
export SLURM_ENERGY_TEST_CLUSTER=$L
cd "$REPO"
set +e
"$VENV/bin/python" -m pytest -p no:cacheprovider -q -rs "$@"
rc=$?
set -e
[ "${KEEP_CLUSTER:-0}" = 1 ] || bash "$REPO/scripts/testcluster.sh" stop >/dev/null 2>&1 || true
[ "${KEEP_CLUSTER:-0}" = 1 ] || bash "$REPO/scripts/postgres.sh" stop >/dev/null 2>&1 || true
exit $rc
