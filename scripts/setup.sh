#!/bin/bash
# Install what slurm-energy and its tests need on a fresh Debian 12 machine (as root), idempotently:
# Debian's Slurm 22.05 + munge (+ slurmdbd/MariaDB for sacct), PostgreSQL, Prometheus and
# node_exporter (the tests start them by PID on loopback; no service is enabled), QEMU (the cgroup v2
# VM cluster, scripts/vmcluster.sh), and a virtual
# environment at $VENV (default /opt/slurm-energy/venv) built from Debian's /usr/bin/python3 with
# this checkout installed non-editable (pip install .[test,demo,ml,dev,docs]). The venv lives outside /root so
# the hooks (root, no PATH) and the jobs (ordinary users) can run its python.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-/opt/slurm-energy/venv}
log() { echo "[setup] $*"; }

PKGS=(munge slurm-wlm slurmctld slurmd slurm-client slurmdbd mariadb-server postgresql procps
      python3 python3-venv python3-dev coreutils prometheus prometheus-node-exporter
      qemu-system-x86 qemu-utils  # qemu: the cgroup v2 VM cluster (scripts/vmcluster.sh)
      ipmitool freeipmi-tools openipmi  # DCMI node meter tools; openipmi's ipmi_sim for its tests
      man-db)  # man -l: the man pages render (tests/test_man_pages.py)
MISSING=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || MISSING+=("$p")
done
if [ ${#MISSING[@]} -gt 0 ]; then
  log "apt-get install ${MISSING[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >/tmp/slurm-energy-apt.log 2>&1 \
    || { tail -30 /tmp/slurm-energy-apt.log; exit 1; }
fi

# The test cluster's users (uids as scripts/testcluster.sh's TEST_USERS). Made here, not only when a
# cluster starts: the unit tests (tests/slurm/test_user_attacks.py, tests/cli/test_collect_sinks.py)
# run before any cluster on a fresh machine. Home as the default cluster would give it; the cluster
# creates the directory itself.
for ut in ${TEST_USERS:-alice:2001 bob:2002}; do
  u=${ut%%:*}
  id "$u" >/dev/null 2>&1 || useradd -M -d "/var/tmp/slurm-energy-cluster/home/$u" -u "${ut##*:}" -s /bin/bash "$u"
done

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -U pip
fi
# the [ml] extra (Lightning, transformers: the callbacks' tests) needs torch: install its CPU build
# first (PyPI's torch 2.13.0 CPU wheel lies on disk on this project's machines, ~1 min); with it
# present the extra's torch>=2.1 pulls nothing more (a plain `torch` would be a CUDA build of GBs)
if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
  log "pip install torch==2.13.0 (CPU build) into $VENV"
  "$VENV/bin/pip" install -q "torch==2.13.0" >/tmp/slurm-energy-pip-torch.log 2>&1 \
    || { tail -30 /tmp/slurm-energy-pip-torch.log; exit 1; }
fi
log "pip install $REPO[test,demo,ml,dev,docs] into $VENV"
# a copy, so a build/ or egg-info left by an earlier build never leaks stale files into the install
BUILD=$(mktemp -d)
git -C "$REPO" ls-files -z --cached --others --exclude-standard | (cd "$REPO" && xargs -0 cp --parents -t "$BUILD" 2>/dev/null || true)
"$VENV/bin/pip" install -q "$BUILD[test,demo,ml,dev,docs]" >/tmp/slurm-energy-pip.log 2>&1 \
  || { tail -30 /tmp/slurm-energy-pip.log; exit 1; }
rm -rf "$BUILD"
# -I: the installed copy, not the checkout in the current directory
"$VENV/bin/python" -I -c "import slurm_energy, pynvml, sklearn; print('[setup] slurm_energy', slurm_energy.__version__, 'at', slurm_energy.__file__)"
# man jobenergy / man slurm-energy without the venv's bin on PATH: links to the pages pip installed
mkdir -p /usr/local/share/man/man1
for page in jobenergy slurm-energy; do ln -sfn "$VENV/share/man/man1/$page.1" "/usr/local/share/man/man1/$page.1"; done
chmod -R a+rX "$(dirname "$VENV")"
