#!/bin/bash
# The main job: a real training run measured under a real Slurm, report printed.
# Starts the test cluster (scripts/testcluster.sh: installs Slurm, munge, MariaDB and slurm-energy
# if missing), submits examples/train.sbatch with plain sbatch as the ordinary user alice, waits,
# then prints `jobenergy <id>`, the per-device and per-epoch view (the training script marks each
# epoch with slurm_energy.track) and where the HTML/CSV report is.
set -euo pipefail
# bash scripts/demo.sh [--slurm 22.05|24.11|26.05]   (default: the host's Slurm; see testcluster.sh)
REPO=$(cd "$(dirname "$0")/.." && pwd)
SV=()
if [ "${1:-}" = --slurm ]; then SV=(--slurm "${2:?--slurm needs a version}"); shift 2; fi
TC=(bash "$REPO/scripts/testcluster.sh")
"${TC[@]}" start "${SV[@]}"
L=$(cat /run/slurm-energy-testcluster)  # the cluster's directory (one per Slurm version)
export L
as_alice() { "${TC[@]}" exec -u alice -C "$W" -- "$@"; }  # runs in the version's root if it has one
echo "--- Slurm version: $("${TC[@]}" exec -- sinfo -V) (slurmd: $("${TC[@]}" exec -- slurmd -V))"
W=$L/jobs/alice/demo
install -d -o alice -g alice "$W"
install -o alice -g alice -m 644 "$REPO/examples/train_digits.py" "$REPO/examples/train.sbatch" "$W/"
JOB=$(as_alice env TRAIN_SECONDS="${TRAIN_SECONDS:-40}" sbatch --parsable train.sbatch)
echo "submitted job $JOB as alice in $W; training for ${TRAIN_SECONDS:-40} s ..."
for i in $(seq 600); do
  [ -s "$W/energy-$JOB.html" ] && [ -s "$W/energy-$JOB.csv" ] && break
  sleep 1
done
[ -s "$W/energy-$JOB.html" ] || { echo "no report after 600 s; see $L/log" >&2; exit 1; }
sleep 1
echo "--- job output"; cat "$W/slurm-$JOB.out"
JE=/opt/slurm-energy/venv/bin/jobenergy
echo "--- jobenergy $JOB (as alice)"
as_alice "$JE" "$JOB"
echo "--- jobenergy -l $JOB"
as_alice "$JE" -l "$JOB"
echo "--- report (owned by alice)"
ls -l "$W/energy-$JOB".*
cat "$W/energy-$JOB.csv"
echo "--- phases (energy-$JOB.phases.csv)"
cat "$W/energy-$JOB.phases.csv" || echo "no phases recorded: see jobenergy -l $JOB and $L/log"
echo "cluster left running; stop it with: bash $REPO/scripts/testcluster.sh stop"
