#!/bin/bash
# The test command (README's second command; .ci/run calls it). On a fresh Debian 12 machine as
# root it installs everything the tests need (scripts/setup.sh), starts a private PostgreSQL
# (scripts/postgres.sh) and the real Slurm test cluster (scripts/testcluster.sh), then runs the
# whole suite, the end-to-end Slurm tests included, with the project's venv.
#   scripts/run-tests.sh [--slurm 22.05|24.11|26.05] [--cgroup v2] [pytest args]   (e.g. `--slurm 24.11 tests/e2e`)
# --slurm picks the test cluster's Slurm (default: the host's; others run in a Debian root);
# `--slurm 26.05 --cgroup v2` runs it on cgroup v2 under systemd in a QEMU VM (scripts/vmcluster.sh).
# Exit status: pytest's; 5 (no tests collected) is reported as the failure it is.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-/opt/slurm-energy/venv}
SV=()
while [ "${1:-}" = --slurm ] || [ "${1:-}" = --cgroup ]; do SV+=("$1" "${2:?$1 needs a value}"); shift 2; done
[ "${SETUP_DONE:-0}" = 1 ] || bash "$REPO/scripts/setup.sh"  # SETUP_DONE=1: .ci/run did it already
export SETUP_DONE=1  # testcluster.sh need not run it again
SLURM_ENERGY_TEST_PG_URL=$(bash "$REPO/scripts/postgres.sh" start | tail -1)
export SLURM_ENERGY_TEST_PG_URL
bash "$REPO/scripts/testcluster.sh" start "${SV[@]}"
# the cluster's directory (one per Slurm version; the cgroup v2 VM has its own mark)
if [[ " ${SV[*]} " == *" --cgroup v2 "* ]]; then L=$(cat /run/slurm-energy-vmcluster); else L=$(cat /run/slurm-energy-testcluster); fi
export L SLURM_ENERGY_TEST_CLUSTER=$L
echo "[run-tests] Slurm: $(bash "$REPO/scripts/testcluster.sh" version "${SV[@]}") in $L"
cd "$REPO"
set +e
"$VENV/bin/python" -m pytest -p no:cacheprovider -q -rs "$@"
rc=$?
set -e
[ $rc = 5 ] && echo "[run-tests] FAILED: pytest collected no tests (exit 5) for: $*" >&2
[ "${KEEP_CLUSTER:-0}" = 1 ] || bash "$REPO/scripts/testcluster.sh" stop "${SV[@]}" >/dev/null 2>&1 || true
[ "${KEEP_CLUSTER:-0}" = 1 ] || bash "$REPO/scripts/postgres.sh" stop >/dev/null 2>&1 || true
exit $rc
