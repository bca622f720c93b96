#!/bin/bash
# run in the VM (as root) while job $1 runs on vm1
j=$1; sl=$(sacct -n -X -P -j $j -o SLUID); sc=/sys/fs/cgroup/system.slice/vm1_slurmstepd.scope
for i in $(seq 60); do [ -d $sc/$sl/step_batch/user ] && break; sleep 1; done
echo "# Slurm $(slurmd -V | cut -d' ' -f2) CgroupPlugin=cgroup/v2 under systemd $(systemctl --version | head -1 | cut -d' ' -f2), Linux $(uname -r), Debian sid VM (scripts/vmcluster.sh)"
echo "# job $j on node vm1 (two slurmd on one host: multiple-slurmd), SLUID $sl (sacct -o SLUID), $(date -u +%FT%TZ)"
echo "## /proc/1/cgroup"; cat /proc/1/cgroup
echo "## /proc/<slurmd -N vm1>/cgroup"; cat /proc/$(systemctl show -p MainPID --value slurmd-vm1)/cgroup
echo "## find /sys/fs/cgroup/system.slice -maxdepth 1 -name '*slurm*'"; find /sys/fs/cgroup/system.slice -maxdepth 1 -name '*slurm*' | sort
echo "## find $sc -type d"; find $sc -type d | sort
echo "## ls $sc/$sl"; ls $sc/$sl | tr '\n' ' '; echo
for f in cpu.stat memory.current memory.peak cgroup.events cgroup.controllers; do echo "## $sc/$sl/$f"; cat $sc/$sl/$f; done
for d in step_batch/user step_batch/slurm step_extern/user step_extern/slurm; do [ -d $sc/$sl/$d ] || continue; echo "## $sc/$sl/$d: cgroup.procs -> comm"; for p in $(find $sc/$sl/$d -name cgroup.procs -exec cat {} +); do echo "$p $(cat /proc/$p/comm 2>/dev/null)"; done; done
