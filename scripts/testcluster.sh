#!/bin/bash
# A real Slurm cluster on this machine with slurm-energy's hooks installed: munged + MariaDB +
# slurmdbd + slurmctld + NODES slurmd daemons (n1..nN, `slurmd -N nK`, each on its own port; Debian's
# slurmd is built with --enable-multiple-slurmd). Every file lives under $L.
#
#   scripts/testcluster.sh start [--slurm 22.05|24.11|26.05]
#        install what is missing, configure, start, wait until nodes are idle. Default: the host's
#        Slurm (Debian 12: 22.05). Another version runs in a Debian root built with debootstrap
#        (24.11: trixie, 26.05: sid) and cached under /var/cache/slurm-energy/<suite>
#        (scripts/slurm-root.sh): its own Slurm, munge, MariaDB and Python, slurm-energy installed in
#        the root's venv from this checkout, the daemons run chrooted with /proc, /sys, /dev and $L
#        bind-mounted ($L has the same path inside and out). Switching version starts $L afresh.
#   scripts/testcluster.sh start --slurm 26.05 --cgroup v2   (then stop/status/version/exec --cgroup v2)
#        the same cluster on pure cgroup v2 under systemd, in a QEMU VM (scripts/vmcluster.sh: two
#        slurmd vm1/vm2, slurmdbd + MariaDB, CgroupPlugin=cgroup/v2); stop/status/version/exec then
#        act on the VM (exec runs the command in the VM)
#   scripts/testcluster.sh stop     cancel jobs, stop every daemon it started (by PID, munged too),
#                                   unmount the root, remove the nodes' empty cgroup dirs
#   scripts/testcluster.sh status   "up: Slurm V in DIR" and exit 0 when the controller answers and every node is idle/mixed/alloc, else "down" and 1
#   scripts/testcluster.sh env      print `export SLURM_CONF=...` (eval it to use sbatch/squeue on 22.05)
#   scripts/testcluster.sh version  print the running cluster's Slurm version (slurmd -V)
#   scripts/testcluster.sh exec [-u USER] [-C DIR] [--] CMD...
#        run CMD (sbatch, squeue, sacct, jobenergy, ...) for the cluster's version: in the root when
#        there is one, as USER (default root) in DIR, with SLURM_CONF and SLURM_ENERGY_CONFIG set
#
# Knobs: L=/var/tmp/slurm-energy-cluster  NODES=2  CPN=2 (CPUs per node)  WITH_DBD=1  INTERVAL=2
#        VENV=/opt/slurm-energy/venv  CLUSTER=lab  TEST_USERS="alice:2001 bob:2002"  SLURM_VERSION
#        RUN_IN_JOB=1 (PrologFlags=...,RunInJob: hooks in the job's extern step; Slurm >= 24.05)
#        DB_FROM=host|root (which MariaDB server slurmdbd uses, see start_dbd)
# The site config the hooks use is $L/etc/site.yaml (spool $L/spool, store $L/lib/jobs.db, logs
# $L/log, RAPL root $L/powercap: absent unless a test builds a fake powercap tree there).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
MARK=/run/slurm-energy-testcluster  # the $L of the cluster started last (stop/status/exec find it there)
# the host's Slurm major.minor; before scripts/setup.sh installed it: Debian 12's
host_version() { local v; v=$(slurmd -V 2>/dev/null | awk '{split($2, v, "."); print v[1] "." v[2]}'); echo "${v:-22.05}"; }
# --slurm VERSION (any command); $L defaults to one directory per version
ARGS=()
SLURM_VERSION=${SLURM_VERSION:-}
CGROUP=${CGROUP:-}
while [ $# -gt 0 ]; do
  case "$1" in --slurm) SLURM_VERSION=${2:?--slurm needs a version}; shift 2 ;; --slurm=*) SLURM_VERSION=${1#*=}; shift ;;
               --cgroup) CGROUP=${2:?--cgroup needs v1 or v2}; shift 2 ;; --cgroup=*) CGROUP=${1#*=}; shift ;;
               --) ARGS+=("$@"); break ;; *) ARGS+=("$1"); shift ;; esac
done
set -- "${ARGS[@]}"
# cgroup v2: the VM (scripts/vmcluster.sh), with its own $L and mark file; every command for it
# needs --cgroup v2, so a plain `stop` never reaches the VM, nor a VM `stop` a chroot cluster
if [ "$CGROUP" = v2 ]; then
  [ "${SLURM_VERSION:-26.05}" = 26.05 ] || { echo "cgroup v2 runs Slurm 26.05 (the VM), not $SLURM_VERSION" >&2; exit 2; }
  [ "${1:-}" = start ] && [ "${SETUP_DONE:-0}" != 1 ] && bash "$REPO/scripts/setup.sh"
  exec bash "$REPO/scripts/vmcluster.sh" "$@"
fi
[ -z "$CGROUP" ] || [ "$CGROUP" = v1 ] || { echo "--cgroup: v1 or v2, not $CGROUP" >&2; exit 2; }
if [ -z "${L:-}" ]; then
  if [ -n "$SLURM_VERSION" ] && [ "$SLURM_VERSION" != "$(host_version)" ]; then L=/var/tmp/slurm-energy-cluster-$SLURM_VERSION
  elif [ -z "$SLURM_VERSION" ] && [ "${1:-}" != start ] && [ -s "$MARK" ]; then L=$(cat "$MARK")
  else L=/var/tmp/slurm-energy-cluster; fi
fi
NODES=${NODES:-2}
CPN=${CPN:-2}
WITH_DBD=${WITH_DBD:-1}
INTERVAL=${INTERVAL:-2}
VENV=${VENV:-/opt/slurm-energy/venv}
CLUSTER=${CLUSTER:-lab}
TEST_USERS=${TEST_USERS:-"alice:2001 bob:2002"}
CTLD_PORT=6817; SLURMD_PORT=6818; DBD_PORT=6819; DB_PORT=3307; NODE_PORT0=17000
RVENV=/opt/slurm-energy/venv  # the venv inside a Debian root
SROOT="$REPO/scripts/slurm-root.sh"
export SLURM_CONF=$L/etc/slurm.conf

T0=$(date +%s.%N)
log() { echo "[cluster $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "%.1f", a-b}')s] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }
waitfor() { local n=$1 what=$2 i; shift 2
  for ((i = 0; i < n * 10; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  die "timeout (${n}s) waiting for: $what"; }
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $s != Z* ]]; }

# The version and root of the cluster in $L ($L/etc/cluster.env, written by start)
ROOT=
load_state() {
  local f=$L/etc/cluster.env
  [ -f "$f" ] || return 0
  SLURM_VERSION=$(sed -n 's/^SLURM_VERSION=//p' "$f"); ROOT=$(sed -n 's/^ROOT=//p' "$f")
}

# run a command for the cluster's version (in the root when there is one), as root
X() { if [ -n "$ROOT" ]; then chroot "$ROOT" "$@"; else "$@"; fi; }
# daemon NAME [root|host] CMD...: start CMD in the background (chroot execs it: $! is the daemon
# itself, never a subshell) with its output in $L/log/NAME.stdout and its PID in $L/run/NAME.pid
# Inherited descriptors are closed first: a daemon must not hold the caller's flock on
# /var/lock/slurm-energy-cluster.lock (or anything else) for as long as it runs.
daemon() { local name=$1 where=$2 pre=(); shift 2
  [ "$where" = root ] && [ -n "$ROOT" ] && pre=(chroot "$ROOT")
  ( closefds; exec "${pre[@]}" "$@" ) >"$L/log/$name.stdout" 2>&1 </dev/null &
  echo $! >"$L/run/$name.pid"
}
closefds() { local fd
  for fd in /proc/$BASHPID/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done; return 0; }

# asks only a slurmctld this script started and that still runs (else scontrol waits out its timeouts)
ctld_up() { [ -f "$L/run/slurmctld.pid" ] && alive "$(cat "$L/run/slurmctld.pid")" && X scontrol ping 2>/dev/null | grep -q UP; }
cluster_in_dbd() { X sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; }
nodes_ready() {
  local out; out=$(X sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
  [ "$(echo "$out" | grep -cE ' (idle|mixed|allocated)$')" -ge "$NODES" ]
}

cmd_status() { load_state; [ -f "$SLURM_CONF" ] && ctld_up && nodes_ready; }

cmd_env() { echo "export SLURM_CONF=$SLURM_CONF"; }

cmd_version() { load_state; X slurmd -V; }

cmd_exec() {
  load_state
  local user=root dir=/
  while [ $# -gt 0 ]; do
    case "$1" in -u) user=$2; shift 2 ;; -C) dir=$2; shift 2 ;; --) shift; break ;; *) break ;; esac
  done
  local envs=(SLURM_CONF="$SLURM_CONF" SLURM_ENERGY_CONFIG="$L/etc/site.yaml")
  if [ -n "$ROOT" ]; then
    exec bash "$SROOT" exec "$(basename "$ROOT")" -u "$user" -C "$dir" -e "${envs[0]}" -e "${envs[1]}" -- "$@"
  fi
  local home; home=$(getent passwd "$user" | cut -d: -f6)
  exec runuser -u "$user" -- /usr/bin/env -i -C "$dir" PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    HOME="${home:-/}" USER="$user" LANG=C.UTF-8 "${envs[@]}" "$@"
}

# this script and its ancestors (the test runner, CI): never signalled, whatever a stale PID file says
ancestors() { local p=$$; while [ -n "$p" ] && [ "$p" -gt 1 ]; do echo "$p"; p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' '); done; }
ANCESTORS=" $(ancestors | tr '\n' ' ') "
# TERM a PID, wait up to 10 s, then KILL. With EXPECT (a comm regex), only a process whose comm
# matches: a PID file left by a daemon that died names, once the PID is reused, an unrelated process.
stop_pid() { local p=$1 name=$2 expect=${3:-} i comm
  [[ $p =~ ^[0-9]+$ ]] || return 0
  alive "$p" || return 0
  [[ $ANCESTORS == *" $p "* ]] && { log "not stopping $name ($p): it is this script or its caller"; return 0; }
  if [ -n "$expect" ]; then
    comm=$(ps -o comm= -p "$p" 2>/dev/null) || return 0
    [[ $comm =~ $expect ]] || { log "not stopping $name ($p): it is now '$comm', a reused PID"; return 0; }
  fi
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do alive "$p" || break; sleep 0.1; done
  alive "$p" && kill -KILL "$p" 2>/dev/null || true
  log "stopped $name ($p)"
}

# PIDs in the cgroups of this cluster's nodes (job steps, samplers moved there, slurmstepd)
cgroup_pids() { local k
  for ((k = 1; k <= NODES; k++)); do
    find /sys/fs/cgroup/*/"slurm_n$k" -name tasks -exec cat {} + 2>/dev/null || true
  done | sort -un
}

# PIDs whose root directory is the Debian root (every process the chrooted daemons started)
root_pids() { local p
  [ -n "$ROOT" ] || return 0
  for p in /proc/[0-9]*; do [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && echo "${p#/proc/}"; done
}

cmd_stop() {
  load_state
  if [ -f "$SLURM_CONF" ] && ctld_up; then
    for u in $(echo "$TEST_USERS" | sed 's/:[0-9]*//g') root; do X scancel -q -u "$u" 2>/dev/null || true; done
    # wait for the queue to drain, else a `slurmstepd [N.extern]` is left behind
    for ((i = 0; i < 30; i++)); do [ -z "$(X squeue -h 2>/dev/null)" ] && break; sleep 1; done
  fi
  for f in "$L"/run/slurmd-*.pid "$L"/run/slurmctld.pid "$L"/run/slurmdbd.pid "$L"/run/mariadbd.pid "$L"/run/munged.pid; do
    [ -f "$f" ] || continue
    stop_pid "$(cat "$f")" "$(basename "$f" .pid)" '^(slurmd|slurmctld|slurmdbd|mariadbd|mysqld|munged|chroot)$'; rm -f "$f"
  done
  # samplers of this cluster's jobs end by themselves once their job is gone; stop them now. A pid
  # file outlives its sampler (the job dir is kept for 14 days), so its PID may be anyone's by now:
  # only a process whose command line is this job dir's sampler is stopped
  local p f
  for f in "$L"/spool/jobs/*/sampler-*.pid "$L"/spool2/jobs/*/sampler-*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f"); rm -f "$f"
    [[ $p =~ ^[0-9]+$ ]] && alive "$p" || continue
    if [[ "$( (tr '\0' ' ' </proc/"$p"/cmdline) 2>/dev/null)" == *"slurm_energy.slurm."@(sampler|detached|hooks)" sampler $(dirname "$f") "* ]]; then
      stop_pid "$p" sampler
    else
      log "not stopping sampler ($p): no longer the sampler of $(dirname "$f") (a reused PID)"
    fi
  done
  # the node samplers (sampling.sampler: node): one per node and spool, its PID beside its lock
  for f in "$L"/spool/node-sampler-*.pid "$L"/spool2/node-sampler-*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f"); rm -f "$f"
    [[ $p =~ ^[0-9]+$ ]] && alive "$p" || continue
    if [[ "$( (tr '\0' ' ' </proc/"$p"/cmdline) 2>/dev/null)" == *"slurm_energy.slurm.sampler.node $(dirname "$f") "* ]]; then
      stop_pid "$p" node-sampler
    fi
  done
  for p in $(cgroup_pids) $(root_pids); do stop_pid "$p" "leftover $( (tr '\0' ' ' </proc/"$p"/cmdline) 2>/dev/null | cut -c1-60)"; done
  # the nodes' cgroup dirs are left empty by slurmd: remove them (deepest first)
  for ((k = 1; k <= NODES; k++)); do
    find /sys/fs/cgroup/*/"slurm_n$k" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if [ -n "$ROOT" ]; then bash "$SROOT" umount "$(basename "$ROOT")" || die "mounts left under $ROOT"; fi
  [ "$(cat "$MARK" 2>/dev/null)" = "$L" ] && rm -f "$MARK"
  return 0
}

# ---------------------------------------------------------------------------------------------- start

# cgroup v1 controllers mounted (this machine) -> proctrack/cgroup; else linuxproc
detect_cgroup() {
  local cg=1 c
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
}

# users, dirs and device files under $L (in the root too: same uids, same paths)
prepare_dirs() {
  mkdir -p "$L"/{etc,log,run,state/d,dev,home,jobs,lib,textfile}
  chmod 755 "$L" "$L/lib" "$L/home" "$L/jobs"  # never $L's parent: /var/tmp is 1777 and stays so
  local ut u uid
  for ut in $TEST_USERS; do
    u=${ut%%:*}; uid=${ut##*:}
    id "$u" >/dev/null 2>&1 || useradd -m -d "$L/home/$u" -u "$uid" -s /bin/bash "$u"
    install -d -o "$u" -g "$u" "$L/home/$u" "$L/jobs/$u"
    if [ -n "$ROOT" ] && ! chroot "$ROOT" id "$u" >/dev/null 2>&1; then
      chroot "$ROOT" groupadd -g "$(id -g "$u")" "$u" 2>/dev/null || true
      chroot "$ROOT" useradd -M -d "$L/home/$u" -u "$uid" -g "$(id -g "$u")" -s /bin/bash "$u"
    fi
  done
  X id slurm >/dev/null || die "no slurm user (the Debian slurm packages create it)"
  X install -d -o slurm -g slurm "$L/state/ctld" "$L/acct"
  for ((k = 1; k <= NODES; k++)); do install -d "$L/state/d/n$k"; done
  # one fake GPU per node (char devices, major 195): Slurm sets SLURM_JOB_GPUS; there is no NVML here
  echo "AutoDetect=off" >"$L/etc/gres.conf"
  for ((k = 1; k <= NODES; k++)); do
    i=$((k - 1)); [ -c "$L/dev/nvidia$i" ] || mknod "$L/dev/nvidia$i" c 195 "$i"
    echo "NodeName=n$k Name=gpu Type=fake File=$L/dev/nvidia$i" >>"$L/etc/gres.conf"
  done
}

write_site_config() {
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
node_meter:                       # tests/e2e/test_node_meter_e2e.py writes a fake ACPI power meter here
  source: acpi_power_meter
  acpi_root: $L/hwmon
  interval_s: 1
EOF
  # the hooks name the interpreter of the slurm-energy that slurmd will run (the root's venv)
  local venv=$VENV; [ -n "$ROOT" ] && venv=$RVENV
  X "$venv/bin/slurm-energy" install --hooks-dir "$L/hooks" --marks-tmpfs none \
    --config "$L/etc/site.yaml" >"$L/etc/slurm-energy.conf.lines"
}

write_slurm_conf() {
  local HOST MEM_MB ACCT k
  HOST=$(hostname -s)
  MEM_MB=$(awk -v n="$NODES" '/MemTotal/{printf "%d", $2/1024*0.7/n}' /proc/meminfo)
  ACCT="AccountingStorageType=accounting_storage/none"
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
MailProg=/bin/true
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
    # RUN_IN_JOB=1 (Slurm >= 24.05): the Prolog/Epilog run inside the job's extern step cgroup
    if [ "${RUN_IN_JOB:-0}" = 1 ]; then grep -v '^#' "$L/etc/slurm-energy.conf.lines" | sed 's/^PrologFlags=.*/&,RunInJob/'
    else grep -v '^#' "$L/etc/slurm-energy.conf.lines"; fi
    for ((k = 1; k <= NODES; k++)); do
      echo "NodeName=n$k NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((NODE_PORT0 + k)) CPUs=$CPN Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPN ThreadsPerCore=1 RealMemory=$MEM_MB Gres=gpu:fake:1 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
  } >"$L/etc/slurm.conf"
}

start_munged() {
  if [ -n "$ROOT" ]; then
    [ -s "$ROOT/etc/munge/munge.key" ] || chroot "$ROOT" mungekey --create --keyfile=/etc/munge/munge.key
    chroot "$ROOT" sh -c 'chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key; install -d -o munge -g munge -m 0755 /run/munge'
    daemon munged host chroot --userspec=munge:munge "$ROOT" /usr/sbin/munged -F
    waitfor 15 munged chroot "$ROOT" sh -c 'munge -n | unmunge'
    return
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  fi
  chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  if ! (munge -n 2>/dev/null | unmunge >/dev/null 2>&1); then  # a munged that is already there stays
    daemon munged host setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F  # ours: `stop` stops it
    waitfor 15 munged sh -c 'munge -n | unmunge'
  fi
}

# The MariaDB server slurmdbd uses: the host's (DB_FROM=host, the default) or the root's
# (DB_FROM=root). Slurm 24.11's slurmdbd exits against trixie's MariaDB 11.8 server ("fatal:
# _check_mysql_concat_is_sane: null result", libmariadb error 5027), so by default the root's
# slurmdbd talks to the host's MariaDB 10.11 over 127.0.0.1.
DB_FROM=${DB_FROM:-host}
D() { if [ "$DB_FROM" = root ]; then X "$@"; else "$@"; fi; }

start_dbd() {
  local sock=$L/mysql/mysqld.sock
  D install -d -o mysql -g mysql "$L/mysql"
  if [ ! -d "$L/mysql/data/mysql" ]; then
    D mariadb-install-db --user=mysql --datadir="$L/mysql/data" --auth-root-authentication-method=socket \
      --skip-test-db >"$L/log/mariadb-install-db.log" 2>&1 || { cat "$L/log/mariadb-install-db.log"; die mariadb-install-db; }
  fi
  daemon mariadbd "$DB_FROM" /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$L/mysql/data" --socket="$sock" \
    --pid-file="$L/mysql/mysqld.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --log-error="$L/mysql/mariadb.err" \
    --innodb-buffer-pool-size=64M
  waitfor 60 mariadbd D mariadb --socket="$sock" -uroot -e 'select 1'
  D mariadb --socket="$sock" -uroot -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
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
  X chown slurm:slurm "$L/etc/slurmdbd.conf"; chmod 600 "$L/etc/slurmdbd.conf"
  daemon slurmdbd root slurmdbd -D
  waitfor 60 slurmdbd bash -c "exec 3<>/dev/tcp/127.0.0.1/$DBD_PORT"
}

start_slurm() {
  daemon slurmctld root slurmctld -D
  waitfor 30 slurmctld ctld_up
  for ((k = 1; k <= NODES; k++)); do
    daemon "slurmd-n$k" root slurmd -D -N "n$k"
  done
  waitfor 60 "nodes idle" nodes_ready
  if [ "$WITH_DBD" = 1 ]; then
    waitfor 30 "cluster in slurmdbd" cluster_in_dbd
    X sacctmgr -i add account research Description=test Organization=lab >/dev/null 2>&1 || true
    for ut in $TEST_USERS; do X sacctmgr -i add user "${ut%%:*}" account=research >/dev/null 2>&1 || true; done
  fi
}

cmd_start() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  local want=${SLURM_VERSION:-} host
  # the host's Slurm, munge, MariaDB and venv (the tests run there); SETUP_DONE=1: already done
  [ "${SETUP_DONE:-0}" = 1 ] || bash "$REPO/scripts/setup.sh"
  host=$(host_version)
  want=${want:-$host}
  SLURM_VERSION=; load_state  # what $L was last started with (nothing recorded: the host's)
  if cmd_status && [ "$SLURM_VERSION" = "$want" ]; then log "Slurm $want already running"; return 0; fi
  cmd_stop >/dev/null 2>&1 || true
  if [ -d "$L" ] && [ "${SLURM_VERSION:-$host}" != "$want" ]; then
    # job ids restart with a new slurmctld state: a store with the other version's jobs would mix them up
    log "switching $L from Slurm ${SLURM_VERSION:-$host} to $want: starting it afresh"
    rm -rf "${L:?}"/{state,mysql,lib,spool,acct,log,run,hooks,etc}
  fi
  ROOT=
  if [ "$want" != "$host" ]; then
    local suite; suite=$(bash "$SROOT" suite "$want")
    ROOT=$(bash "$SROOT" root "$suite")
    local t=$(date +%s)
    bash "$SROOT" build "$suite"
    log "root $ROOT ready ($(( $(date +%s) - t )) s)"
    cp /etc/hosts "$ROOT/etc/hosts"  # munged and slurmctld resolve this host's name
    mkdir -p "$L"
    trap "r=\$?; [ \$r = 0 ] || bash '$SROOT' umount '$suite' || true" EXIT
    bash "$SROOT" mount "$suite" "$L"
    local got; got=$(chroot "$ROOT" slurmd -V | awk '{split($2, v, "."); print v[1] "." v[2]}')
    [ "$got" = "$want" ] || { bash "$SROOT" umount "$suite"; die "the $suite root has Slurm $got, not $want"; }
  fi
  # from here a failed start stops what it started (and unmounts), so nothing is left behind
  trap 'r=$?; if [ $r != 0 ]; then log "start failed (rc $r): stopping what it started"; cmd_stop >/dev/null 2>&1 || true; fi' EXIT
  prepare_dirs
  printf 'SLURM_VERSION=%s\nROOT=%s\n' "$want" "$ROOT" >"$L/etc/cluster.env"
  echo "$L" >"$MARK"
  SLURM_VERSION=$want
  detect_cgroup
  write_site_config
  write_slurm_conf
  start_munged
  [ "$WITH_DBD" = 1 ] && start_dbd
  start_slurm
  trap - EXIT
  log "cluster up: $(X slurmd -V) $(X sinfo -h -o '%P %D %T %N' | tr '\n' ' ')($PROCTRACK, hooks in $L/hooks${ROOT:+, root $ROOT})"
}

case "${1:-}" in
  start) [ $# = 1 ] || die "unknown option $2"; cmd_start ;;
  stop) cmd_stop ;;
  status) if cmd_status; then echo "up: Slurm ${SLURM_VERSION:-$(X slurmd -V 2>/dev/null)} in $L"; else echo "down ($L)"; exit 1; fi ;;
  env) cmd_env ;;
  version) cmd_version ;;
  exec) shift; cmd_exec "$@" ;;
  *) echo "usage: $0 {start [--slurm 22.05|24.11|26.05] [--cgroup v2]|stop|status|env|version|exec [-u USER] [-C DIR] CMD...}" >&2; exit 2 ;;
esac
