#!/bin/bash
# The main job: a real training run measured under a real Slurm, report printed.
# Starts the test cluster (scripts/testcluster.sh: installs Slurm, munge, MariaDB and slurm-energy
# if missing), submits examples/train.sbatch with plain sbatch as the ordinary user alice, waits,
# then prints `jobenergy <id>`, the per-device and per-epoch view (the training script marks each
# epoch with slurm_energy.track) and where the HTML/CSV report is.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
L=${L:-/var/tmp/slurm-energy-cluster}
export L
bash "$REPO/scripts/testcluster.sh" start
export SLURM_CONF=$L/etc/slurm.conf
W=$L/jobs/alice/demo
install -d -o alice -g alice "$W"
install -o alice -g alice -m 644 "$REPO/examples/train_digits.py" "$REPO/examples/train.sbatch" "$W/"
JOB=$(cd "$W" && runuser -u alice -- env -i PATH=/usr/bin:/bin HOME="$L/home/alice" SLURM_CONF="$SLURM_CONF" \
      TRAIN_SECONDS="${TRAIN_SECONDS:-40}" sbatch --parsable train.sbatch)
echo "submitted job $JOB as alice in $W; training for ${TRAIN_SECONDS:-40} s ..."
for i in $(seq 600); do
  [ -s "$W/energy-$JOB.html" ] && [ -s "$W/energy-$JOB.csv" ] && break
  sleep 1
done
[ -s "$W/energy-$JOB.html" ] || { echo "no report after 600 s; see $L/log" >&2; exit 1; }
sleep 1
echo "--- job output"; cat "$W/slurm-$JOB.out"
JE=(/opt/slurm-energy/venv/bin/jobenergy)
echo "--- jobenergy $JOB (as alice)"
runuser -u alice -- env SLURM_ENERGY_CONFIG="$L/etc/site.yaml" "${JE[@]}" "$JOB"
echo "--- jobenergy -l $JOB"
runuser -u alice -- env SLURM_ENERGY_CONFIG="$L/etc/site.yaml" "${JE[@]}" -l "$JOB"
echo "--- report (owned by alice)"
ls -l "$W/energy-$JOB".*
cat "$W/energy-$JOB.csv"
echo "--- phases (energy-$JOB.phases.csv)"
cat "$W/energy-$JOB.phases.csv" || echo "no phases recorded: see jobenergy -l $JOB and $L/log"
echo "cluster left running; stop it with: bash $REPO/scripts/testcluster.sh stop"
