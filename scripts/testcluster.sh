#!/bin/bash
# A real Slurm 22.05 cluster on this machine (Debian's packages) with slurm-energy's hooks installed:
# munged + MariaDB + slurmdbd + slurmctld + NODES slurmd daemons (n1..nN, `slurmd -N nK`, each on its
# own port; Debian's slurmd is built with --enable-multiple-slurmd). Every file lives under $L.
#
#   scripts/testcluster.sh start    install what is missing, configure, start, wait until nodes are idle
#   scripts/testcluster.sh stop     cancel jobs, stop every daemon it started (by PID)
#   scripts/testcluster.sh status   exit 0 when the controller answers and every node is idle/mixed/alloc
#   scripts/testcluster.sh env      print `export SLURM_CONF=...` (eval it to use sbatch/squeue)
#
# Knobs: L=/var/tmp/slurm-energy-cluster  NODES=2  CPN=2 (CPUs per node)  WITH_DBD=1  INTERVAL=2
#        VENV=/opt/slurm-energy/venv  CLUSTER=lab  TEST_USERS="alice:2001 bob:2002"
# The site config the hooks use is $L/etc/site.yaml (spool $L/spool, store $L/lib/jobs.db, logs
# $L/log, RAPL root $L/powercap: absent unless a test builds a fake powercap tree there).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
L=${L:-/var/tmp/slurm-energy-cluster}
NODES=${NODES:-2}
CPN=${CPN:-2}
WITH_DBD=${WITH_DBD:-1}
INTERVAL=${INTERVAL:-2}
VENV=${VENV:-/opt/slurm-energy/venv}
CLUSTER=${CLUSTER:-lab}
TEST_USERS=${TEST_USERS:-"alice:2001 bob:2002"}
CTLD_PORT=6817; SLURMD_PORT=6818; DBD_PORT=6819; DB_PORT=3307; NODE_PORT0=17000
export SLURM_CONF=$L/etc/slurm.conf

T0=$(date +%s.%N)
log() { echo "[cluster $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "%.1f", a-b}')s] $*"; }
die() { log "FATAL: $*" >&2; exit 1; }
waitfor() { local n=$1 what=$2 i; shift 2
  for ((i = 0; i < n * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  die "timeout (${n}s) waiting for: $what"; }
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $s != Z* ]]; }

nodes_ready() {
  local out; out=$(sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
  [ "$(echo "$out" | grep -cE ' (idle|mixed|allocated)$')" -ge "$NODES" ]
}

cmd_status() { [ -f "$SLURM_CONF" ] && scontrol ping 2>/dev/null | grep -q UP && nodes_ready; }

cmd_env() { echo "export SLURM_CONF=$SLURM_CONF"; }

cmd_stop() {
  [ -f "$SLURM_CONF" ] && scancel --full --quiet -u alice -u bob 2>/dev/null || true
  [ -f "$SLURM_CONF" ] && { for u in $(echo "$TEST_USERS" | sed 's/:[0-9]*//g'); do scancel -q -u "$u" 2>/dev/null || true; done; sleep 1; }
  for f in "$L"/run/slurmd-*.pid "$L"/run/slurmctld.pid "$L"/run/slurmdbd.pid "$L"/run/mariadbd.pid; do
    [ -f "$f" ] || continue; p=$(cat "$f")
    if alive "$p"; then
      kill -TERM "$p"; for i in $(seq 100); do alive "$p" || break; sleep 0.1; done
      alive "$p" && kill -KILL "$p"
      log "stopped $(basename "$f" .pid) ($p)"
    fi
    rm -f "$f"
  done
  # samplers of this cluster's jobs end by themselves once their job is gone; stop them now
  for f in "$L"/spool/jobs/*/sampler-*.pid "$L"/spool2/jobs/*/sampler-*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  pkill -TERM -f "slurmstepd.*$L" 2>/dev/null || true
  return 0
}

cmd_start() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  if cmd_status; then log "already running"; return 0; fi
  cmd_stop >/dev/null 2>&1 || true
  bash "$REPO/scripts/setup.sh"
  mkdir -p "$L"/{etc,log,run,state/d,dev,home,jobs,lib,textfile}
  chmod 755 "$L" "$(dirname "$L")" "$L/lib" "$L/home" "$L/jobs"
  id slurm >/dev/null || die "no slurm user (the Debian slurm packages create it)"
  for ut in $TEST_USERS; do
    u=${ut%%:*}; uid=${ut##*:}
    id "$u" >/dev/null 2>&1 || useradd -m -d "$L/home/$u" -u "$uid" -s /bin/bash "$u"
    install -d -o "$u" -g "$u" "$L/home/$u" "$L/jobs/$u"
  done
  install -d -o slurm -g slurm "$L/state/ctld" "$L/acct"
  for ((k = 1; k <= NODES; k++)); do install -d "$L/state/d/n$k"; done

  # cgroup v1 controllers mounted (this machine) -> proctrack/cgroup; else linuxproc
  local cg=1
  if [ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ]; then
    for c in freezer cpuacct cpuset memory devices; do
      [ "$(stat -fc %T "/sys/fs/cgroup/$c/" 2>/dev/null)" = cgroupfs ] || cg=0
    done
  else cg=0; fi
  if [ $cg = 1 ]; then
    PROCTRACK=proctrack/cgroup; TASK=task/cgroup; JAG=jobacct_gather/cgroup
    # several slurmd map their CPUs to the same physical cores: do not constrain cores
    printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainCores=no\nConstrainRAMSpace=yes\nConstrainDevices=yes\n' >"$L/etc/cgroup.conf"
  else
    PROCTRACK=proctrack/linuxproc; TASK=task/none; JAG=jobacct_gather/linux; rm -f "$L/etc/cgroup.conf"
  fi

  # one fake GPU per node (char devices, major 195): Slurm sets SLURM_JOB_GPUS; there is no NVML here
  echo "AutoDetect=off" >"$L/etc/gres.conf"
  for ((k = 1; k <= NODES; k++)); do
    i=$((k - 1)); [ -c "$L/dev/nvidia$i" ] || mknod "$L/dev/nvidia$i" c 195 "$i"
    echo "NodeName=n$k Name=gpu Type=fake File=$L/dev/nvidia$i" >>"$L/etc/gres.conf"
  done

  # site config for the hooks
  cat >"$L/etc/site.yaml" <<EOF
# slurm-energy site config of the test cluster (written by scripts/testcluster.sh)
cluster_name: $CLUSTER
timezone: UTC
sampling:
  interval_s: $INTERVAL
  interim_s: 5
hardware:
  rapl_root: $L/powercap
  drm_root: $L/sysfs/class/drm
  kfd_root: $L/sysfs/class/kfd/kfd/topology/nodes
paths:
  spool_dir: $L/spool
  spool_fallback_dir: $L/spool2
  results_dir: $L/spool/results
  store_url: sqlite:///$L/lib/jobs.db
  log_dir: $L/log
outputs:
  prometheus:
    textfile_dir: $L/textfile     # node_exporter's textfile dir (tests start node_exporter on it)
EOF
  "$VENV/bin/slurm-energy" install --hooks-dir "$L/hooks" --config "$L/etc/site.yaml" >"$L/etc/slurm-energy.conf.lines"

  local HOST; HOST=$(hostname -s)
  local MEM_MB; MEM_MB=$(awk -v n="$NODES" '/MemTotal/{printf "%d", $2/1024*0.7/n}' /proc/meminfo)
  local ACCT="AccountingStorageType=accounting_storage/none"
  [ "$WITH_DBD" = 1 ] && ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu"
  {
    cat <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$L/state/ctld
SlurmdSpoolDir=$L/state/d/%n
SlurmctldPidFile=$L/state/ctld/slurmctld.pid
SlurmdPidFile=$L/run/slurmd-%n.daemon.pid
SlurmctldLogFile=$L/log/slurmctld.log
SlurmdLogFile=$L/log/slurmd-%n.log
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=$PROCTRACK
TaskPlugin=$TASK
JobAcctGatherType=$JAG
JobAcctGatherFrequency=task=5
$ACCT
JobCompType=jobcomp/filetxt
JobCompLoc=$L/acct/jobcomp.txt
KillWait=5
MinJobAge=600
GresTypes=gpu
EOF
    grep -v '^#' "$L/etc/slurm-energy.conf.lines"
    for ((k = 1; k <= NODES; k++)); do
      echo "NodeName=n$k NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((NODE_PORT0 + k)) CPUs=$CPN Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPN ThreadsPerCore=1 RealMemory=$MEM_MB Gres=gpu:fake:1 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
  } >"$L/etc/slurm.conf"

  # munged
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  fi
  chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  if ! (munge -n 2>/dev/null | unmunge >/dev/null 2>&1); then
    runuser -u munge -- /usr/sbin/munged
    waitfor 15 munged sh -c 'munge -n | unmunge'
  fi

  if [ "$WITH_DBD" = 1 ]; then
    install -d -o mysql -g mysql "$L/mysql"
    if [ ! -d "$L/mysql/data/mysql" ]; then
      mariadb-install-db --user=mysql --datadir="$L/mysql/data" --auth-root-authentication-method=socket \
        --skip-test-db >"$L/log/mariadb-install-db.log" 2>&1 || { cat "$L/log/mariadb-install-db.log"; die mariadb-install-db; }
    fi
    /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$L/mysql/data" --socket="$L/mysql/mysqld.sock" \
      --pid-file="$L/mysql/mysqld.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --log-error="$L/log/mariadb.err" \
      --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
    echo $! >"$L/run/mariadbd.pid"
    waitfor 60 mariadbd mariadb --socket="$L/mysql/mysqld.sock" -uroot -e 'select 1'
    mariadb --socket="$L/mysql/mysqld.sock" -uroot -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
      GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
    cat >"$L/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=slurm
DebugLevel=info
LogFile=$L/acct/slurmdbd.log
PidFile=$L/acct/slurmdbd.daemon.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOF
    chown slurm:slurm "$L/etc/slurmdbd.conf"; chmod 600 "$L/etc/slurmdbd.conf"
    slurmdbd -D >"$L/log/slurmdbd.stdout" 2>&1 &
    echo $! >"$L/run/slurmdbd.pid"
    waitfor 60 slurmdbd bash -c "exec 3<>/dev/tcp/127.0.0.1/$DBD_PORT"
  fi

  slurmctld -D >"$L/log/slurmctld.stdout" 2>&1 &
  echo $! >"$L/run/slurmctld.pid"
  waitfor 30 slurmctld bash -c 'scontrol ping | grep -q UP'
  for ((k = 1; k <= NODES; k++)); do
    slurmd -D -N "n$k" >"$L/log/slurmd-n$k.stdout" 2>&1 &
    echo $! >"$L/run/slurmd-n$k.pid"
  done
  waitfor 60 "nodes idle" nodes_ready
  if [ "$WITH_DBD" = 1 ]; then
    waitfor 30 "cluster in slurmdbd" bash -c "sacctmgr -n -P show cluster format=cluster | grep -qx $CLUSTER"
    sacctmgr -i add account research Description=test Organization=lab >/dev/null 2>&1 || true
    for ut in $TEST_USERS; do sacctmgr -i add user "${ut%%:*}" account=research >/dev/null 2>&1 || true; done
  fi
  log "cluster up: $(sinfo -h -o '%P %D %T %N' | tr '\n' ' ')($PROCTRACK, hooks in $L/hooks)"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 {start|stop|status|env}" >&2; exit 2 ;;
esac
