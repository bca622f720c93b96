#!/bin/bash
# Slurm 26.05 on pure cgroup v2 under systemd, in a QEMU VM (TCG): the test host sites run
# (Debian 12+, RHEL 9, Ubuntu 22.04+ boot cgroup v2 under systemd). This machine's own cgroup
# layout is hybrid (v1 controllers + an empty cgroup2), which Slurm's cgroup/v2 refuses ("fatal:
# Hybrid mode is not supported"), and its v1 hierarchies are in use: never touched here.
# Verified recipe this follows: /work/shared/reference/cgroup-v2-vm/ (README, observed run).
#
#   scripts/vmcluster.sh start    build the image if needed (cached), boot it, wait until the cluster
#                                 is up: systemd, munge, MariaDB + slurmdbd, slurmctld, two slurmd
#                                 (vm1, vm2: multiple-slurmd, ports 17001/17002), CgroupPlugin=cgroup/v2,
#                                 slurm-energy from this checkout with its hooks installed by
#                                 `slurm-energy install` as an admin would
#   scripts/vmcluster.sh stop     end QEMU by its PID, remove the boot's overlay and share
#   scripts/vmcluster.sh status   exit 0 when the VM answers and both nodes are idle/mixed/alloc
#   scripts/vmcluster.sh version  slurmd -V in the VM
#   scripts/vmcluster.sh exec [-u USER] [-C DIR] [-t SECONDS] [--] CMD...   run CMD in the VM
#   scripts/vmcluster.sh image    only build the image (cached)
#
# How the host drives the VM: a 9p shared directory ($L/share, /host in the VM; virtio, no network).
# `exec` writes a script to share/req/ID.sh; vm-agent.service in the VM runs it and writes
# share/out/ID.{out,err,rc}. The VM has no network device at all (-nic none): a dummy interface with
# a TEST-NET-1 address (192.0.2.10, never routed) gives Slurm an address for its node names.
#
# Image: the project's cached Debian sid root (scripts/slurm-root.sh build sid: Slurm 26.05, munge,
# MariaDB, Python) copied to $VMC/sid, with Debian's kernel, systemd, udev and dbus added (slurmd's
# cgroup/v2 asks systemd for its stepd scope over D-Bus), this checkout installed in its venv, and
# the cluster's config written. The ext4 image is cached under $VMC, keyed by a hash of the sid
# root's package set, the installed checkout and this script: rebuilt only when one changes. Each
# boot runs on a throw-away qcow2 overlay, so every start is a fresh cluster.
#
# Knobs: L=/var/tmp/slurm-energy-cluster-26.05-v2  CACHE=/var/cache/slurm-energy  VMC=$CACHE/vm
#        VM_MEM=3072 (MiB)  VM_CPUS=2  BOOT_TIMEOUT=600 (s)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
SELF="$REPO/scripts/vmcluster.sh"
SROOT="$REPO/scripts/slurm-root.sh"
CACHE=${CACHE:-/var/cache/slurm-energy}
VMC=${VMC:-$CACHE/vm}
L=${L:-/var/tmp/slurm-energy-cluster-26.05-v2}
MARK=/run/slurm-energy-vmcluster  # the VM cluster's $L (its own: a stop of the chroot clusters never reaches it, nor the reverse)
VM_MEM=${VM_MEM:-3072}
VM_CPUS=${VM_CPUS:-2}
BOOT_TIMEOUT=${BOOT_TIMEOUT:-600}
SUITE=sid  # Slurm 26.05
# added to the sid root: a kernel, an init system, and what slurmd's cgroup/v2 needs (dbus)
VM_PKGS="linux-image-amd64 initramfs-tools systemd-sysv udev dbus iproute2 kmod"
RVENV=/opt/slurm-energy/venv
VMIP=192.0.2.10  # TEST-NET-1 (RFC 5737): documentation only, never routed

T0=$(date +%s.%N)
log() { echo "[vmcluster $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "%.1f", a-b}')s] $*" >&2; }
die() { log "FATAL: $*"; exit 1; }
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $s != Z* ]]; }
qemu_pid() { local p; p=$(cat "$L/run/qemu.pid" 2>/dev/null) || return 1; [[ $p =~ ^[0-9]+$ ]] && alive "$p" \
  && [[ $(ps -o comm= -p "$p") == qemu-system* ]] && echo "$p"; }

# ------------------------------------------------------------------------------------------ image
need_qemu() {
  command -v qemu-system-x86_64 >/dev/null && command -v qemu-img >/dev/null && return 0
  log "apt-get install qemu-system-x86 qemu-utils"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 qemu-utils >/dev/null
}

mounted_under() { awk -v r="$1/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo; }

# the VM's root: a copy of the sid root (once per package set) plus VM_PKGS
build_base() {
  local SR VR key
  SR=$(CACHE=$CACHE bash "$SROOT" root $SUITE); VR=$VMC/$SUITE
  key=$(printf '%s\n%s\n' "$(cat "$SR/.apt-done")" "$VM_PKGS" | sha256sum | cut -c1-16)
  [ "$(cat "$VR/.vm-base" 2>/dev/null)" = "$key" ] && return 0
  [ -z "$(mounted_under "$SR")" ] || die "the $SUITE root has mounts (a chroot cluster running?): $(mounted_under "$SR" | head -3 | tr '\n' ' ')"
  [ -z "$(mounted_under "$VR")" ] || die "mounts left under $VR"
  local t; t=$(date +%s)
  log "copying the $SUITE root to $VR ..."
  rm -rf "$VR"; mkdir -p "$VMC"; cp -a "$SR" "$VR"
  cp /etc/resolv.conf "$VR/etc/resolv.conf" 2>/dev/null || true
  log "apt-get install $VM_PKGS (in $VR) ..."
  mount -t proc proc "$VR/proc"
  if ! chroot "$VR" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C \
       bash -c "apt-get update -q && apt-get install -y -q --no-install-recommends $VM_PKGS && apt-get clean" \
       >"$VMC/apt-vm.log" 2>&1; then
    umount "$VR/proc"; tail -20 "$VMC/apt-vm.log"; die "apt-get in $VR failed (log $VMC/apt-vm.log)"
  fi
  umount "$VR/proc"
  echo "$key" >"$VR/.vm-base"
  log "VM root base: $(( $(date +%s) - t )) s"
}

# the cluster's config in the VM root (everything an admin writes); the image key covers it
configure_root() {
  local R=$1 k
  echo vm >"$R/etc/hostname"
  printf '127.0.0.1 localhost\n%s vm\n' "$VMIP" >"$R/etc/hosts"
  printf '/dev/vda / ext4 rw,noatime 0 1\n' >"$R/etc/fstab"
  rm -f "$R/usr/sbin/policy-rc.d"  # the build's guard: in the VM, systemd starts the daemons
  local ut u
  for ut in alice:2001 bob:2002; do
    u=${ut%%:*}
    chroot "$R" id "$u" >/dev/null 2>&1 || chroot "$R" useradd -M -u "${ut##*:}" -s /bin/bash "$u"
    # the sid root's users may come from a chroot cluster (home under its $L): in the VM, /home/<user>
    chroot "$R" usermod -d "/home/$u" "$u"
    chroot "$R" install -d -m 755 -o "$u" -g "$(chroot "$R" id -gn "$u")" "/home/$u"
  done
  [ -s "$R/etc/munge/munge.key" ] || { mkdir -p "$R/etc/munge"; head -c 1024 /dev/urandom >"$R/etc/munge/munge.key"; }
  chroot "$R" sh -c 'chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key'
  install -d "$R/etc/slurm" "$R/etc/slurm-energy" "$R/host"
  chroot "$R" install -d -o slurm -g slurm /var/log/slurm /var/spool/slurmctld
  install -d "$R/var/spool/slurmd/vm1" "$R/var/spool/slurmd/vm2"
  # JobAcctGatherFrequency=task=30 (below): each slurmstepd sits in the job's cgroup (step_*/slurm)
  # and its CPU time counts in the job's cpu.stat but not in sacct's TotalCPU (the tasks'); under
  # TCG its polls cost ~10x what they do on hardware, so they are made rarer
  # slurmdbd's advice (its log on MariaDB 11.8): snapshot isolation off, a larger pool and lock wait
  printf '[mariadbd]\ninnodb_snapshot_isolation=OFF\ninnodb_buffer_pool_size=128M\ninnodb_lock_wait_timeout=900\n' \
    >"$R/etc/mysql/mariadb.conf.d/99-slurm.cnf"
  cat >"$R/etc/slurm/cgroup.conf" <<'EOF'
CgroupPlugin=cgroup/v2
ConstrainCores=yes
ConstrainRAMSpace=yes
EOF
  cat >"$R/etc/slurm-energy/site.yaml" <<'EOF'
# slurm-energy site config of the cgroup v2 VM cluster (written by scripts/vmcluster.sh)
cluster_name: vm
timezone: UTC
sampling:
  interval_s: 2
  interim_s: 5
paths:
  spool_dir: /var/spool/slurm-energy
  results_dir: /var/spool/slurm-energy/results
  store_url: sqlite:////var/lib/slurm-energy/jobs.db
  log_dir: /var/log/slurm-energy
outputs:
  slurm:
    admin_comment: true
    tres_energy: true    # Slurm >= 25.11: sacctmgr modify job ... set TRES=energy=<J> (tested here)
EOF
  install -d -m 1777 "$R/var/spool/slurm-energy"; install -d -m 755 "$R/var/lib/slurm-energy" "$R/var/log/slurm-energy"
  install -d -m 755 "$R/var/lib/prometheus/node-exporter"  # outputs.prometheus' default textfile dir
  # the hooks, installed as the README tells an admin to: `slurm-energy install` prints slurm.conf's lines
  chroot "$R" "$RVENV/bin/slurm-energy" install --hooks-dir /etc/slurm-energy/hooks \
    --config /etc/slurm-energy/site.yaml >"$R/etc/slurm-energy/slurm.conf.lines"
  # the one change to what an admin installs: TCG emulates the CPU ~10-20x slower than hardware
  # (measured in this VM: python3 -c pass 1.1 s, a Prolog 4.7 s), so the hooks' 1.9 s guard, sized
  # for real nodes, would kill every hook here; the VM's hooks get 30 s instead
  sed -i 's|/usr/bin/timeout -s KILL 1.9 |/usr/bin/timeout -s KILL 30 |' "$R"/etc/slurm-energy/hooks/prolog "$R"/etc/slurm-energy/hooks/epilog
  grep -q 'KILL 30 ' "$R/etc/slurm-energy/hooks/prolog" || die "the hooks' time guard was not found (hooks/prolog changed?)"
  {
    cat <<EOF
# the cgroup v2 VM cluster (scripts/vmcluster.sh)
ClusterName=vm
SlurmctldHost=vm
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=task=30
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=vm
JobCompType=jobcomp/none
KillWait=5
MinJobAge=600
EOF
    grep -v '^#' "$R/etc/slurm-energy/slurm.conf.lines"
    for k in 1 2; do
      echo "NodeName=vm$k NodeHostname=vm NodeAddr=$VMIP Port=$((17000 + k)) CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=vm[1-2] Default=YES MaxTime=INFINITE State=UP"
  } >"$R/etc/slurm/slurm.conf"
  cat >"$R/etc/slurm/slurmdbd.conf" <<'EOF'
AuthType=auth/munge
DbdHost=vm
SlurmUser=slurm
DebugLevel=info
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOF
  chroot "$R" sh -c 'chown slurm:slurm /etc/slurm/slurmdbd.conf; chmod 600 /etc/slurm/slurmdbd.conf'
  # ---- systemd units: Debian's for munge, mariadb, slurmdbd, slurmctld; one slurmd unit per node
  local S=$R/etc/systemd/system W=$R/etc/systemd/system/multi-user.target.wants u
  mkdir -p "$W"
  rm -f "$W/slurmd.service"  # Debian's single slurmd would look for NodeName=vm
  local unit; unit=$(ls "$R"/usr/lib/systemd/system/slurmd.service "$R"/lib/systemd/system/slurmd.service 2>/dev/null | head -1)
  [ -n "$unit" ] || die "no slurmd.service in the root"
  for k in 1 2; do
    sed -e "s|^Description=.*|Description=Slurm node daemon vm$k|" \
        -e "s|^ExecStart=/usr/sbin/slurmd \(.*\)|ExecStart=/usr/sbin/slurmd -N vm$k \1|" \
        -e "s|^PIDFile=.*|PIDFile=/run/slurmd-vm$k.pid|" \
        -e "s|^After=\(.*\)|After=\1 vm-net.service slurmctld.service|" "$unit" >"$S/slurmd-vm$k.service"
    grep -q -- "-N vm$k" "$S/slurmd-vm$k.service" || die "cannot make slurmd-vm$k.service from $unit"
    ln -sf "/etc/systemd/system/slurmd-vm$k.service" "$W/slurmd-vm$k.service"
  done
  for u in slurmctld slurmdbd munge mariadb; do
    mkdir -p "$S/$u.service.d"
    printf '[Unit]\nAfter=vm-net.service\nWants=vm-net.service\n' >"$S/$u.service.d/vm.conf"
  done
  printf '[Unit]\nAfter=vm-dbuser.service mariadb.service\nWants=vm-dbuser.service\n[Service]\nRestart=on-failure\nRestartSec=2\n' >>"$S/slurmdbd.service.d/vm.conf"
  printf '[Unit]\nAfter=slurmdbd.service\n' >>"$S/slurmctld.service.d/vm.conf"
  cat >"$S/vm-net.service" <<EOF
[Unit]
Description=an address for Slurm's node names (dummy interface, TEST-NET-1, never routed)
DefaultDependencies=no
Before=network-online.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'ip link set lo up; ip link add dummy0 type dummy; ip addr add $VMIP/24 dev dummy0; ip link set dummy0 up'
[Install]
WantedBy=multi-user.target
EOF
  cat >"$S/vm-dbuser.service" <<'EOF'
[Unit]
Description=slurmdbd's MariaDB user
After=mariadb.service
Requires=mariadb.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
[Install]
WantedBy=multi-user.target
EOF
  cat >"$S/vm-agent.service" <<'EOF'
[Unit]
Description=runs the host's commands from the 9p share (/host/req -> /host/out)
DefaultDependencies=no
After=systemd-modules-load.service local-fs.target
[Service]
ExecStartPre=/bin/sh -c 'modprobe 9pnet_virtio; mountpoint -q /host || mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host0 /host'
ExecStart=/usr/local/sbin/vm-agent
Restart=always
[Install]
WantedBy=multi-user.target
EOF
  cat >"$S/vm-up.service" <<'EOF'
[Unit]
Description=tell the host when the cluster is up (/host/ready)
After=vm-agent.service slurmd-vm1.service slurmd-vm2.service slurmctld.service slurmdbd.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vm-up
[Install]
WantedBy=multi-user.target
EOF
  for u in vm-net vm-dbuser vm-agent vm-up mariadb munge slurmdbd slurmctld; do
    [ -e "$S/$u.service" ] || [ -e "$R/usr/lib/systemd/system/$u.service" ] || [ -e "$R/lib/systemd/system/$u.service" ] || die "no unit $u.service in the root"
    ln -sf "$( [ -e "$S/$u.service" ] && echo "/etc/systemd/system/$u.service" || echo "/usr/lib/systemd/system/$u.service")" "$W/$u.service"
  done
  cat >"$R/usr/local/sbin/vm-agent" <<'EOF'
#!/bin/bash
# the host's requests: /host/req/ID.sh (a script `vmcluster.sh exec` wrote) -> /host/out/ID.{out,err,rc}
mkdir -p /host/req /host/run /host/out
while :; do
  for f in /host/req/*.sh; do
    [ -e "$f" ] || break
    id=${f##*/}; id=${id%.sh}
    mv "$f" "/host/run/$id.sh" 2>/dev/null || continue
    ( bash "/host/run/$id.sh" >"/host/out/$id.out" 2>"/host/out/$id.err" </dev/null; echo $? >"/host/out/$id.rc.tmp"
      mv "/host/out/$id.rc.tmp" "/host/out/$id.rc"; rm -f "/host/run/$id.sh" ) &
  done
  sleep 0.1
done
EOF
  cat >"$R/usr/local/sbin/vm-up" <<'EOF'
#!/bin/bash
# wait for both nodes, add the test account and users, then tell the host (/host/ready)
up() { cut -d' ' -f1 /proc/uptime; }
echo "systemd up at $(up) s; cgroup fs $(stat -fc %T /sys/fs/cgroup): $(cat /sys/fs/cgroup/cgroup.controllers)" >/host/boot.log
for i in $(seq 240); do [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cE '^(idle|mixed|allocated)')" -ge 2 ] && break; sleep 1; done
for i in $(seq 60); do sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx vm && break; sleep 1; done
sacctmgr -i add account research Description=test Organization=lab >/dev/null 2>&1
for u in alice bob root; do sacctmgr -i add user $u account=research >/dev/null 2>&1; done
{ echo "nodes: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')at $(up) s"
  for u in munge mariadb slurmdbd slurmctld slurmd-vm1 slurmd-vm2; do echo "$u: $(systemctl is-active $u)"; done; } >>/host/boot.log
up >/host/ready
EOF
  chmod 755 "$R/usr/local/sbin/vm-agent" "$R/usr/local/sbin/vm-up"
}

# print the image path, building it when its key changed
cmd_image() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  need_qemu
  CACHE=$CACHE bash "$SROOT" build $SUITE  # the cached sid root (debootstrap + apt, once)
  build_base
  CACHE=$VMC bash "$SROOT" venv $SUITE     # this checkout in the VM root's venv (skipped when unchanged)
  local VR=$VMC/$SUITE key img
  key=$(printf '%s\n%s\n%s\n' "$(cat "$VR/.vm-base")" "$(cat "$VR/opt/slurm-energy/.src-hash")" \
        "$(sha256sum "$SELF" | cut -c1-16)" | sha256sum | cut -c1-16)
  img=$VMC/$SUITE-$key.img
  if [ ! -s "$img" ]; then
    local t; t=$(date +%s)
    configure_root "$VR"
    rm -f "$VMC"/$SUITE-*.img "$VMC"/$SUITE-*.vmlinuz "$VMC"/$SUITE-*.initrd
    mkfs.ext4 -q -F -L vmroot -d "$VR" "$img.tmp" 6G >&2
    cp "$(ls "$VR"/boot/vmlinuz-* | sort -V | tail -1)" "$VMC/$SUITE-$key.vmlinuz"
    cp "$(ls "$VR"/boot/initrd.img-* | sort -V | tail -1)" "$VMC/$SUITE-$key.initrd"
    mv "$img.tmp" "$img"
    log "image $img built ($(( $(date +%s) - t )) s)"
  fi
  echo "$img"
}

# ------------------------------------------------------------------------------------------ run
cmd_status() { qemu_pid >/dev/null && [ -f "$L/share/ready" ] && \
  [ "$(cmd_exec -t 30 -- sinfo -h -N -o %T 2>/dev/null | grep -cE '^(idle|mixed|allocated)')" -ge 2 ]; }

cmd_start() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  if cmd_status; then log "VM cluster already running (QEMU $(qemu_pid))"; return 0; fi
  cmd_stop >/dev/null 2>&1 || true
  local img; img=$(cmd_image)
  local base=${img%.img}
  rm -rf "$L"; mkdir -p "$L"/{etc,run,log,share}; chmod 700 "$L/share"
  qemu-img create -q -f qcow2 -b "$img" -F raw "$L/overlay.qcow2"
  printf 'SLURM_VERSION=26.05\nCGROUP=v2\nVM=1\nROOT=\nIMAGE=%s\n' "$img" >"$L/etc/cluster.env"
  echo "$L" >"$MARK"
  trap 'r=$?; if [ $r != 0 ]; then log "start failed (rc $r): stopping"; tail -30 "$L/log/console.log" >&2 2>/dev/null; cmd_stop >/dev/null 2>&1 || true; fi' EXIT
  local t; t=$(date +%s.%N)
  # no network device (-nic none); the share is the only channel; TCG: nested KVM does not work here
  qemu-system-x86_64 -name slurm-energy-vm -machine accel=tcg -cpu max -smp "$VM_CPUS" -m "$VM_MEM" \
    -kernel "$base.vmlinuz" -initrd "$base.initrd" \
    -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet" \
    -drive file="$L/overlay.qcow2",if=virtio,format=qcow2 \
    -virtfs local,path="$L/share",mount_tag=host0,security_model=none,id=host0 \
    -nic none -display none -monitor none -serial file:"$L/log/console.log" -no-reboot \
    -daemonize -pidfile "$L/run/qemu.pid"
  log "QEMU $(cat "$L/run/qemu.pid") booting $img (TCG, $VM_CPUS CPUs, $VM_MEM MiB)"
  local i
  for ((i = 0; i < BOOT_TIMEOUT; i++)); do
    [ -f "$L/share/ready" ] && break
    qemu_pid >/dev/null || die "QEMU exited during boot (console: $L/log/console.log)"
    sleep 1
  done
  [ -f "$L/share/ready" ] || die "the VM's cluster was not up after ${BOOT_TIMEOUT}s (console: $L/log/console.log)"
  local boot; boot=$(awk -v a="$(date +%s.%N)" -v b="$t" 'BEGIN{printf "%.0f", a-b}')
  echo "boot_s=$boot vm_uptime_s=$(cat "$L/share/ready")" >"$L/etc/boot-time"
  sed 's/^/[vm] /' "$L/share/boot.log" >&2 || true
  cmd_status || die "the VM is up but its nodes are not idle: $(cmd_exec -- sinfo -N 2>&1)"
  trap - EXIT
  log "VM cluster up in $boot s (VM uptime $(cat "$L/share/ready") s): $(cmd_exec -- slurmd -V)"
}

cmd_stop() {
  local p i
  if p=$(qemu_pid); then
    kill -TERM "$p" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do alive "$p" || break; sleep 0.1; done
    alive "$p" && kill -KILL "$p" 2>/dev/null || true
    log "stopped QEMU ($p)"
  fi
  rm -f "$L/run/qemu.pid" "$L/overlay.qcow2"
  rm -rf "$L/share"
  [ "$(cat "$MARK" 2>/dev/null)" = "$L" ] && rm -f "$MARK"
  return 0
}

# exec [-u USER] [-C DIR] [-t SECONDS] [--] CMD...: in the VM, as USER (a login-like environment)
cmd_exec() {
  local user=root dir=/ tmo=900 q id f
  while [ $# -gt 0 ]; do
    case "$1" in -u) user=$2; shift 2 ;; -C) dir=$2; shift 2 ;; -t) tmo=$2; shift 2 ;; --) shift; break ;; *) break ;; esac
  done
  [ -d "$L/share/req" ] || die "no VM cluster in $L (scripts/vmcluster.sh start)"
  q=$(printf '%q ' "$@")
  id=$(date +%s%N)-$$-$RANDOM
  f=$L/share/req/.$id.tmp
  cat >"$f" <<EOF
home=\$(getent passwd $(printf %q "$user") | cut -d: -f6)
cd $(printf %q "$dir") || exit 126
exec runuser -u $(printf %q "$user") -- /usr/bin/env -i PATH=$RVENV/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \\
  HOME="\${home:-/}" USER=$(printf %q "$user") LANG=C.UTF-8 SLURM_ENERGY_CONFIG=/etc/slurm-energy/site.yaml $q
EOF
  mv "$f" "$L/share/req/$id.sh"
  local n=0 lim=$((tmo * 20))
  while [ ! -f "$L/share/out/$id.rc" ]; do
    sleep 0.05; n=$((n + 1))
    if [ $n -ge $lim ] || { [ $((n % 40)) = 0 ] && ! qemu_pid >/dev/null; }; then
      rm -f "$L/share/req/$id.sh"; die "exec: no answer from the VM after $((n / 20)) s: $*"; fi
  done
  cat "$L/share/out/$id.out"; cat "$L/share/out/$id.err" >&2
  local rc; rc=$(cat "$L/share/out/$id.rc")
  rm -f "$L/share/out/$id".{out,err,rc}
  return "$rc"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  image) cmd_image ;;
  version) shift; cmd_exec -- slurmd -V ;;
  exec) shift; cmd_exec "$@" ;;
  *) echo "usage: $0 {start|stop|status|image|version|exec [-u USER] [-C DIR] [-t S] CMD...}" >&2; exit 2 ;;
esac
